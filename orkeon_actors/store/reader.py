"""Read connections: WAL lets readers run beside the writer without blocking it.

A :class:`ReaderPool` lends read-only connections (``PRAGMA query_only``), opened on
demand up to ``size`` and reused. Every read sees every transaction committed before it
started, so a write acknowledged by the writer is visible to the next read.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import apsw

from orkeon_actors.errors import HubStoppedError
from orkeon_actors.store.config import StoreConfig
from orkeon_actors.store.connection import open_connection
from orkeon_actors.store.damage import store_errors

__all__ = ["ReaderPool"]


class ReaderPool:
    """Thread-safe pool of read-only connections to one store."""

    def __init__(self, config: StoreConfig, size: int = 2) -> None:
        self._config = config
        self._free: list[apsw.Connection] = []
        self._slots = threading.BoundedSemaphore(size)
        self._lock = threading.Lock()
        self._closed = False

    @contextmanager
    def connection(self) -> Iterator[apsw.Connection]:
        """Borrow a connection for a few statements (wrap them in ``BEGIN``/``COMMIT``
        to read one consistent snapshot)."""
        self._slots.acquire()
        try:
            with self._lock:
                if self._closed:
                    raise HubStoppedError("the runtime was stopped: its store is closed")
                conn = self._free.pop() if self._free else None
            if conn is None:
                with store_errors(self._config.path, "opening a reader"):
                    conn = open_connection(self._config, readonly=True)
            try:
                with store_errors(self._config.path, "reading it"):
                    yield conn
            finally:
                with self._lock:
                    keep = not self._closed
                    if keep:
                        self._free.append(conn)
                if not keep:
                    conn.close()
        finally:
            self._slots.release()

    def query(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        """Every row of one statement."""
        with self.connection() as conn:
            return [tuple(row) for row in conn.execute(sql, params)]

    def close(self) -> None:
        """Close every idle connection (a borrowed one closes when returned); later
        borrowers get ``HubStoppedError``. Idempotent."""
        with self._lock:
            self._closed = True
            conns, self._free = self._free, []
        for conn in conns:
            conn.close()
