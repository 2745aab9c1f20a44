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

import os
import re
import threading
import time
from collections.abc import Callable
from typing import ClassVar

from ulid import ULID

from orkeon_actors.errors import InvalidIdError

__all__ = ["CrewId", "AgentId", "MessageId", "CorrelationId", "new_secret_ulid_str", "new_ulid_str"]

_NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}\Z")
_CROCKFORD = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
_PAIRS = [a + b for a in _CROCKFORD for b in _CROCKFORD]  # every 10-bit value as 2 chars
_ULID_RE = re.compile(r"[0-7][0-9A-HJKMNP-TV-Z]{25}\Z")


def _make_ulid_generator() -> Callable[[], str]:
    """A fast ULID generator: 48-bit millisecond time + 80 random bits, incremented
    within one millisecond so that ids are strictly increasing in this process.

    python-ulid's ``ULID()`` costs ~6 µs; this costs ~1 µs because it caches the encoded
    text of everything but the last 20 bits (time and high random bits change rarely
    within a burst), which matters because every message gets one.
    """
    lock = threading.Lock()
    last_ms = -1
    last_rand = 0
    head = ""  # the encoded text of last_ms and of last_rand >> 20
    head_key = -1  # last_rand >> 20 when head was encoded
    pairs = _PAIRS
    time_ns = time.time_ns
    urandom = os.urandom
    from_bytes = int.from_bytes

    def new_ulid() -> str:
        nonlocal last_ms, last_rand, head, head_key
        ms = time_ns() // 1_000_000
        # The first id of a millisecond needs fresh randomness: read it before taking the
        # lock (``urandom`` is a system call that lets other threads run; under the lock,
        # every thread minting an id would queue behind it). ``last_ms`` read unlocked is
        # only a hint; the lock decides.
        fresh = from_bytes(urandom(10), "big") >> 1 if ms > last_ms else -1
        with lock:
            if ms <= last_ms:
                ms = last_ms
                rand = last_rand + 1
                if rand >= 1 << 80:  # 2^80 ids in one millisecond: borrow the next one
                    ms += 1
                    rand = from_bytes(urandom(10), "big") >> 1
                    head_key = -1
            else:
                # Keep the top bit clear so increments within a millisecond never overflow.
                rand = fresh if fresh >= 0 else from_bytes(urandom(10), "big") >> 1
                head_key = -1
            last_ms = ms
            last_rand = rand
            high = rand >> 20
            if high != head_key:
                head = _encode_time(ms) + "".join([pairs[(high >> s) & 1023] for s in (50, 40, 30, 20, 10, 0)])
                head_key = high
            text = head
        return text + pairs[(rand >> 10) & 1023] + pairs[rand & 1023]

    return new_ulid


def _encode_time(ms: int) -> str:
    return "".join([_PAIRS[(ms >> shift) & 1023] for shift in (40, 30, 20, 10, 0)])


new_ulid_str = _make_ulid_generator()


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
        return str.__new__(cls, new_ulid_str())


class CorrelationId(_UlidId):
    """Ties a reply to its request. Minted by the hub for each request; holding it is
    the right to answer (spec §12.1), so :meth:`new` does not use the monotonic
    generator of message ids (whose neighbours are guessable): see :func:`new_secret_ulid_str`."""

    kind = "correlation id"

    @classmethod
    def new(cls) -> CorrelationId:
        return str.__new__(cls, new_secret_ulid_str())


def _make_secret_ulid_generator() -> Callable[[], str]:
    """The generator behind :func:`new_secret_ulid_str`.

    Each id takes 10 bytes never used before from a per-thread buffer filled by
    ``os.urandom`` 64 ids at a time: one system call per 64 ids instead of one each (the
    call lets other threads run, and every ``send`` mints an id), no lock. A child
    process drops the buffers it inherited at ``fork``, so a parent and its child never
    hand out the same bytes. The encoded time prefix is cached per millisecond.
    """
    local = threading.local()
    chunk = 10 * 64
    pairs = _PAIRS
    time_ns = time.time_ns
    urandom = os.urandom
    from_bytes = int.from_bytes

    def forget_buffers() -> None:
        nonlocal local
        local = threading.local()

    if hasattr(os, "register_at_fork"):
        os.register_at_fork(after_in_child=forget_buffers)

    def new_secret_ulid() -> str:
        state = local.__dict__
        buffer: bytes = state.get("buffer", b"")
        at: int = state.get("at", 0)
        if at >= len(buffer):
            buffer, at = urandom(chunk), 0
            state["buffer"] = buffer
        state["at"] = at + 10
        rand = from_bytes(buffer[at : at + 10], "big")
        ms = time_ns() // 1_000_000
        if state.get("ms") != ms:
            state["ms"], state["head"] = ms, _encode_time(ms)
        head: str = state["head"]
        return (
            head
            + pairs[(rand >> 70) & 1023]
            + pairs[(rand >> 60) & 1023]
            + pairs[(rand >> 50) & 1023]
            + pairs[(rand >> 40) & 1023]
            + pairs[(rand >> 30) & 1023]
            + pairs[(rand >> 20) & 1023]
            + pairs[(rand >> 10) & 1023]
            + pairs[rand & 1023]
        )

    return new_secret_ulid


new_secret_ulid_str = _make_secret_ulid_generator()
new_secret_ulid_str.__doc__ = """A ULID whose 80 low bits come fresh from the operating
system's CSPRNG (``os.urandom``), never incremented nor reused: knowing one id tells
nothing about any other. It sorts by millisecond only (ids of one millisecond are in
random order)."""
