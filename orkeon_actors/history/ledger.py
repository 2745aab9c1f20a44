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

* **A coverage start that cannot be moved alone.** A version-2 node chains the
  ``epoch`` it was written in (the unix ms its index started, ``0`` when none ran) into
  its link, so a row's epoch cannot be edited without breaking the chain; :func:`verify`
  checks those epochs against the store's record of when its index (re)started
  (:meth:`LedgerSource.epochs`) and its current start (:meth:`LedgerSource.index_start`,
  the coverage boundary reads use): epochs never go back along the chain, each is one
  the index really started at and none is later than the current start, and the current
  start is the last recorded one. An edit of the coverage start (which would hide the
  rows of a sender before it, or claim coverage across a time the index was off) is
  named at the first row of that sender written since the real start (``0`` for a
  sender without one). Version-1 nodes (written before epochs were chained) keep their
  link and carry no epoch: a ledger may hold version-1 nodes, then version-2 ones.

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
    "Epochs",
    "READABLE_VERSIONS",
    "LedgerUnreadableError",
    "append",
    "append_hash",
    "link_of",
    "verify",
]

LEDGER_VERSION: Final = 2
"""Bumped whenever the meaning of a head, node or link field changes. Version 2 chains
each node's epoch (the start of the index it was written under) into its link."""
READABLE_VERSIONS: Final = frozenset({1, 2})
"""The node and head versions :func:`verify` reads (a version-1 ledger goes on in version 2)."""
GENESIS: Final = bytes(32)
"""The link before the first node."""
_DOMAIN: Final = b"orkeon-sent-ledger\x00"
_DOMAIN_V2: Final = b"orkeon-sent-ledger-v2\x00"


class LedgerUnreadableError(Exception):
    """A source could not read a head, node or row (damaged bytes, an I/O error)."""


class LedgerColumnError(LedgerUnreadableError):
    """A row's hashed bytes are intact but a column the store filters, shows or dedupes
    on (its recipient, time, key, content digest) disagrees with them: edited behind
    the ledger's back."""


@attrs.frozen
class LedgerNode:
    """One row's node; ``epoch`` (version 2) is the start of the index it was written
    under (``0``: none ran), chained into ``link``; ``None`` for a version-1 node."""

    seq: int
    row_hash: bytes
    link: bytes
    version: int = LEDGER_VERSION
    epoch: int | None = None


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

    def epochs(self) -> tuple[int, ...]:
        """Every unix ms the store's index started at, oldest first."""
        ...

    def index_start(self) -> int | None:
        """The start of the index running now, as coverage reads it (``None``: off)."""
        ...

    def index_open(self) -> int | None:
        """The start of the last epoch the store recorded as still running (``None``:
        the last one stopped, or none started)."""
        ...


def link_of(previous: bytes, seq: int, row_hash: bytes, epoch: int | None = None) -> bytes:
    """The link of node ``seq``: SHA-256 over a domain tag, the previous link, the
    position (8 bytes, big-endian) and the row hash; for a version-2 node (``epoch`` not
    ``None``) over its own domain tag and the epoch (8 bytes, big-endian) too."""
    position = seq.to_bytes(8, "big")
    if epoch is None:
        return hashlib.sha256(_DOMAIN + previous + position + row_hash).digest()
    return hashlib.sha256(_DOMAIN_V2 + previous + position + row_hash + epoch.to_bytes(8, "big")).digest()


def append(
    head: LedgerHead | None, sender: str, row_bytes: bytes, now_ms: int, epoch: int = 0
) -> tuple[LedgerHead, LedgerNode]:
    """The head and the node after one more completed row (constant work: the head and
    the row only). ``head`` is ``None`` for a sender's first indexed send; ``epoch`` is
    the start of the index running now (``0``: none)."""
    return append_hash(head, sender, hashlib.sha256(row_bytes).digest(), now_ms, epoch)


def append_hash(
    head: LedgerHead | None, sender: str, row_hash: bytes, now_ms: int, epoch: int = 0
) -> tuple[LedgerHead, LedgerNode]:
    """:func:`append` for a row whose SHA-256 ``row_hash`` was computed already (off the
    writer's thread). A version-1 head goes on in version 2."""
    if head is not None and head.version not in READABLE_VERSIONS:
        raise ValueError(f"the head of {sender} is version {head.version}; this code writes {LEDGER_VERSION}")
    previous = GENESIS if head is None else head.tip
    seq = 1 if head is None else head.count + 1
    node = LedgerNode(seq, row_hash, link_of(previous, seq, row_hash, epoch), LEDGER_VERSION, epoch)
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
    if head.version not in READABLE_VERSIONS:
        return bad(0, f"the head is version {head.version}, expected {LEDGER_VERSION}", 0)
    epochs = Epochs(source)
    link = GENESIS
    for seq in range(1, head.count + 1):
        try:
            node = source.node(sender, seq)
            row = source.row(sender, seq)
        except LedgerUnreadableError as exc:
            return bad(seq, f"unreadable: {exc}", seq - 1)
        if node is None:
            return bad(seq, "the ledger node is missing", seq - 1)
        if node.version not in READABLE_VERSIONS or (node.version == 1) != (node.epoch is None):
            return bad(seq, f"the node is version {node.version}, expected {LEDGER_VERSION}", seq - 1)
        if row is None:
            return bad(seq, "the sent row is missing", seq - 1)
        if hashlib.sha256(row).digest() != node.row_hash:
            return bad(seq, "the sent row does not match its node (substituted or corrupt)", seq - 1)
        expected = link_of(link, seq, node.row_hash, node.epoch)
        if node.link != expected:
            return bad(seq, "the node's link does not follow from the previous one", seq - 1)
        problem = epochs.check(seq, node)
        if problem is not None:
            return bad(seq, problem, seq - 1)
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
    problem = epochs.coverage_problem()
    if problem is not None:
        return bad(epochs.first_current or 0, problem, head.count)
    return LedgerReport(sender, True, head.count)


class Epochs:
    """The epoch checks of one :func:`verify` walk (see the module docstring)."""

    def __init__(self, source: LedgerSource) -> None:
        self.known = frozenset(source.epochs())
        self.start = source.index_start()
        self.open = source.index_open()
        self.last = 0
        self.first_current: int | None = None
        """The first row written under the running epoch the store recorded."""

    def check(self, seq: int, node: LedgerNode) -> str | None:
        """What is wrong with ``node``'s epoch, or ``None``."""
        epoch = node.epoch
        if epoch is None or epoch == 0:  # version 1, or written while no index ran
            return None
        if epoch not in self.known:
            return f"its epoch {epoch} is no start of the index the store recorded (edited)"
        if epoch < self.last:
            return f"its epoch {epoch} lies before the epoch {self.last} of a row before it"
        if self.start is not None and epoch > self.start:
            return (
                f"it was written under the index started at {epoch}, after the coverage start "
                f"{self.start} the store claims (sent_index.since_ms was edited)"
            )
        self.last = epoch
        if epoch == self.open and self.first_current is None:
            self.first_current = seq
        return None

    def coverage_problem(self) -> str | None:
        """How the coverage start reads take disagrees with the recorded epochs, or ``None``."""
        if self.start == self.open:
            return None
        if self.start is None:
            return f"the index is off, but the store recorded it running since {self.open} (its marker was removed)"
        if self.open is None:
            return f"the coverage start {self.start} is no running epoch the store recorded (sent_index was edited)"
        return (
            f"the coverage start sent_index.since_ms holds {self.start} but the index started at "
            f"{self.open} (edited: the rows since then would be miscounted)"
        )
