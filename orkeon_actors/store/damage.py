"""A store file SQLite cannot read is a ``StoreError``, never a raw ``apsw`` error.

A damaged file (a flipped byte, a truncated page, a header that lies) surfaces as some
``apsw.Error`` wherever SQLite first trips on it: opening, migrating, loading the last
values or the outbox, reopening a mailbox. :func:`store_errors` wraps those steps so the
caller gets one typed error saying which file, what was being done, and what to do.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import apsw

from orkeon_actors.errors import StoreError

__all__ = ["DAMAGE_ERRORS", "as_store_error", "store_errors"]

DAMAGE_ERRORS = (apsw.CorruptError, apsw.NotADBError, apsw.SQLError, UnicodeDecodeError)
"""What SQLite raises when a file it opened is damaged: a malformed page, a header that
lies, a garbled schema (``no such column``), a TEXT value that is not UTF-8. A write's
own refusals (a ``ConstraintError``) are not damage and reach the caller as they are."""


def as_store_error(exc: apsw.Error | UnicodeDecodeError, path: str, doing: str) -> StoreError:
    """The typed error for ``exc``, raised by SQLite on ``path`` while ``doing``."""
    error = StoreError(
        f"the store {path} could not be read while {doing}: {exc} ({type(exc).__name__}). The file may be "
        "damaged: restore it from a backup, or move it aside to start with an empty store"
    )
    error.__cause__ = exc
    return error


@contextmanager
def store_errors(path: str, doing: str) -> Iterator[None]:
    """Run the block; an ``apsw.Error`` raised in it (or the ``UnicodeDecodeError`` of
    a TEXT value that is not UTF-8) becomes a ``StoreError`` naming ``path`` and
    ``doing``, chained to the original. Typed errors pass unchanged."""
    try:
        yield
    except (apsw.Error, UnicodeDecodeError) as exc:
        raise as_store_error(exc, path, doing) from exc
