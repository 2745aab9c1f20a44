"""Is this file ours? Checked before anything is changed, locked or created.

:func:`verify_store_file` runs before the runtime takes the store lock (which creates
``state.db.lock``) and before the first read-write connection (which switches the file
to WAL). It reads the 100-byte SQLite header with plain file I/O and, when the header
alone cannot tell, the schema through a read-only connection. A file it refuses is left
byte for byte as it was, and no lock, ``-wal`` or ``-shm`` file is created beside it.

It accepts: no file or an empty one (a new store), and a SQLite database whose
``application_id`` is orkeon's (``ORKN``) with a ``user_version`` this release knows, or
a pre-versioning store (no application id, no version, exactly the contract tables, or
no tables at all). Everything else raises ``StoreVersionError`` saying what the file is:
not a SQLite database, another application's database, a newer orkeon store, or a
SQLite database that is not an orkeon store.
"""

from __future__ import annotations

import os
import urllib.parse

import apsw

from orkeon_actors.errors import StoreCorruptError, StoreError, StoreVersionError
from orkeon_actors.store.schema import stored_version

__all__ = ["FULL_CHECK_BYTES", "SQLITE_MAGIC", "verify_store_file"]

SQLITE_MAGIC = b"SQLite format 3\x00"
_HEADER_SIZE = 100
FULL_CHECK_BYTES = 8 * 1024 * 1024
"""A store up to this size (file plus WAL) gets SQLite's ``integrity_check`` at open
(every page, and every index against its table: a damaged index could otherwise hide
accepted messages). A larger one is not checked: the check reads the whole file, and a
large store's boot reads only its wait index (spec §7.3). Check a large store offline
with ``sqlite3 state.db 'PRAGMA integrity_check'``."""


def _read_header(path: str) -> bytes | None:
    """The first 100 bytes of ``path``, or ``None`` when there is no such file (or it
    cannot be read: opening it then reports why, with the store's own errors)."""
    try:
        with open(path, "rb") as file:
            return file.read(_HEADER_SIZE)
    except FileNotFoundError:
        return None
    except OSError:
        return None  # a directory, no permission: the open that follows says which


def _has_live_wal(path: str) -> bool:
    """A non-empty ``-wal`` with its ``-shm`` beside ``path``: what a running (or
    crashed) WAL-mode owner leaves; the header alone may then be stale."""
    try:
        return os.path.getsize(path + "-wal") > 0 and os.path.exists(path + "-shm")
    except OSError:
        return False


_READER_BUSY_MS = 5_000
"""How long the identity check waits for a live owner's WAL lock before reporting it."""


def _read_only(path: str, immutable: bool) -> apsw.Connection:
    """A connection that cannot write ``path``. ``immutable`` also tells SQLite not to
    lock it nor look for a WAL (nothing is created beside it); without it, the WAL of a
    running or crashed owner is read through its existing ``-shm``."""
    if immutable:
        uri = "file:" + urllib.parse.quote(os.path.abspath(path)) + "?immutable=1"
        return apsw.Connection(uri, flags=apsw.SQLITE_OPEN_READONLY | apsw.SQLITE_OPEN_URI)
    conn = apsw.Connection(path, flags=apsw.SQLITE_OPEN_READONLY)
    # A live owner may hold the WAL index for a moment (a checkpoint, its close): wait
    # for it rather than calling a healthy store unreadable.
    conn.set_busy_timeout(_READER_BUSY_MS)
    return conn


def _store_bytes(path: str) -> int:
    total = 0
    for name in (path, path + "-wal"):
        try:
            total += os.path.getsize(name)
        except OSError:
            pass  # no WAL beside the file
    return total


def _check_integrity(conn: apsw.Connection, path: str) -> None:
    """Raise ``StoreError`` if SQLite finds ``path`` damaged (see :data:`FULL_CHECK_BYTES`)."""
    if _store_bytes(path) > FULL_CHECK_BYTES:
        return
    problems = [str(row[0]) for row in conn.execute("PRAGMA integrity_check(5)")]
    if problems != ["ok"]:
        raise StoreCorruptError(
            f"the store {path} is damaged (integrity_check: {'; '.join(problems)}); it was left untouched: "
            f"restore it from a backup, or salvage what is readable with `sqlite3 {path} .recover | sqlite3 "
            "recovered.db` and open recovered.db",
            path=path,
        )


def _check_format_versions(header: bytes, path: str) -> None:
    """SQLite opens a file whose header's write version (byte 18) or read version
    (byte 19) is above 2 read-only, or not at all: the first write would then fail with
    a raw ``ReadOnlyError``. The store only ever writes 1 (legacy) or 2 (WAL)."""
    write_version, read_version = header[18], header[19]
    if write_version not in (1, 2) or read_version not in (1, 2):
        raise StoreCorruptError(
            f"the store {path} has a damaged SQLite header (file format versions {write_version}/"
            f"{read_version} at bytes 18-19, expected 1 or 2); it was left untouched: restore it from a backup, "
            f"or salvage what is readable with `sqlite3 {path} .recover | sqlite3 recovered.db`",
            path=path,
        )


def verify_store_file(path: str) -> None:
    """Raise ``StoreVersionError`` unless ``path`` is absent, empty, or an orkeon store
    this release can open (see the module docstring); ``StoreError`` if its schema
    cannot be read at all or SQLite finds it damaged. Changes nothing on disk."""
    header = _read_header(path)
    if header is None:
        return
    wal = _has_live_wal(path)
    if not header and not wal:
        return  # an empty file is an empty database: the store is created in it
    if header and (len(header) < _HEADER_SIZE or not header.startswith(SQLITE_MAGIC)):
        raise StoreVersionError(
            f"{path} is not a SQLite database (its header is not SQLite's); it was left untouched: "
            "give the runtime its own store file",
            path=path,
        )
    if header:
        _check_format_versions(header, path)
    try:
        conn = _read_only(path, immutable=not wal)
    except apsw.CorruptError:
        raise  # typed by the opening's typed_open_errors: StoreCorruptError
    except apsw.Error as exc:
        raise StoreError(f"cannot read {path} to check it is an orkeon store: {exc}") from exc
    try:
        version = stored_version(conn, path)
        if version > 0:
            _check_integrity(conn, path)
    except apsw.NotADBError as exc:
        raise StoreVersionError(
            f"{path} is not a SQLite database ({exc}); it was left untouched: give the runtime its own store file",
            path=path,
        ) from exc
    except apsw.CorruptError:
        raise  # typed by the opening's typed_open_errors: StoreCorruptError
    except apsw.Error as exc:
        raise StoreError(f"cannot read the schema of {path} to check it is an orkeon store: {exc}") from exc
    finally:
        conn.close()
