"""Stage 4, idempotency (spec §12.2): a mailbox consumes a message id once.

A message addressed to a mailbox has exactly one legitimate reader, so "was this id
already consumed here?" is well posed: the stage remembers the ``(mailbox, message id)``
pairs it let through and, on the receive path, refuses a repeat by raising
``DuplicateMessageError``. The hub catches that error at the delivery site and drops the
message; no consumer ever sees it.

* Topic traffic (publishes, and posts to ``topic://`` addresses) is never deduplicated:
  a topic message legitimately reaches every subscriber.
* The memory is bounded: it holds the last ``capacity`` pairs and forgets the oldest
  first (first consumption order). A duplicate arriving after its original was
  forgotten is delivered again: size ``capacity`` above the redelivery window you expect.
* The memory lives in this process and does not survive it (a stated limit of the
  in-memory hub; durable idempotence belongs with the durable hub, spec §11.2).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Hashable

from orkeon_actors.errors import DuplicateMessageError, InvalidArgumentError
from orkeon_actors.hub.pipeline import Next
from orkeon_actors.model.address import Scheme
from orkeon_actors.model.message import Message

__all__ = ["IdempotencyMiddleware", "RecentKeys", "DEFAULT_IDEMPOTENCY_CAPACITY"]

DEFAULT_IDEMPOTENCY_CAPACITY = 10_000
"""How many ``(mailbox, message id)`` pairs the stage remembers by default."""


class RecentKeys:
    """A bounded set remembering the last ``capacity`` distinct keys, oldest forgotten
    first. Thread-safe: one lock around a small ``OrderedDict``, held for O(1) work.

    Why a lock and not an actor: the check runs in the consumer's thread, where the
    message already is (ARCHITECTURE §3); an actor would cost a round trip per message
    for a critical section of a dictionary lookup and insert.
    """

    __slots__ = ("_capacity", "_keys", "_lock")

    def __init__(self, capacity: int) -> None:
        if isinstance(capacity, bool) or not isinstance(capacity, int) or capacity < 1:
            raise InvalidArgumentError(f"capacity must be a positive integer, got {capacity!r}")
        self._capacity = capacity
        self._keys: OrderedDict[Hashable, None] = OrderedDict()
        self._lock = threading.Lock()

    @property
    def capacity(self) -> int:
        return self._capacity

    def remember(self, key: Hashable) -> bool:
        """Record ``key``; ``True`` if it was not remembered (now it is), ``False`` if it
        was (its position is unchanged: a repeat does not make a key younger)."""
        keys = self._keys
        with self._lock:
            if key in keys:
                return False
            keys[key] = None
            if len(keys) > self._capacity:
                keys.popitem(last=False)
            return True

    def forget(self, key: Hashable) -> None:
        """Forget ``key`` if it is remembered (a consumption that was undone)."""
        with self._lock:
            self._keys.pop(key, None)

    def __contains__(self, key: object) -> bool:
        return key in self._keys

    def __len__(self) -> int:
        return len(self._keys)

    def snapshot(self) -> list[Hashable]:
        """The remembered keys, oldest first."""
        with self._lock:
            return list(self._keys)


class IdempotencyMiddleware:
    """Drops, on receive, a mailbox message whose id that mailbox already consumed.

    ``capacity``: how many ``(mailbox, message id)`` pairs to remember (default
    ``10_000``; a positive integer, else ``InvalidArgumentError``). The publish path is
    untouched. Cost per mailbox message: one tuple, one lock, one dict insert.
    """

    def __init__(self, capacity: int = DEFAULT_IDEMPOTENCY_CAPACITY) -> None:
        self._memory = RecentKeys(capacity)

    @property
    def capacity(self) -> int:
        return self._memory.capacity

    @property
    def memory(self) -> RecentKeys:
        """The remembered ``(mailbox address, message id)`` pairs."""
        return self._memory

    def on_publish(self, message: Message, next: Next) -> Message:
        """Publishing is never deduplicated here: passes ``message`` on."""
        return next(message)

    def on_receive(self, message: Message, next: Next) -> Message:
        """Pass a first consumption on; raise ``DuplicateMessageError`` for a repeat of a
        mailbox message (the hub drops it). Topic traffic always passes."""
        mailbox = message.target_mailbox
        if mailbox is None or mailbox.scheme is Scheme.TOPIC:
            return next(message)
        if not self._memory.remember((mailbox, message.id)):
            raise DuplicateMessageError(
                f"message {message.id} was already consumed from {mailbox}; dropping the duplicate"
            )
        return next(message)

    def on_given_back(self, message: Message) -> None:
        """A leased mailbox message went back to its mailbox unconsumed
        (``EventHub.lease``): forget its consumption, so its next reader gets it."""
        mailbox = message.target_mailbox
        if mailbox is not None:
            self._memory.forget((mailbox, message.id))

    def __repr__(self) -> str:
        return f"IdempotencyMiddleware(capacity={self.capacity})"
