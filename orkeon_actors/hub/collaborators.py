"""The collaborators a hub core takes instead of being subclassed
(:class:`~orkeon_actors.hub.memory.HubCore`): where an adapter keeps its mailboxes and
its retained last values beyond the live ones, and where it records what its agents
sent. The in-memory adapter has none; the SQLite adapter (:mod:`orkeon_actors.store`)
implements all three. The third collaborator,
the :class:`~orkeon_actors.hub.port.DispatchObserver`, is part of the port.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future
from contextlib import contextmanager
from typing import Protocol

from orkeon_actors.hub.mailbox import MailboxHandle
from orkeon_actors.model.address import MailboxAddress
from orkeon_actors.model.ids import CrewId
from orkeon_actors.model.message import Message

__all__ = ["LastValueStore", "MailboxStore", "SentRecorder", "registration_failure_handler", "registrations_unwaited"]

_unwaited = threading.local()


@contextmanager
def registrations_unwaited(on_failure: Callable[[BaseException], None]) -> Iterator[None]:
    """Within the block (on this thread), a mailbox store may register new mailboxes
    durably without waiting for that write to commit: ``register_mailboxes`` returns
    once they are live, the write is queued ahead of every later write (so a post to
    them, or their crew's snapshot, commits after it), and a write that fails is
    reported to ``on_failure`` (on the store's writer thread) instead of raised. A crew
    opening its mailboxes at its first turn uses it: waiting there held a pool thread
    per starting crew for a commit (docs/lifecycle.md, "A parked crew")."""
    previous = getattr(_unwaited, "on_failure", None)
    _unwaited.on_failure = on_failure
    try:
        yield
    finally:
        _unwaited.on_failure = previous


def registration_failure_handler() -> Callable[[BaseException], None] | None:
    """The ``on_failure`` of the :func:`registrations_unwaited` block this thread is
    in, or ``None`` (registrations wait for their commit)."""
    handler: Callable[[BaseException], None] | None = getattr(_unwaited, "on_failure", None)
    return handler


class MailboxStore(Protocol):
    """Where an adapter keeps its mailboxes beyond the live ones (a durable store): the
    hub core calls it at each step of a mailbox's life instead of holding the message
    only in the live mailbox. Every method runs on the calling thread of the operation.
    """

    def exists(self, address: MailboxAddress) -> bool:
        """Whether ``address`` is registered though no live mailbox holds it here (a post
        or send to it is accepted)."""
        ...

    def opened(self, handles: Sequence[MailboxHandle]) -> None:
        """``handles`` were just registered live: register them durably and reload what
        each kept, before any newer post reaches it. Raising undoes all of them."""
        ...

    def unregister(
        self, handles: Sequence[MailboxHandle], close_live: Callable[[Sequence[MailboxHandle]], list[list[Message]]]
    ) -> list[list[Message]]:
        """Close ``handles`` (``close_live`` closes the live side and returns each one's
        unconsumed messages) and unregister them durably."""
        ...

    def park(self, handles: Sequence[MailboxHandle], unlive: Callable[[MailboxHandle], None]) -> None:
        """Release the live ``handles`` (``unlive`` removes one from the live mailboxes)
        but keep their addresses registered and their messages kept."""
        ...

    def append(self, message: Message) -> None:
        """The end of the post and send chains: keep ``message`` for its mailbox, then
        hand it to the mailbox live at that moment. Raises ``MailboxNotFoundError``."""
        ...

    def post_nowait(self, post: Callable[[], Message]) -> Future[Message]:
        """Run ``post`` (a whole post chain, on this thread) with its :meth:`append`
        queued instead of waited for: the future completes once the message is kept
        and handed to the mailbox live then (or fails with what ``append`` raises)."""
        ...

    def consumed(self, message: Message, consumed: Message | None) -> None:
        """A mailbox or subscription handed ``message`` to a consumer (``consumed``:
        what the receive stages made of it, ``None`` if they dropped it)."""
        ...

    def reader_closed(self, handle: MailboxHandle) -> None:
        """A held reader of ``handle`` was closed."""
        ...

    def receiving(self, address: MailboxAddress) -> None:
        """A consumer came back to ``address`` (a wait or a held reader's receive),
        whatever that attempt brings: it is done with what it was handed before."""
        ...


class LastValueStore(Protocol):
    """Where an adapter keeps retained last values beyond memory."""

    def retain(self, scope: CrewId | None, key: str, message: Message, remember: Callable[[], None]) -> None:
        """Keep ``message`` as the last value of ``(scope, key)``, then ``remember()`` it
        in memory (before returning)."""
        ...


class SentRecorder(Protocol):
    """Where an adapter keeps its senders' sent history (docs/history.md;
    ``orkeon_actors.store.sent_history`` on SQLite). The core hands it every post and
    send to a mailbox and every reply, at the end of the publish stages."""

    def deliver(
        self, message: Message, to: MailboxAddress | None, key: str | None, terminal: Callable[[Message], Message]
    ) -> Message:
        """Deliver ``message`` to ``to`` (``terminal`` is the core's own delivery) and
        record it in its sender's history when it belongs there; for a reused
        idempotency ``key`` with the same content, return the original message instead.
        Raises what ``terminal`` raises, ``IdempotencyKeyConflictError``, and
        ``SentHistoryUnavailableError`` for a ``key`` on a send it does not record."""
        ...

    def replay_reply(self, message: Message, key: str) -> Message | None:
        """The reply its sender already made under ``key`` to ``message``'s correlation
        id (a keyed retry once the request was answered), or ``None`` when it made none.
        Raises ``IdempotencyKeyConflictError`` when that reply had other content."""
        ...
