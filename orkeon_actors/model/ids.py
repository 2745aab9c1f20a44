"""Identifiers: crews, agents, messages, correlations.

Ids are ``str`` subclasses validated at construction, so they serialise as plain
strings, compare with strings and cost nothing to pass around.

* :class:`CrewId` / :class:`AgentId`: 1-128 characters, letters, digits, ``.``, ``_``,
  ``-``, starting with a letter or a digit. ``CrewId.SYSTEM`` (``"_system"``) is the
  hub itself; no user crew can take it because user ids cannot start with ``_``.
* :class:`MessageId` / :class:`CorrelationId`: ULIDs (26 Crockford base32 characters).
  ``MessageId.new()`` mints one that sorts after every id minted before it in this
  process; ``CorrelationId.new()`` draws its 80 random bits from a CSPRNG for every id
  (a correlation id is a capability, spec §12.1: it must not be guessable).
"""

from __future__ import annotations

import functools
import os
import re
import threading
import time
from collections.abc import Callable
from typing import ClassVar, TypeVar

from ulid import ULID

from orkeon_actors.errors import InvalidIdError

__all__ = [
    "CrewId",
    "AgentId",
    "MessageId",
    "CorrelationId",
    "new_correlation_id",
    "new_message_id",
    "new_secret_ulid_str",
    "new_ulid_str",
]

_S = TypeVar("_S", bound=str)

_NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}\Z")
_CROCKFORD = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
_PAIRS = [a + b for a in _CROCKFORD for b in _CROCKFORD]  # every 10-bit value as 2 chars
_ULID_RE = re.compile(r"[0-7][0-9A-HJKMNP-TV-Z]{25}\Z")


def _make_ulid_generator() -> Callable[[type[_S]], _S]:
    """A fast ULID generator: 48-bit millisecond time + 80 random bits, incremented
    within one millisecond so that ids are strictly increasing in this process.

    python-ulid's ``ULID()`` costs ~6 µs; this costs well under 1 µs because it caches
    the encoded text of everything but the last 20 bits (time and high random bits change
    rarely within a burst), which matters because every message gets one. The 80 bits are
    held as their high 60 and low 20 bits, so the common step (one more id in the same
    millisecond) is arithmetic on small ints, not on an 80-bit one (issue 31: the big-int
    shifts were most of a message id's cost).
    """
    lock = threading.Lock()
    last_ms = -1
    high = 0  # the top 60 of the 80 random bits
    low = 0  # the bottom 20
    head = ""  # the encoded text of last_ms and of high
    pairs = _PAIRS
    time_ns = time.time_ns
    urandom = os.urandom
    from_bytes = int.from_bytes

    def encode_head(ms: int, high: int) -> str:
        return _encode_time(ms) + "".join([pairs[(high >> s) & 1023] for s in (50, 40, 30, 20, 10, 0)])

    def new_ulid(cls: type[_S]) -> _S:
        nonlocal last_ms, high, low, head
        ms = time_ns() // 1_000_000
        # The first id of a millisecond needs fresh randomness: read it before taking the
        # lock (``urandom`` is a system call that lets other threads run; under the lock,
        # every thread minting an id would queue behind it). ``last_ms`` read unlocked is
        # only a hint; the lock decides.
        fresh = from_bytes(urandom(10), "big") >> 1 if ms > last_ms else -1
        with lock:
            if ms <= last_ms:
                low += 1
                if low > 0xFFFFF:  # carry into the high bits
                    low = 0
                    high += 1
                    if high >> 59:  # 2^79 ids in one millisecond: borrow the next one
                        last_ms += 1
                        rand = from_bytes(urandom(10), "big") >> 1
                        high, low = rand >> 20, rand & 0xFFFFF
                    head = encode_head(last_ms, high)
            else:
                # Keep the top bit clear so increments within a millisecond never overflow.
                rand = fresh if fresh >= 0 else from_bytes(urandom(10), "big") >> 1
                high, low = rand >> 20, rand & 0xFFFFF
                last_ms = ms
                head = encode_head(ms, high)
            text = head + pairs[low >> 10] + pairs[low & 1023]
        return str.__new__(cls, text)

    return new_ulid


def _encode_time(ms: int) -> str:
    return "".join([_PAIRS[(ms >> shift) & 1023] for shift in (40, 30, 20, 10, 0)])


_mint_ulid = _make_ulid_generator()
new_ulid_str: Callable[[], str] = functools.partial(_mint_ulid, str)
"""A new ULID (text), sorting after every one minted before it in this process."""


class _NameId(str):
    kind: ClassVar[str] = "id"

    __slots__ = ()

    def __new__(cls, value: str) -> _NameId:
        if isinstance(value, cls):
            return value
        if not isinstance(value, str) or not _NAME_RE.match(value):
            raise InvalidIdError(
                f"invalid {cls.kind} {value!r}: use 1-128 letters, digits, '.', '_' or '-', "
                "starting with a letter or a digit"
            )
        return str.__new__(cls, value)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({str.__repr__(self)})"


class CrewId(_NameId):
    """A crew's identity. ``CrewId.new()`` mints a unique one; ``CrewId.SYSTEM`` is the hub."""

    kind = "crew id"
    SYSTEM: ClassVar[CrewId]

    @classmethod
    def new(cls) -> CrewId:
        """Mint a fresh ULID-based crew id."""
        return str.__new__(cls, new_ulid_str())

    @property
    def is_system(self) -> bool:
        return self is CrewId.SYSTEM or str.__eq__(self, "_system")


CrewId.SYSTEM = str.__new__(CrewId, "_system")


class AgentId(_NameId):
    """An agent's identity within its crew."""

    kind = "agent id"


class _UlidId(str):
    kind: ClassVar[str] = "ulid"

    __slots__ = ()

    def __new__(cls, value: str) -> _UlidId:
        if isinstance(value, cls):
            return value
        if not isinstance(value, str) or not _ULID_RE.match(value.upper()):
            raise InvalidIdError(f"invalid {cls.kind} {value!r}: expected a 26-character ULID")
        return str.__new__(cls, value.upper())

    @classmethod
    def new(cls) -> _UlidId:
        return str.__new__(cls, new_ulid_str())

    @classmethod
    def unchecked(cls, value: str) -> _UlidId:
        """The id of ``value`` without validating it: only for text this package wrote
        itself (a store row read back), where validation would re-check a ULID it minted."""
        return str.__new__(cls, value)

    @property
    def ulid(self) -> ULID:
        """This id as a python-ulid ``ULID`` (timestamp, bytes, UUID views)."""
        return ULID.from_str(self)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({str.__repr__(self)})"


class MessageId(_UlidId):
    """The unique id of one message; minted by the hub."""

    kind = "message id"

    @classmethod
    def new(cls) -> MessageId:
        return new_message_id()


class CorrelationId(_UlidId):
    """Ties a reply to its request. Minted by the hub for each request; holding it is
    the right to answer (spec §12.1), so :meth:`new` does not use the monotonic
    generator of message ids (whose neighbours are guessable): see :func:`new_secret_ulid_str`."""

    kind = "correlation id"

    @classmethod
    def new(cls) -> CorrelationId:
        return new_correlation_id()


_SECRET_IDS_PER_REFILL = 64
_CROCKFORD_OF_BYTE = bytes(ord(_CROCKFORD[b & 31]) for b in range(256))
"""A ``bytes.translate`` table: each byte to the Crockford character of its low 5 bits."""


def _make_secret_ulid_generator() -> Callable[[type[_S]], _S]:
    """The generator behind :func:`new_secret_ulid_str`.

    Each id takes 16 characters never used before from a per-thread buffer: 64 ids'
    worth of ``os.urandom`` bytes at a time, each byte turned into the Crockford
    character of its low 5 bits by one ``bytes.translate`` (so 16 characters carry 80
    fresh random bits). One system call and one C-level encoding per 64 ids, no lock, no
    big-int arithmetic per id (issue 31: encoding 80 bits in Python was a tenth of a
    send/reply round trip). A child process drops the buffers it inherited at ``fork``,
    so a parent and its child never hand out the same characters. The encoded time
    prefix is cached per millisecond.
    """
    local = threading.local()
    chunk = 16 * _SECRET_IDS_PER_REFILL
    table = _CROCKFORD_OF_BYTE
    time_ns = time.time_ns
    urandom = os.urandom

    def forget_buffers() -> None:
        nonlocal local
        local = threading.local()

    if hasattr(os, "register_at_fork"):
        os.register_at_fork(after_in_child=forget_buffers)

    def new_secret_ulid(cls: type[_S]) -> _S:
        state = local.__dict__
        text: str = state.get("text", "")
        at: int = state.get("at", chunk)
        if at >= chunk:
            text, at = urandom(chunk).translate(table).decode("ascii"), 0
            state["text"] = text
        state["at"] = at + 16
        ms = time_ns() // 1_000_000
        if state.get("ms") != ms:
            state["ms"], state["head"] = ms, _encode_time(ms)
        head: str = state["head"]
        return str.__new__(cls, head + text[at : at + 16])

    return new_secret_ulid


_mint_secret_ulid = _make_secret_ulid_generator()
new_secret_ulid_str: Callable[[], str] = functools.partial(_mint_secret_ulid, str)
"""A ULID whose 80 low bits come fresh from the operating system's CSPRNG
(``os.urandom``), never incremented nor reused: knowing one id tells nothing about any
other. It sorts by millisecond only (ids of one millisecond are in random order)."""

new_message_id: Callable[[], MessageId] = functools.partial(_mint_ulid, MessageId)
"""``MessageId.new()`` in one call (the hub mints one per message)."""

new_correlation_id: Callable[[], CorrelationId] = functools.partial(_mint_secret_ulid, CorrelationId)
"""``CorrelationId.new()`` in one call (the hub mints one per request)."""
