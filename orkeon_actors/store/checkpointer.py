"""Background WAL checkpoints: no commit copies the WAL into the database itself.

By default SQLite checkpoints inside the commit that grows the WAL past 1,000 pages, on
the committing connection: with ``synchronous=FULL`` that commit also writes and fsyncs
the database file, and every request batched in it (a post, a waking crew's read of
its kept messages queued behind) waits tens of milliseconds more (20-60 ms measured
here: the wake latency's p99 of issue #8). The store turns that off on the writer's
connection: a WAL hook (called after each commit with the WAL's size) wakes a
:class:`Checkpointer` thread, which runs a ``PASSIVE`` checkpoint on a connection of its
own while the writer goes on committing.

Guarantees: durability is unchanged (a commit is durable once its WAL frames are, which
the writer's commit ensures; a checkpoint only moves committed pages, and SQLite makes a
checkpoint interrupted by a crash harmless). A ``PASSIVE`` checkpoint never blocks the
writer or a reader; frames a reader still needs are copied by a later one. A failed
checkpoint is logged and retried at the next commit past the threshold. ``stop()`` ends
the thread and closes its connection (the last connection to close checkpoints the rest).
"""

from __future__ import annotations

import threading

import apsw
from loguru import logger

from orkeon_actors.store.config import StoreConfig
from orkeon_actors.store.connection import open_connection

__all__ = ["Checkpointer"]


class Checkpointer:
    """Checkpoints the WAL of ``config.path`` on its own thread once it exceeds
    ``config.checkpoint_pages`` pages. Install :meth:`wal_hook` on the writer's
    connection (``conn.set_wal_hook(checkpointer.wal_hook)``), which also turns off that
    connection's automatic checkpoints."""

    def __init__(self, config: StoreConfig) -> None:
        self.pages = config.checkpoint_pages
        self.checkpoints = 0
        """Checkpoints run (for tests and tools)."""
        self.failures = 0
        self._conn = open_connection(config)
        self._due = threading.Event()
        self._stopped = False
        self._thread = threading.Thread(target=self._run, name="orkeon-checkpointer", daemon=True)
        self._thread.start()

    def wal_hook(self, conn: apsw.Connection, database: str, pages: int) -> int:
        """SQLite's WAL hook (on the committing thread, after each commit): wake the
        checkpointer when the WAL holds ``pages`` pages or more. Never checkpoints here."""
        if pages >= self.pages:
            self._due.set()
        return apsw.SQLITE_OK

    def stop(self) -> None:
        """End the thread (after a checkpoint in progress) and close its connection."""
        self._stopped = True
        self._due.set()
        if self._thread is not threading.current_thread():
            self._thread.join()
        self._conn.close()

    def _run(self) -> None:
        while True:
            self._due.wait()
            if self._stopped:
                return
            self._due.clear()
            try:
                self._conn.wal_checkpoint(mode=apsw.SQLITE_CHECKPOINT_PASSIVE)
            except apsw.Error as exc:  # busy or I/O: the next commit past the threshold retries
                self.failures += 1
                logger.warning("WAL checkpoint failed ({}); retried after the next commit", exc)
                continue
            self.checkpoints += 1
