"""Opening the store: the single-owner lock and configured apsw connections.

One runtime owns a store file at a time. Ownership is an exclusive ``flock`` on a
sidecar file (``state.db.lock``) taken before the database is opened and held until the
runtime stops; the kernel releases it when the owning process dies, SIGKILL included,
so a crashed owner never blocks a restart. A second runtime, in another process or in
this one, gets :class:`~orkeon_actors.errors.StoreLockedError` (at once, or after
``lock_timeout`` seconds of waiting): it never reaches the database, so it can neither
corrupt it nor make the owner fail with "database is locked".

Connections run in WAL mode (readers never block the writer, nor the writer readers)
with ``foreign_keys`` on and the configured ``synchronous`` level.
"""

from __future__ import annotations

import fcntl
import os
import threading
import time

import apsw

from orkeon_actors.errors import StoreError, StoreLockedError
from orkeon_actors.store.config import Durability, StoreConfig

__all__ = ["StoreLock", "open_connection"]


class StoreLock:
    """The exclusive ownership of one store file. Release with :meth:`release`."""

    def __init__(self, path: str, timeout: float) -> None:
        self.path = path
        self.lock_path = path + ".lock"
        self._fd: int | None = None
        fd = os.open(self.lock_path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            self._acquire(fd, timeout)
        except BaseException:
            os.close(fd)
            raise
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        self._fd = fd

    def _acquire(self, fd: int, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        pause = threading.Event()
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    break
                pause.wait(min(0.05, max(0.0, deadline - time.monotonic())))
        holder = _read_pid(fd)
        who = f"process {holder}" if holder is not None else "another process"
        if holder == os.getpid():
            who = "another runtime of this process"
        waited = f" (waited {timeout:g}s)" if timeout > 0 else ""
        raise StoreLockedError(
            f"the store {self.path} is already open by {who}{waited}: one runtime owns a store at a time. "
            "Stop that runtime first, open a different file, or pass StoreConfig(..., lock_timeout=seconds) "
            "to wait for it.",
            path=self.path,
            holder_pid=holder,
        )

    def release(self) -> None:
        """Give up ownership; idempotent."""
        fd, self._fd = self._fd, None
        if fd is not None:
            fcntl.flock(fd, fcntl.LOCK_UN)
            os.close(fd)

    @property
    def held(self) -> bool:
        return self._fd is not None


def _read_pid(fd: int) -> int | None:
    try:
        text = os.pread(fd, 32, 0).decode(errors="replace").strip()
    except OSError:
        return None
    return int(text) if text.isdigit() else None


def open_connection(config: StoreConfig, *, readonly: bool = False) -> apsw.Connection:
    """An apsw connection to ``config.path`` in WAL mode with the configured durability.

    Raises ``StoreError`` if the file cannot be opened as a database. A read-only
    connection (``readonly=True``) refuses every write (``PRAGMA query_only``).
    """
    try:
        conn = apsw.Connection(config.path, statementcachesize=256)
        conn.set_busy_timeout(int(config.busy_timeout * 1000))
        if not readonly:
            mode = conn.execute("PRAGMA journal_mode = WAL").fetchone()
            if mode is None or str(mode[0]).lower() != "wal":
                raise StoreError(
                    f"could not switch {config.path} to WAL mode (got {mode!r}); "
                    "put the store on a local file system that supports shared memory"
                )
        synchronous = "FULL" if config.durability is Durability.FULL else "NORMAL"
        conn.execute(f"PRAGMA synchronous = {synchronous}")
        conn.execute("PRAGMA foreign_keys = ON")
        if readonly:
            conn.execute("PRAGMA query_only = ON")
    except apsw.NotADBError as exc:
        raise StoreError(
            f"{config.path} is not a SQLite database ({exc}); give the runtime its own store file"
        ) from exc
    except apsw.CantOpenError as exc:
        raise StoreError(
            f"cannot open the store {config.path}: {exc}; check the directory exists and is writable"
        ) from exc
    return conn
