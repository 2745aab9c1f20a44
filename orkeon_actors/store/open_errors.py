"""What opening a store can fail with, as typed errors that say what to do.

Opening a store touches the file system (its directory, the ``.lock`` sidecar, the
database file and its WAL) and reads the database's first pages. The raw failures
(``FileNotFoundError``, ``PermissionError``, ``apsw.CorruptError``, ...) are translated
by :func:`typed_open_errors` into :class:`~orkeon_actors.errors.StoreError` subclasses;
the original is kept as ``__cause__``.
"""

from __future__ import annotations

import errno
import os
from collections.abc import Iterator
from contextlib import contextmanager

import apsw

from orkeon_actors.errors import StoreCorruptError, StoreDirectoryMissingError, StoreError, StoreNotWritableError

__all__ = ["typed_open_errors"]


@contextmanager
def typed_open_errors(path: str) -> Iterator[None]:
    """Run the opening of the store at ``path``, translating raw failures.

    Raises :class:`StoreCorruptError` (a truncated or garbled file),
    :class:`StoreDirectoryMissingError` (its directory does not exist) and
    :class:`StoreNotWritableError` (no permission, a read-only file system). Typed
    ``StoreError``\\ s pass through unchanged.
    """
    directory = os.path.dirname(os.path.abspath(path))
    try:
        yield
    except StoreError:
        raise
    except apsw.CorruptError as exc:
        raise StoreCorruptError(
            f"the store {path} is damaged ({exc}): it was truncated or overwritten. Restore it from a backup, "
            f"or salvage what is readable with `sqlite3 {path} .recover | sqlite3 recovered.db` and open "
            "recovered.db; the runtime never repairs a store by itself",
            path=path,
        ) from exc
    except FileNotFoundError as exc:
        raise StoreDirectoryMissingError(
            f"cannot open the store {path}: the directory {directory} does not exist. "
            f"Create it first (os.makedirs({directory!r}, exist_ok=True)) or choose another path",
            path=path,
        ) from exc
    except (PermissionError, apsw.ReadOnlyError, apsw.PermissionsError) as exc:
        raise _not_writable(path, directory, exc) from exc
    except OSError as exc:
        if exc.errno in (errno.EROFS, errno.EACCES, errno.EPERM):
            raise _not_writable(path, directory, exc) from exc
        raise StoreError(f"cannot open the store {path}: {exc}; check the path and the disk", path=path) from exc


def _not_writable(path: str, directory: str, exc: BaseException) -> StoreNotWritableError:
    return StoreNotWritableError(
        f"cannot open the store {path} for writing ({exc}): the runtime needs to create and write the file, "
        f"its -wal and -shm files and {os.path.basename(path)}.lock in {directory}. "
        "Choose a writable path, or fix the permissions of that directory",
        path=path,
    )
