"""The single writer: one pykka actor owns the store's write connection.

Every write of the durable hub is a *write request*: a function run against the
connection inside a transaction. Callers enqueue requests from any thread; the actor
drains **whatever is waiting** into one transaction, commits it, and only then
completes each request (group commit). A caller blocks on its own request's waiter,
never the actor on anyone: while one batch waits for its fsync, the next one
accumulates, so under concurrency N requests cost one fsync instead of N.

Guarantees:

* A request is acknowledged (its waiter completed, its ``after_commit`` run) only after
  the transaction holding it committed. With ``Durability.FULL`` that commit is on disk.
  When more requests are already queued, the callers of a commit are woken while the
  next batch's commit waits for the disk, at the latest.
* Requests run, commit and are acknowledged in the order they were enqueued, except
  that an *urgent* request (``urgent=True``: the post that wakes a sleeping crew, the
  wake's read of its kept events) overtakes queued requests that all carry keys
  (``key``: one string or a tuple of them) none of which it shares
  (:mod:`orkeon_actors.store.write_queue` has the rules: FIFO per key, a request without
  a key is never overtaken, bulk batches are bounded and never starved).
  ``after_commit`` actions run on the writer thread in commit order (the durable hub
  uses this to hand messages to live mailboxes in exactly their durable order; a
  mailbox's posts carry its address as their key, so they stay in order). An urgent
  batch's callers are woken right after its commit, before those of the batch before.
  Urgent requests may also cut into a bulk batch in progress (:meth:`_WriterActor._write`):
  they commit with the part written so far, the rest is queued again.
* The open makes one commit that changes nothing before the first request
  (:func:`_first_commit`), so the first request does not pay the WAL's restart.
* A request that raises is rolled back alone (it runs under a ``SAVEPOINT``) and fails
  with its own error; the rest of its batch commits. ``single_statement=True`` skips the
  savepoint for a request made of one statement, which SQLite already rolls back alone.
* If the commit itself fails (disk full, I/O error), the whole batch is rolled back and
  every request in it fails with ``StoreWriteError``: nothing of it is in the store;
  ``on_rollback`` hooks then run on the writer thread (to resynchronise caches).
* Requests made *in a* :class:`WriteGroup` (``submit_in``/``execute_in``/``post_in``)
  that follow each other in a batch are applied by one call of the group (one
  ``executemany`` instead of one statement each): the hot path of durable posts and
  acknowledgements. Each still gets its own result or error.
* After :meth:`StoreWriter.stop`, queued requests are still committed; new ones raise
  ``HubStoppedError``.
"""

from __future__ import annotations

import abc
import threading
from collections import Counter
from collections.abc import Callable
from typing import Any, Generic, TypeVar

import apsw
import attrs
import pykka
from loguru import logger

from orkeon_actors.actors.caller_runs import never_run_turns_here
from orkeon_actors.errors import HubStoppedError, StoreWriteError
from orkeon_actors.hub.waiter import Waiter
from orkeon_actors.store import faults
from orkeon_actors.store.damage import DAMAGE_ERRORS, as_store_error
from orkeon_actors.store.write_queue import Key, WriteQueue

__all__ = ["CUT_IN_EVERY", "StoreWriter", "WriteGroup", "WriterStats", "Work"]

T = TypeVar("T")
I = TypeVar("I")  # noqa: E741
Work = Callable[[apsw.Connection], T]


class WriteGroup(abc.ABC, Generic[I, T]):
    """Work shared by many requests: consecutive requests of a batch made in the same
    group are applied by one :meth:`apply` call, on the writer thread."""

    @abc.abstractmethod
    def apply(self, conn: apsw.Connection, items: list[I]) -> list[T | BaseException]:
        """Write every item; return one result (or the exception failing just that
        item) per item, in order. Raising fails the whole group: the writer then retries
        the items one by one to isolate the culprit."""

    def atomic(self, items: list[I]) -> bool:
        """Whether :meth:`apply` writes ``items`` with one statement (which SQLite rolls
        back whole if it fails), so the writer needs no savepoint around it. Every
        SQLite call releases the GIL, and a busy process makes the writer wait to get it
        back: fewer calls per batch is what keeps group commit fast."""
        return False


class _Request(Generic[T]):
    __slots__ = (
        "after_commit",
        "error",
        "group",
        "item",
        "key",
        "on_error",
        "result",
        "single",
        "urgent",
        "waiter",
        "work",
    )

    def __init__(
        self,
        work: Work[T] | None,
        after_commit: Callable[[T], None] | None,
        on_error: Callable[[BaseException], None] | None,
        waiter: Waiter[T] | None,
        single: bool,
        group: WriteGroup[Any, T] | None = None,
        item: Any = None,
        key: Key = None,
        urgent: bool = False,
    ) -> None:
        self.work = work
        self.key = key
        self.urgent = urgent
        self.group = group
        self.item = item
        self.after_commit = after_commit
        self.on_error = on_error
        self.waiter = waiter
        self.single = single
        self.result: Any = None
        self.error: BaseException | None = None

    def settle(self) -> None:
        error = self.error
        if error is None:
            if self.waiter is not None:
                self.waiter.try_complete(self.result)
            return
        if self.waiter is not None:
            self.waiter.try_fail(error)
        elif self.on_error is not None:
            try:
                self.on_error(error)
            except Exception:  # a broken callback must not keep other callers waiting
                logger.opt(exception=True).error("the error callback of a background store write failed")
        else:
            logger.opt(exception=error).error("a background store write failed")


@attrs.define
class WriterStats:
    """Counters of the writer, for benchmarks and gauges. ``batch_sizes`` maps a batch
    size to how many transactions had that many requests."""

    transactions: int = 0
    requests: int = 0
    failed_transactions: int = 0
    urgent_requests: int = 0
    """Requests that went into the urgent lane (overtaking queued bulk requests)."""
    cut_in: int = 0
    """Urgent requests written in the middle of a bulk batch (committed with its part
    written so far, the rest queued again)."""
    batch_sizes: Counter[int] = attrs.field(factory=Counter)

    @property
    def mean_batch(self) -> float:
        return self.requests / self.transactions if self.transactions else 0.0


CUT_IN_EVERY = 16
"""Requests of a group written with one statement between two looks for urgent
requests that may cut in (requests applied alone are followed by a look each)."""


class _Flush:
    __slots__ = ()


_FLUSH = _Flush()


class _WriterActor(pykka.ThreadingActor):
    use_daemon_thread = True  # never holds an interpreter exit up: see orkeon_actors.actors.exit

    def __init__(self, writer: StoreWriter, conn: apsw.Connection) -> None:
        super().__init__()
        self._writer = writer
        self._conn = conn
        # Requests committed but whose callers are not woken yet: when another batch is
        # already queued, the callers of a commit are woken just before the *next*
        # commit's fsync (while the GIL is free), not while that batch's statements run
        # (a woken caller competes with the writer for the GIL at every SQLite call).
        self._deferred: list[_Request[Any]] = []

    def on_start(self) -> None:
        # Callbacks after a commit hand posts to live mailboxes; their consumers' code
        # must not run on (and hold up, or wait for) the writer's own thread.
        never_run_turns_here()

    def on_receive(self, message: object) -> object:
        if message is _FLUSH:
            self._flush_once()
        return None

    def _flush_once(self) -> None:
        batch, more = self._writer.take_batch()
        if batch:
            self._run(batch)
        else:
            self._wake_deferred()
        if more:
            self.actor_ref.tell(_FLUSH)

    def on_stop(self) -> None:
        while True:
            batch, _ = self._writer.take_batch()
            if not batch:
                break
            self._run(batch)
        self._wake_deferred()
        self._conn.close()

    def on_failure(self, exception_type: object, exception_value: object, traceback: object) -> None:
        self._wake_deferred()
        self._conn.close()

    def _wake_deferred(self) -> None:
        deferred, self._deferred = self._deferred, []
        for request in deferred:
            request.settle()

    def _run(self, batch: list[_Request[Any]]) -> None:
        conn = self._conn
        stats = self._writer.stats
        try:
            conn.execute("BEGIN IMMEDIATE")
            self._write(conn, batch)
            faults.hit("writer.before_commit")
            urgent = batch[-1].urgent  # urgent requests come first, or cut in at the end
            if not urgent:  # an urgent batch commits first; the callers of the last one wait
                self._wake_deferred()
            conn.execute("COMMIT")
        except Exception as exc:
            self._wake_deferred()
            self._abort(conn, batch, exc)
            stats.failed_transactions += 1
            return
        faults.hit("writer.after_commit")
        stats.transactions += 1
        stats.requests += len(batch)
        stats.batch_sizes[len(batch)] += 1
        for request in batch:
            if request.error is None and request.after_commit is not None:
                try:
                    request.after_commit(request.result)
                except Exception as exc:  # reported to the request's caller
                    request.error = exc
        for request in batch:
            if isinstance(request.error, DAMAGE_ERRORS):  # a damaged file: typed for the caller
                request.error = as_store_error(request.error, conn.filename, "writing to it")
        if urgent:
            stats.urgent_requests += sum(1 for request in batch if request.urgent)
            for request in batch:
                if request.urgent:
                    request.settle()
            self._wake_deferred()
            batch = [request for request in batch if not request.urgent]
        if self._writer.has_queued():
            self._deferred = batch  # woken before the next commit, see __init__
        else:
            for request in batch:
                request.settle()

    def _write(self, conn: apsw.Connection, batch: list[_Request[Any]]) -> None:
        """Run ``batch``'s requests in the open transaction; ``batch`` is left holding
        what was written (what its commit or its failure settles). Between the
        statements of a bulk batch (after each request applied alone, and every
        :data:`CUT_IN_EVERY` of a group; never before the first), urgent requests queued
        meanwhile may cut in
        (:meth:`~orkeon_actors.store.write_queue.WriteQueue.cut_in`): they are written
        instead of the rest, which goes back to the queue, and commit with what was
        written so far. A woken crew's post then waits for part of a batch, not for a
        whole one and a transaction of its own."""
        writer = self._writer
        stats = writer.stats
        index, size = 0, len(batch)
        bulk = not batch[0].urgent
        while index < size:
            if bulk and index and writer.urgent_waiting():
                joining = writer.cut_in(batch[index:], writer.max_batch - index)
                if joining:
                    stats.cut_in += len(joining)
                    del batch[index:]  # queued again
                    batch.extend(joining)
                    self._write(conn, joining)
                    return
            request = batch[index]
            group = request.group
            if group is None:
                self._apply(conn, request)
                index += 1
                continue
            end = index + 1
            while end < size and batch[end].group is group and (not bulk or end - index < CUT_IN_EVERY):
                end += 1
            self._apply_group(conn, group, batch[index:end])
            index = end

    @staticmethod
    def _apply_group(conn: apsw.Connection, group: WriteGroup[Any, Any], members: list[_Request[Any]]) -> None:
        """Apply ``members`` with one ``group.apply`` call (under a savepoint unless the
        group writes them in one statement). If the call raises, its partial effects are
        rolled back and, for several members, each is applied alone so that only the
        culprit fails."""
        items = [member.item for member in members]
        savepoint = not group.atomic(items)
        if savepoint:
            conn.execute("SAVEPOINT grouped")
        try:
            outcomes = group.apply(conn, items)
        except Exception as exc:
            if not conn.in_transaction:
                raise  # SQLite rolled the whole transaction back: the batch fails
            if savepoint:
                conn.execute("ROLLBACK TO grouped")
                conn.execute("RELEASE grouped")
            if len(members) == 1:
                members[0].error = exc
                return
            for member in members:
                _WriterActor._apply_group(conn, group, [member])
            return
        if savepoint:
            conn.execute("RELEASE grouped")
        for member, outcome in zip(members, outcomes, strict=True):
            if isinstance(outcome, BaseException):
                member.error = outcome
            else:
                member.result = outcome

    @staticmethod
    def _apply(conn: apsw.Connection, request: _Request[Any]) -> None:
        assert request.work is not None
        if request.single:
            try:
                request.result = request.work(conn)
            except Exception as exc:
                if not conn.in_transaction:
                    raise  # SQLite rolled the whole transaction back: the batch fails
                request.error = exc
            return
        conn.execute("SAVEPOINT request")
        try:
            request.result = request.work(conn)
        except Exception as exc:
            if not conn.in_transaction:
                raise
            conn.execute("ROLLBACK TO request")
            request.error = exc
        conn.execute("RELEASE request")

    def _abort(self, conn: apsw.Connection, batch: list[_Request[Any]], exc: Exception) -> None:
        if conn.in_transaction:
            try:
                conn.execute("ROLLBACK")
            except apsw.Error:
                logger.opt(exception=True).error("rolling back a failed store transaction failed")
        for hook in self._writer.on_rollback:
            try:
                hook(conn)
            except Exception:
                logger.opt(exception=True).error("a store rollback hook failed")
        error = StoreWriteError(
            f"the store transaction failed and was rolled back ({type(exc).__name__}: {exc}); "
            "nothing of it was written. Check free disk space and that the file is writable."
        )
        error.__cause__ = exc
        logger.error("store transaction of {} request(s) failed: {!r}", len(batch), exc)
        for request in batch:
            request.error = error
            request.settle()


def _first_commit(conn: apsw.Connection) -> None:
    """Commit one write that changes nothing (the header's ``user_version`` set to
    itself) before the first request. The first commit on a newly opened connection
    restarts the WAL and syncs its header: ≈ 7 ms more than the next ones on this
    machine (median of 12 restarts: 9.2 against 2.1 ms), which the first wake after
    every restart paid. The open pays it instead."""
    with conn:  # a transaction: BEGIN ... COMMIT (or ROLLBACK if it raises)
        version = int(str(conn.execute("PRAGMA user_version").fetchall()[0][0]))
        conn.execute(f"PRAGMA user_version = {version}")


class StoreWriter:
    """The write side of the store. Thread-safe; see the module docstring."""

    def __init__(self, conn: apsw.Connection, *, max_batch: int = 2048, bulk_batch: int = 128) -> None:
        """``max_batch``: requests per transaction at most; ``bulk_batch``: bulk (not
        urgent) requests per transaction at most, which bounds how long a batch in
        progress holds an urgent request back. Raises ``InvalidArgumentError`` below 1."""
        self._queue: WriteQueue[_Request[Any]] = WriteQueue(max_batch=max_batch, bulk_batch=bulk_batch)
        self.max_batch = max_batch
        self.stats = WriterStats()
        self._lock = threading.Lock()
        self._scheduled = False
        self._closed = False
        self.on_rollback: list[Callable[[apsw.Connection], None]] = []
        """Run on the writer thread after a failed transaction was rolled back."""
        _first_commit(conn)
        self._ref = _WriterActor.start(self, conn)

    def _enqueue(self, request: _Request[Any]) -> None:
        with self._lock:
            if self._closed:
                raise HubStoppedError("the runtime was stopped: its store accepts no more writes")
            self._queue.push(request)
            if self._scheduled:
                return
            self._scheduled = True
        self._ref.tell(_FLUSH)

    # -- the writer actor's protocol with its queue ------------------------------------

    def has_queued(self) -> bool:
        """Whether requests wait to be written (the writer actor's read)."""
        return bool(self._queue)

    def urgent_waiting(self) -> bool:
        """Whether an urgent request is queued (the writer actor's read, without the lock)."""
        return self._queue.urgent_waiting()

    def cut_in(self, rest: list[_Request[Any]], room: int) -> list[_Request[Any]]:
        """The urgent requests that cut into the batch in progress, whose ``rest`` is not
        written yet (queued again if any cut in); the writer actor's call."""
        with self._lock:
            return self._queue.cut_in(rest, room)

    def take_batch(self) -> tuple[list[_Request[Any]], bool]:
        """(the next batch, whether more requests remain queued after it): the writer
        actor takes its work here, on its thread."""
        with self._lock:
            batch = self._queue.take()
            more = bool(self._queue)
            if not more:
                self._scheduled = False
            return batch, more

    def submit(
        self,
        work: Work[T],
        *,
        after_commit: Callable[[T], None] | None = None,
        single_statement: bool = False,
        key: Key = None,
        urgent: bool = False,
    ) -> Waiter[T]:
        """Enqueue ``work``; the returned waiter completes with its result once committed
        (and ``after_commit`` ran), or fails with its error. ``key``: what the request
        orders against (FIFO per key; without one it orders against every request);
        ``urgent``: overtake queued requests of other keys (see the module docstring;
        an urgent request without a key, or behind one of its key, waits its turn)."""
        waiter: Waiter[T] = Waiter()
        self._enqueue(_Request(work, after_commit, None, waiter, single_statement, None, None, key, urgent))
        return waiter

    def execute(
        self,
        work: Work[T],
        *,
        after_commit: Callable[[T], None] | None = None,
        single_statement: bool = False,
        key: Key = None,
        urgent: bool = False,
    ) -> T:
        """Run ``work`` in the next group commit and block until it committed.

        Returns ``work``'s result; raises ``work``'s own error (nothing of it written),
        ``StoreWriteError`` (the commit failed) or ``HubStoppedError`` (writer stopped).
        ``key`` and ``urgent``: see :meth:`submit`.
        """
        return self.submit(
            work, after_commit=after_commit, single_statement=single_statement, key=key, urgent=urgent
        ).wait()

    def post(
        self,
        work: Work[T],
        *,
        after_commit: Callable[[T], None] | None = None,
        on_error: Callable[[BaseException], None] | None = None,
        single_statement: bool = False,
        key: Key = None,
        urgent: bool = False,
    ) -> None:
        """Enqueue ``work`` without waiting for it. A failure goes to ``on_error``
        (called on the writer thread), or is logged. ``key`` and ``urgent``: see
        :meth:`submit`."""
        self._enqueue(_Request(work, after_commit, on_error, None, single_statement, None, None, key, urgent))

    def submit_in(
        self,
        group: WriteGroup[I, T],
        item: I,
        *,
        after_commit: Callable[[T], None] | None = None,
        key: Key = None,
        urgent: bool = False,
    ) -> Waiter[T]:
        """Like :meth:`submit`, for an item of ``group``."""
        waiter: Waiter[T] = Waiter()
        self._enqueue(_Request(None, after_commit, None, waiter, True, group, item, key, urgent))
        return waiter

    def execute_in(
        self,
        group: WriteGroup[I, T],
        item: I,
        *,
        after_commit: Callable[[T], None] | None = None,
        key: Key = None,
        urgent: bool = False,
    ) -> T:
        """Like :meth:`execute`, for an item of ``group``."""
        return self.submit_in(group, item, after_commit=after_commit, key=key, urgent=urgent).wait()

    def post_in(
        self,
        group: WriteGroup[I, T],
        item: I,
        *,
        after_commit: Callable[[T], None] | None = None,
        on_error: Callable[[BaseException], None] | None = None,
        key: Key = None,
        urgent: bool = False,
    ) -> None:
        """Like :meth:`post`, for an item of ``group``."""
        self._enqueue(_Request(None, after_commit, on_error, None, True, group, item, key, urgent))

    def stop(self) -> None:
        """Commit what is queued, close the connection, stop the actor; idempotent."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
        try:
            self._ref.stop()
        except pykka.ActorDeadError:
            logger.error("the store writer had already died; queued writes were failed")
        with self._lock:
            leftovers = self._queue.take_all()
        for request in leftovers:
            request.error = HubStoppedError("the store writer stopped before this write ran")
            request.settle()
