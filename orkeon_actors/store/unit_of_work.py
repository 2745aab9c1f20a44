"""The unit of work: what a crew or agent handler commits atomically (spec §11.2-11.3).

A handler that processes one message opens a unit of work *consuming* it, records its
effects, and commits. The commit is one transaction holding, together:

1. the ``processed_messages`` row ``(message id, crew id)``;
2. the crew's snapshot (``crew_snapshots``) and pending-wait changes;
3. every outgoing message, as ``Pending`` rows of the ``outbox``;
4. the acknowledgement of the consumed message (its ``mailboxes`` row is deleted).

So either all of it happened or none of it did. If the process dies before the commit,
the message is still in its mailbox and is delivered again after the restart; if it dies
after, the message is gone and its effects are in, the outgoing messages dispatched at
the next boot at the latest. A message delivered twice to the same crew is processed
once: the second unit of work finds ``already_processed`` (or, in a race, its commit
finds the row and applies nothing) -- across restarts too.

Example::

    with reg.reader() as reader:
        for message in reader:
            with hub.unit_of_work("billing", "scorer", consuming=message) as uow:
                if uow.already_processed:
                    continue                  # leaving the block acknowledges it
                total = handle(message)
                uow.save_snapshot({"total": total}, mode="sequential", schema_version=1)
                uow.post("agent://audit/log", {"total": total})

Leaving the ``with`` block normally commits; leaving it with an exception discards
everything (nothing is written, the message stays unacknowledged). ``commit()`` and
``discard()`` can also be called directly.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import TracebackType
from typing import TYPE_CHECKING

import apsw

from orkeon_actors.errors import InvalidArgumentError, MailboxNotFoundError
from orkeon_actors.hub.boundary import bounded_payload, check_metadata, check_publish_topic
from orkeon_actors.hub.port import POST_TOPIC, SEND_TOPIC, CallerContext
from orkeon_actors.model.address import MailboxAddress, Scheme, validate_topic
from orkeon_actors.model.message import Message, encode_payload
from orkeon_actors.model.options import DEFAULT_PUBLISH_OPTIONS, PublishOptions
from orkeon_actors.store import mailboxes
from orkeon_actors.store.codec import format_time
from orkeon_actors.store.outbox import POST, PUBLISH, insert_outbox
from orkeon_actors.store.records import CrewState, OutboxRecord, PendingWaitRecord, SnapshotRecord, to_row

if TYPE_CHECKING:
    from orkeon_actors.store.durable_hub import SqliteEventHub

__all__ = ["PUT_WAIT", "UPSERT_SNAPSHOT", "UnitOfWork", "delete_crew"]

UPSERT_SNAPSHOT = """
INSERT INTO crew_snapshots (crew_id, snapshot, mode, schema_version, snapshot_at, state)
VALUES (?, ?, ?, ?, ?, ?)
ON CONFLICT (crew_id) DO UPDATE SET snapshot = excluded.snapshot, mode = excluded.mode,
    schema_version = excluded.schema_version, snapshot_at = excluded.snapshot_at, state = excluded.state
"""
PUT_WAIT = """
INSERT OR REPLACE INTO pending_waits (wait_id, crew_id, kind, started_at, expires_at, topic, target_crew_id,
                                      target_mailbox, correlation_id, metadata_match)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
"""


def delete_crew(conn: apsw.Connection, crew_id: str) -> tuple[int, int]:
    """Delete a crew's snapshot, its pending waits (FK cascade), its
    ``processed_messages`` rows and its mailbox marks. Returns ``(pending waits,
    processed rows and marks)`` deleted."""
    row = conn.execute("SELECT count(*) FROM pending_waits WHERE crew_id = ?", (crew_id,)).fetchone()
    waits = int(row[0]) if row is not None else 0
    conn.execute("DELETE FROM processed_messages WHERE crew_id = ?", (crew_id,))
    processed = conn.changes()
    conn.execute("DELETE FROM mailbox_marks WHERE crew_id = ?", (crew_id,))
    processed += conn.changes()
    conn.execute("DELETE FROM crew_snapshots WHERE crew_id = ?", (crew_id,))
    return waits, processed


class UnitOfWork:
    """Effects of one handler run, committed atomically. Create it with
    ``SqliteEventHub.unit_of_work``; see the module docstring. Not thread-safe: one
    handler, one thread."""

    def __init__(self, hub: SqliteEventHub, caller: CallerContext, consuming: Message | None) -> None:
        self._hub = hub
        self.caller = caller
        self.consuming = consuming
        self.already_processed: bool = consuming is not None and hub.is_processed(consuming.id, caller.crew_id)
        """True when this crew already processed ``consuming``: skip the work; committing
        then only acknowledges the message."""
        self._snapshot: SnapshotRecord | None = None
        self._waits_put: dict[str, PendingWaitRecord] = {}
        self._waits_deleted: set[str] = set()
        self._outgoing: list[tuple[str, Message, str | None]] = []
        self._finished: str | None = None

    # -- recording effects ------------------------------------------------------------

    def _check_writable(self) -> None:
        if self._finished is not None:
            raise InvalidArgumentError(f"this unit of work was already {self._finished}; open a new one")
        if self.already_processed:
            assert self.consuming is not None
            raise InvalidArgumentError(
                f"message {self.consuming.id} was already processed by crew {self.caller.crew_id}: "
                "skip the work (check uow.already_processed) and commit to acknowledge it"
            )

    def save_snapshot(
        self, snapshot: object, *, mode: str, schema_version: int, state: CrewState | str = CrewState.ACTIVE
    ) -> None:
        """Write the crew's state: ``snapshot`` is bytes or a JSON-serialisable value.
        ``state=CrewState.COMPLETED`` deletes the crew at once instead (with its waits
        and ``processed_messages`` rows: spec §11.4)."""
        self._check_writable()
        if not isinstance(mode, str) or not mode:
            raise InvalidArgumentError("mode must be a non-empty string (the crew's ProcessType)")
        if isinstance(schema_version, bool) or not isinstance(schema_version, int) or schema_version < 0:
            raise InvalidArgumentError("schema_version must be a non-negative int")
        self._snapshot = SnapshotRecord(
            self.caller.crew_id, encode_payload(snapshot), mode, schema_version, self._hub.clock.now(), CrewState(state)
        )

    def put_pending_wait(self, wait: PendingWaitRecord) -> None:
        """Record a pending wait of this crew (atomically with its snapshot, spec §7.2).
        The crew must have a snapshot: saved in this unit of work or before."""
        self._check_writable()
        if wait.crew_id != self.caller.crew_id:
            raise InvalidArgumentError(
                f"pending wait {wait.wait_id} belongs to crew {wait.crew_id}, not {self.caller.crew_id}"
            )
        self._waits_deleted.discard(wait.wait_id)
        self._waits_put[wait.wait_id] = wait

    def delete_pending_wait(self, wait_id: str) -> None:
        """Remove a pending wait of this crew (a no-op if there is none)."""
        self._check_writable()
        self._waits_put.pop(wait_id, None)
        self._waits_deleted.add(wait_id)

    def post(
        self, to: MailboxAddress | str, payload: object = b"", metadata: Mapping[str, str] | None = None
    ) -> Message:
        """Queue a post, sent once the unit of work commits. The publish stages run
        now (a refusal raises here); an unknown mailbox raises ``MailboxNotFoundError``.
        Returns the message as it will be delivered."""
        self._check_writable()
        hub = self._hub
        address = MailboxAddress.parse(to)
        if address.scheme is Scheme.TOPIC:
            check_publish_topic(self.caller, address.name or "")
        check_metadata(metadata)
        payload = bounded_payload(payload, hub.limits)
        if address.scheme is Scheme.TOPIC:
            message = hub.stamp(self.caller, address.name or "", payload, metadata, None, address)
            self._outgoing.append((PUBLISH, hub.outbox_chain("post")(message), None))
            return self._outgoing[-1][1]
        message = hub.stamp(self.caller, POST_TOPIC, payload, metadata, address.crew_id, address)
        # The stages first, then the missing mailbox: a caller a stage refuses (the ACL)
        # gets that refusal whether the mailbox exists or not (docs/acl.md §7).
        staged = hub.outbox_chain("post")(message)
        if not hub.mailbox_exists(address):
            raise MailboxNotFoundError(address)
        self._outgoing.append((POST, staged, None))
        return staged

    def publish(self, topic: str, payload: object = b"", options: PublishOptions | None = None) -> Message:
        """Queue a publish, routed once the unit of work commits (a retained value is
        retained then). The publish stages run now. Returns the message."""
        self._check_writable()
        validate_topic(topic)
        check_publish_topic(self.caller, topic)
        options = options or DEFAULT_PUBLISH_OPTIONS
        check_metadata(options.metadata)
        hub = self._hub
        payload = bounded_payload(payload, hub.limits)
        message = hub.stamp(
            self.caller, topic, payload, options.metadata, options.target_crew_id, None, None, options.schema_id
        )
        key = options.last_value_key if options.retain_as_last_value else None
        self._outgoing.append((PUBLISH, hub.outbox_chain("publish")(message), key))
        return self._outgoing[-1][1]

    @property
    def outgoing(self) -> list[Message]:
        """The messages queued so far, in order."""
        return [message for _, message, _ in self._outgoing]

    # -- finishing --------------------------------------------------------------------

    def commit(self) -> bool:
        """Apply everything in one transaction; see the module docstring.

        Returns ``True`` when applied, ``False`` when the consumed message turned out to
        be processed already (then only its acknowledgement was written). Raises
        ``StoreWriteError`` if the transaction failed (nothing written), or the error a
        write raised (for example ``InvalidArgumentError`` for a pending wait without a
        snapshot): nothing is written then either.
        """
        if self._finished is not None:
            raise InvalidArgumentError(f"this unit of work was already {self._finished}; open a new one")
        self._finished = "committed"
        hub = self._hub
        consuming = self.consuming
        crew = self.caller.crew_id
        now = format_time(hub.clock.now())
        ack: tuple[str, str] | None = None
        if (
            consuming is not None
            and consuming.target_mailbox is not None
            and consuming.topic in (POST_TOPIC, SEND_TOPIC)
        ):
            ack = (str(consuming.target_mailbox), consuming.id)
        snapshot = self._snapshot
        waits_put = list(self._waits_put.values())
        waits_deleted = sorted(self._waits_deleted)
        outgoing = list(self._outgoing)

        def work(conn: apsw.Connection) -> tuple[bool, list[OutboxRecord]]:
            if consuming is not None:
                conn.execute(
                    "INSERT OR IGNORE INTO processed_messages (message_id, crew_id, processed_at) VALUES (?, ?, ?)",
                    (consuming.id, crew, now),
                )
                if not conn.changes():
                    if ack is not None:
                        mailboxes.delete_message(conn, *ack)
                    return False, []
            if snapshot is not None:
                if snapshot.state is CrewState.COMPLETED:
                    delete_crew(conn, crew)
                else:
                    conn.execute(UPSERT_SNAPSHOT, to_row(snapshot))
            for wait_id in waits_deleted:
                conn.execute("DELETE FROM pending_waits WHERE wait_id = ? AND crew_id = ?", (wait_id, crew))
            if waits_put and not (snapshot is not None and snapshot.state is CrewState.COMPLETED):
                try:
                    conn.executemany(PUT_WAIT, [to_row(wait) for wait in waits_put])
                except apsw.ConstraintError as exc:
                    raise InvalidArgumentError(
                        f"crew {crew} has no snapshot: save_snapshot in the same unit of work before "
                        f"recording pending waits ({exc})"
                    ) from exc
            records = [insert_outbox(conn, hub.next_seq(), kind, message, key) for kind, message, key in outgoing]
            for _, message, _ in outgoing:
                hub.sent.reserve_outgoing(conn, message)  # an agent's post (mailbox or topic): its sent intent
            if ack is not None:
                mailboxes.delete_message(conn, *ack)
            return True, records

        def after_commit(result: tuple[bool, list[OutboxRecord]]) -> None:
            if ack is not None and consuming is not None and consuming.target_mailbox is not None:
                hub.mailbox_store.acks.forget(consuming.target_mailbox, consuming.id)
            if result[1]:
                hub.outbox.dispatch(result[1])
            hub.purger.arm()

        applied, _ = hub.writer.execute(work, after_commit=after_commit)
        return applied

    def discard(self) -> None:
        """Drop everything recorded; nothing is written and the consumed message stays
        unacknowledged (delivered again after a restart). Idempotent."""
        if self._finished is None:
            self._finished = "discarded"

    def __enter__(self) -> UnitOfWork:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self._finished is not None:
            return
        if exc_type is None:
            self.commit()
        else:
            self.discard()

    def __repr__(self) -> str:
        consuming = f", consuming={self.consuming.id!s}" if self.consuming is not None else ""
        return f"UnitOfWork(crew_id={self.caller.crew_id!s}{consuming}, outgoing={len(self._outgoing)})"
