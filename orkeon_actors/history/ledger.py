"""The hash-linked ledger behind a sender's history (sender-owned history requirements,
MESSAGE-R03 and R08).

Every completed sent row gets one immutable :class:`LedgerNode`: its position ``seq``
(1, 2, ...), the SHA-256 of the row's canonical bytes, and a ``link`` that commits to
the previous node's link, so that the last link commits to every row before it. The
sender's constant-size :class:`LedgerHead` holds the row count and the tip link: it is
the local trust root (MESSAGE-A03) that the store replaces atomically with each send.

Guarantees:

* **Constant write work.** :func:`append` reads the head only and produces the new head
  and one node, whatever the history's length (R08).
* **Exact verification.** :func:`verify` walks from genesis to the head and reports the
  first position where anything is missing, extra, substituted, corrupt, unreadable or of
  another version (head, node or row), or where a column the store queries a row by
  disagrees with the row's hashed bytes, with what was wrong (R03). It never reports a
  partial walk as valid. Its cost is linear in the history.

What the ledger does not know is where rows live: :class:`LedgerSource` is the read
port a store implements, and the canonical row bytes come from the wire-format owner.
"""

from __future__ import annotations

import hashlib
from typing import Final, Protocol

import attrs

__all__ = [
    "GENESIS",
    "LEDGER_VERSION",
    "LedgerHead",
    "LedgerNode",
    "LedgerReport",
    "LedgerSource",
    "LedgerColumnError",
    "LedgerUnreadableError",
    "append",
    "append_hash",
    "link_of",
    "verify",
]

LEDGER_VERSION: Final = 1
"""Bumped whenever the meaning of a head, node or link field changes."""
GENESIS: Final = bytes(32)
"""The link before the first node."""
_DOMAIN: Final = b"orkeon-sent-ledger\x00"


class LedgerUnreadableError(Exception):
    """A source could not read a head, node or row (damaged bytes, an I/O error)."""


class LedgerColumnError(LedgerUnreadableError):
    """A row's hashed bytes are intact but a column the store filters, shows or dedupes
    on (its recipient, time, key, content digest) disagrees with them: edited behind
    the ledger's back."""


@attrs.frozen
class LedgerNode:
    seq: int
    row_hash: bytes
    link: bytes
    version: int = LEDGER_VERSION


@attrs.frozen
class LedgerHead:
    """A sender's trust root: ``count`` completed rows, the ``tip`` link of the last one,
    and ``since_ms`` (unix ms of the first indexed send: the coverage boundary)."""

    sender: str
    count: int
    tip: bytes
    since_ms: int
    version: int = LEDGER_VERSION


@attrs.frozen
class LedgerReport:
    """The outcome of :func:`verify`. ``ok`` with ``rows`` verified, or the first bad
    position (``first_bad``: a ``seq``, ``0`` for the head itself) and the ``problem``."""

    sender: str
    ok: bool
    rows: int
    first_bad: int | None = None
    problem: str | None = None


class LedgerSource(Protocol):
    """What :func:`verify` reads. Each method returns ``None`` for what is absent and
    raises :class:`LedgerUnreadableError` for what is there but cannot be read."""

    def head(self, sender: str) -> LedgerHead | None: ...

    def node(self, sender: str, seq: int) -> LedgerNode | None: ...

    def row(self, sender: str, seq: int) -> bytes | None: ...

    def columns(self, sender: str, seq: int) -> None:
        """Check the columns a store queries the row ``seq`` by against its hashed
        bytes (called once those matched their node); raises :class:`LedgerColumnError`
        naming the first that disagrees."""
        ...

    def max_seq(self, sender: str) -> int:
        """The highest ``seq`` of any node or row stored for ``sender`` (0 without any)."""
        ...


def link_of(previous: bytes, seq: int, row_hash: bytes) -> bytes:
    """The link of node ``seq``: SHA-256 over a domain tag, the previous link, the
    position (8 bytes, big-endian) and the row hash."""
    return hashlib.sha256(_DOMAIN + previous + seq.to_bytes(8, "big") + row_hash).digest()


def append(head: LedgerHead | None, sender: str, row_bytes: bytes, now_ms: int) -> tuple[LedgerHead, LedgerNode]:
    """The head and the node after one more completed row (constant work: the head and
    the row only). ``head`` is ``None`` for a sender's first indexed send."""
    return append_hash(head, sender, hashlib.sha256(row_bytes).digest(), now_ms)


def append_hash(head: LedgerHead | None, sender: str, row_hash: bytes, now_ms: int) -> tuple[LedgerHead, LedgerNode]:
    """:func:`append` for a row whose SHA-256 ``row_hash`` was computed already (off the
    writer's thread)."""
    if head is not None and head.version != LEDGER_VERSION:
        raise ValueError(f"the head of {sender} is version {head.version}; this code writes {LEDGER_VERSION}")
    previous = GENESIS if head is None else head.tip
    seq = 1 if head is None else head.count + 1
    node = LedgerNode(seq, row_hash, link_of(previous, seq, row_hash))
    since = now_ms if head is None else head.since_ms
    return LedgerHead(sender, seq, node.link, since), node


def verify(source: LedgerSource, sender: str) -> LedgerReport:
    """Walk ``sender``'s ledger from genesis to its head (see the module docstring)."""

    def bad(seq: int, problem: str, rows: int) -> LedgerReport:
        return LedgerReport(sender, False, rows, seq, problem)

    try:
        head = source.head(sender)
    except LedgerUnreadableError as exc:
        return bad(0, f"the head is unreadable: {exc}", 0)
    if head is None:
        if source.max_seq(sender):
            return bad(0, "nodes exist but the head is missing", 0)
        return LedgerReport(sender, True, 0)
    if head.version != LEDGER_VERSION:
        return bad(0, f"the head is version {head.version}, expected {LEDGER_VERSION}", 0)
    link = GENESIS
    for seq in range(1, head.count + 1):
        try:
            node = source.node(sender, seq)
            row = source.row(sender, seq)
        except LedgerUnreadableError as exc:
            return bad(seq, f"unreadable: {exc}", seq - 1)
        if node is None:
            return bad(seq, "the ledger node is missing", seq - 1)
        if node.version != LEDGER_VERSION:
            return bad(seq, f"the node is version {node.version}, expected {LEDGER_VERSION}", seq - 1)
        if row is None:
            return bad(seq, "the sent row is missing", seq - 1)
        if hashlib.sha256(row).digest() != node.row_hash:
            return bad(seq, "the sent row does not match its node (substituted or corrupt)", seq - 1)
        expected = link_of(link, seq, node.row_hash)
        if node.link != expected:
            return bad(seq, "the node's link does not follow from the previous one", seq - 1)
        try:
            source.columns(sender, seq)
        except LedgerUnreadableError as exc:  # a LedgerColumnError names the column
            return bad(seq, str(exc), seq - 1)
        link = expected
    if head.tip != link:
        return bad(0, "the head's tip does not commit to the last node", head.count)
    extra = source.max_seq(sender)
    if extra > head.count:
        return bad(head.count + 1, f"nodes or rows up to seq {extra} lie past the head (extra state)", head.count)
    return LedgerReport(sender, True, head.count)
