"""The EventHub port (spec §3.1), as every adapter implements it.

Callers never use these methods directly: they ``bind`` a caller context and talk
through the returned :class:`~orkeon_actors.hub.client.HubClient`, which stamps the
source crew and agent on every message (an agent cannot forge them, spec §6.1). An
adapter (in-memory, SQLite, AMQP) implements the caller-explicit methods below and passes
the shared contract test suite in ``tests/contract``.
"""

from __future__ import annotations

import abc
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import Future
from datetime import timedelta
from typing import TYPE_CHECKING, Protocol

import attrs

from orkeon_actors.model.address import MailboxAddress
from orkeon_actors.model.cancel import CancelToken
from orkeon_actors.model.clock import Clock
from orkeon_actors.model.ids import AgentId, CorrelationId, CrewId
from orkeon_actors.model.message import FrozenMap, Message
from orkeon_actors.model.options import PublishOptions, WaitDescriptor, WaitTimeout

if TYPE_CHECKING:
    from orkeon_actors.history.endpoint import Endpoint
    from orkeon_actors.history.ledger import LedgerReport
    from orkeon_actors.history.view import SentHistory
    from orkeon_actors.hub.client import HubClient
    from orkeon_actors.hub.quotas import CallerQuotas
    from orkeon_actors.hub.scheduler import Scheduler
    from orkeon_actors.model.limits import Limits

__all__ = [
    "POST_TOPIC",
    "REPLY_TOPIC",
    "SEND_TOPIC",
    "CallerContext",
    "DeferredAcks",
    "DispatchObserver",
    "DurableEventHub",
    "EventHub",
    "MailboxLease",
    "MailboxReader",
    "MailboxRegistration",
    "Subscription",
]

POST_TOPIC = "_system.post"
"""Synthetic topic of mailbox posts: no agent can publish on ``_system.*`` (spec §10.2)."""
SEND_TOPIC = "_system.send"
"""Synthetic topic of requests (``send``, ``request``)."""
REPLY_TOPIC = "_system.reply"
"""Synthetic topic of replies."""


@attrs.frozen(cache_hash=True)  # a dict key on every send (the per-caller quotas)
class CallerContext:
    """Who is calling: the hub stamps these on every message the caller sends."""

    crew_id: CrewId
    agent_id: AgentId | None = None

    @property
    def is_system(self) -> bool:
        return self.crew_id.is_system


class Subscription(abc.ABC):
    """A long-lived subscription: an iterator of messages, FIFO per subscriber.

    Iteration blocks for the next message and ends cleanly (``StopIteration``) after
    :meth:`close` or once the cancel token given to ``subscribe`` fires. Messages
    published after ``subscribe`` returned are all seen, once each.
    """

    pattern: str

    @abc.abstractmethod
    def __next__(self) -> Message: ...

    def __iter__(self) -> Iterator[Message]:
        return self

    @abc.abstractmethod
    def drain(self) -> list[Message]:
        """Every message already buffered, without blocking (for polling loops)."""

    @abc.abstractmethod
    def poll(self) -> Message | None:
        """The oldest buffered message (after the receive stages), or ``None`` at once
        when nothing is buffered. Never blocks."""

    @abc.abstractmethod
    def inject(self, message: Message) -> None:
        """Buffer ``message`` as if it had just been routed here (a consumer handing the
        subscription a matching message that reached it by another path). Ignored once
        closed."""

    @abc.abstractmethod
    def pending(self) -> list[Message]:
        """The buffered messages, oldest first, without consuming them (the receive
        stages have not run on them yet): what a snapshot of a consumer records."""

    @abc.abstractmethod
    def receive(self, timeout: WaitTimeout | float | int | timedelta, *, cancel: CancelToken | None = None) -> Message:
        """The next message: the oldest buffered one at once, else block for one.

        ``timeout`` is a ``WaitTimeout`` (``FOREVER`` included) or a number of seconds /
        ``timedelta``. When a finite timeout expires first, returns the hub's
        WaitTimedOutMessage (spec §9.2, ``message.is_timeout``; its ``original_topic`` is
        the subscription's pattern) and the subscription stays open: nothing published
        meanwhile is lost, nothing is handed out twice. While blocked, the call counts as
        an ``on_topic`` wait in ``hub.pending_waits()``.

        Raises the token's error (``CancelledError``, ``BudgetExhaustedError``) if
        ``cancel`` fires, ``HubStoppedError`` if the runtime stops, and
        ``InvalidArgumentError`` if the subscription is (or gets) closed.
        """

    @property
    @abc.abstractmethod
    def dropped(self) -> int:
        """How many messages were discarded, oldest first, because more than
        ``max_buffered`` (given to ``subscribe``) were waiting to be consumed. Always 0
        for an unbounded subscription."""

    @abc.abstractmethod
    def close(self) -> None:
        """Stop receiving; idempotent. Buffered messages are discarded."""

    @property
    @abc.abstractmethod
    def closed(self) -> bool: ...

    def __enter__(self) -> Subscription:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class MailboxReader(abc.ABC):
    """Holds a mailbox and drains it (consume-and-hold): the mailbox pushes every
    message into the reader's local buffer. ``close()`` (or leaving the ``with``
    block) returns what was not consumed to the mailbox, in order."""

    @abc.abstractmethod
    def receive(self, cancel: CancelToken | None = None) -> Message:
        """Block for the next message. Raises ``CancelledError`` if ``cancel`` fires,
        ``MailboxNotFoundError`` if the mailbox is closed meanwhile."""

    def __iter__(self) -> Iterator[Message]:
        return self

    @abc.abstractmethod
    def __next__(self) -> Message: ...

    @abc.abstractmethod
    def close(self) -> None: ...

    def __enter__(self) -> MailboxReader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class MailboxLease(abc.ABC):
    """A mailbox message taken provisionally (:meth:`EventHub.lease`): the consumer
    holds it until it either confirms it consumed (:meth:`confirm`) or gives it back (:meth:`give_back`).

    Guarantees (``docs/hub.md``, "Leases"):

    * While a lease is held, its mailbox hands nothing else out: every other reader of
      that mailbox (a wait, a held reader, another lease) waits. So no reader overtakes
      a leased message, and confirmed consumption follows the mailbox's order.
    * :meth:`give_back` puts the message back at the mailbox's front, in order, for the
      next reader; its receive stages forget it (an idempotency stage lets it through
      again).
    * A durable hub deletes the message's row only at :meth:`confirm`: a process that
      dies holding a lease restarts with the message still kept, first in its mailbox.
    * Exactly one of :meth:`confirm` and :meth:`give_back` takes effect; later calls
      of either are no-ops. Leaving a ``with`` block without :meth:`confirm` gives it
      back.

    A lease whose wait timed out holds nothing: :attr:`message` is the
    WaitTimedOutMessage (``message.is_timeout``) and both calls are no-ops.
    """

    message: Message
    """What the consumer reads: the message after the receive stages, or the timeout."""

    @property
    @abc.abstractmethod
    def held(self) -> bool:
        """Whether the lease still holds its message (neither confirmed nor given back)."""

    @abc.abstractmethod
    def confirm(self) -> None:
        """The message was consumed: the mailbox hands out its next message, and a
        durable hub deletes the row (deferred to the crew's snapshot for a crew whose
        acknowledgements are deferred). Raises ``LeaseRevokedError`` (a
        ``MailboxNotFoundError``) if the mailbox was closed while the lease was held: its ``close()`` returned the
        message with the unconsumed ones (a parked durable mailbox keeps it)."""

    @abc.abstractmethod
    def give_back(self) -> None:
        """The message was not consumed: it goes back to the front of its mailbox."""

    def __enter__(self) -> MailboxLease:
        return self

    def __exit__(self, *exc: object) -> None:
        self.give_back()


class MailboxRegistration(abc.ABC):
    """A registered mailbox. ``close()`` unregisters it and returns the messages nobody
    consumed, so closing never loses a message silently."""

    __slots__ = ()

    address: MailboxAddress

    @abc.abstractmethod
    def reader(self) -> MailboxReader:
        """Hold the mailbox and drain it; see :class:`MailboxReader`."""

    @abc.abstractmethod
    def depth(self) -> int:
        """Messages waiting to be consumed."""

    @abc.abstractmethod
    def close(self) -> list[Message]: ...

    def __enter__(self) -> MailboxRegistration:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class EventHub(abc.ABC):
    """The port. Guarantees (stated precisely in ``docs/hub.md``):

    * mailbox FIFO, topic FIFO per subscriber, no order across topics (§10.4);
    * a message is handed to each subscriber and each mailbox at most once, and nothing
      accepted is silently dropped;
    * scoped publishes reach only the target crew's subscribers and system ones (§10.1);
    * send requires a finite timeout; waits may be finite or FOREVER (§9).
    """

    clock: Clock
    limits: Limits
    """The runtime's bounds (:class:`~orkeon_actors.model.limits.Limits`), checked by
    every :class:`~orkeon_actors.hub.client.HubClient` of this hub."""
    quotas: CallerQuotas
    """What each caller holds at once, counted against :attr:`limits`."""

    def bind(self, crew_id: CrewId | str, agent_id: AgentId | str | None = None) -> HubClient:
        """A client whose messages carry ``crew_id`` / ``agent_id`` as their source.

        ``CrewId.SYSTEM`` cannot be bound this way: use :attr:`system`.
        """
        from orkeon_actors.errors import InvalidIdError
        from orkeon_actors.hub.client import HubClient

        crew = CrewId(crew_id)
        if crew.is_system:
            raise InvalidIdError("CrewId.SYSTEM is reserved for the hub; use hub.system for system traffic")
        agent = None if agent_id is None else AgentId(agent_id)
        return HubClient(self, CallerContext(crew, agent))

    @property
    def system(self) -> HubClient:
        """A client bound to ``CrewId.SYSTEM``: an unscoped observer that sees every
        scoped publish, and whose traffic the ACL exempts."""
        from orkeon_actors.hub.client import HubClient

        return HubClient(self, CallerContext(CrewId.SYSTEM))

    @abc.abstractmethod
    def register_mailbox(self, address: MailboxAddress | str, owner: object = None) -> MailboxRegistration:
        """Register ``address``; ``owner`` is what registered it (a ``client://`` mailbox
        registered with a crew id as its owner is readable by that crew:
        :meth:`client_mailbox_owner`)."""

    def register_mailboxes(self, addresses: Sequence[MailboxAddress | str]) -> list[MailboxRegistration]:
        """Register every address of ``addresses`` (distinct), all of them or none: the
        registrations in the same order, each as :meth:`register_mailbox` returns it, with
        the same guarantees and errors (the first failure is raised and none stays
        registered). The durable hub writes them in one transaction, so a crew opening
        its mailboxes pays one store round trip, not one per mailbox. This default
        registers them one by one and closes those it registered if one fails (an
        adapter whose ``close`` drops durable state overrides it)."""
        registrations: list[MailboxRegistration] = []
        try:
            for address in addresses:
                registrations.append(self.register_mailbox(address))
        except BaseException:
            for registration in registrations:
                registration.close()
            raise
        return registrations

    def close_mailboxes(self, registrations: Sequence[MailboxRegistration]) -> list[list[Message]]:
        """Close every registration of ``registrations`` (of this hub): each one's
        unconsumed messages, in the same order, with the guarantees of
        :meth:`MailboxRegistration.close` for each (a post racing the close raises
        ``MailboxNotFoundError`` or is in that registration's list). The durable hub
        unregisters them in one transaction."""
        return [registration.close() for registration in registrations]

    def client_mailbox_owner(self, address: MailboxAddress) -> CrewId | None:
        """The crew that registered the ``client://`` mailbox ``address`` as its owner
        (``register_client_mailbox``), the only non-system reader it has; ``None`` if
        none did. This default, for a hub that records no owner, is ``None``."""
        return None

    def park_mailboxes(self, registrations: Sequence[MailboxRegistration]) -> None:
        """Release the live mailboxes of ``registrations`` (their crew goes to sleep).
        A durable hub keeps each address registered and what is posted to it kept until
        it is registered again (:class:`DurableEventHub`); this default, for a hub that
        keeps nothing beyond its process, closes them."""
        self.close_mailboxes(registrations)

    @abc.abstractmethod
    def publish(
        self, caller: CallerContext, topic: str, payload: object, options: PublishOptions, cancel: CancelToken | None
    ) -> Message: ...

    # post, request, send and reply take ``idempotency_key``: on a hub that keeps a sent
    # history, a reused key of the same sender to the same recipient with the same content
    # returns the original message instead of sending again, with other content raises
    # IdempotencyKeyConflictError; a hub without one raises SentHistoryUnavailableError.
    @abc.abstractmethod
    def post(
        self,
        caller: CallerContext,
        to: MailboxAddress,
        payload: object,
        metadata: Mapping[str, str] | None,
        cancel: CancelToken | None,
        *,
        idempotency_key: str | None = None,
    ) -> Message: ...

    def post_nowait(
        self, caller: CallerContext, to: MailboxAddress, payload: object, metadata: Mapping[str, str] | None
    ) -> Future[Message]:
        """:meth:`post` without waiting for the store: the future completes with the
        message once it is kept (at the commit of a durable hub) and handed to the
        mailbox live then, or fails with what :meth:`post` would raise from that point
        on. What is refused before anything is written (an unknown mailbox, a
        middleware stage) raises here. This default, for a hub that keeps nothing
        beyond its process, posts and returns a completed future."""
        future: Future[Message] = Future()
        future.set_result(self.post(caller, to, payload, metadata, None))
        return future

    @abc.abstractmethod
    def request(
        self,
        caller: CallerContext,
        to: MailboxAddress,
        payload: object,
        timeout: float,
        metadata: Mapping[str, str] | None,
        cancel: CancelToken | None,
        *,
        idempotency_key: str | None = None,
    ) -> Message: ...

    @abc.abstractmethod
    def send(
        self,
        caller: CallerContext,
        to: MailboxAddress,
        payload: object,
        timeout: float,
        metadata: Mapping[str, str] | None,
        cancel: CancelToken | None,
        *,
        idempotency_key: str | None = None,
    ) -> Message: ...

    @abc.abstractmethod
    def reply(
        self,
        caller: CallerContext,
        correlation_id: CorrelationId,
        payload: object,
        metadata: Mapping[str, str] | None,
        cancel: CancelToken | None,
        *,
        idempotency_key: str | None = None,
    ) -> Message: ...

    @abc.abstractmethod
    def subscribe(
        self,
        caller: CallerContext,
        pattern: str,
        cancel: CancelToken | None,
        *,
        metadata_match: FrozenMap | None = None,
        max_buffered: int | None = None,
    ) -> Subscription:
        """``metadata_match``: only messages whose metadata contains every pair are
        delivered (as for ``WaitOnTopic``). ``max_buffered``: bound on unconsumed
        messages, the oldest dropped beyond it (``None``: unbounded)."""

    @abc.abstractmethod
    def wait_for(
        self, caller: CallerContext, descriptor: WaitDescriptor, timeout: WaitTimeout, cancel: CancelToken | None
    ) -> Message: ...

    @abc.abstractmethod
    def lease(
        self, caller: CallerContext, address: MailboxAddress, timeout: WaitTimeout, cancel: CancelToken | None
    ) -> MailboxLease:
        """Take the next message of the mailbox ``address`` provisionally (see
        :class:`MailboxLease`), waiting for one as ``wait_for(WaitOnMailbox(address))``
        does (same timeout, cancellation and errors; counted as an ``on_mailbox``
        wait while it waits). A cancellation that wins the race against a message
        leaves the message in the mailbox; one that loses returns the lease."""

    @abc.abstractmethod
    def get_last_value(
        self, caller: CallerContext, key: str, crew_scope: CrewId | None, cancel: CancelToken | None
    ) -> Message | None: ...

    @abc.abstractmethod
    def is_active_correlation(self, correlation_id: CorrelationId) -> bool:
        """True while a request with this id awaits its reply (tools validate reply_to)."""

    @abc.abstractmethod
    def pending_waits(self) -> dict[str, int]:
        """Waits in progress per kind (``on_topic``, ``on_mailbox``, ``on_reply``)."""

    def name_crew(self, crew_id: CrewId, name: str) -> Callable[[], None]:
        """Tell the hub that the crew ``crew_id``, live on it from now, runs as ``name``
        (its blueprint's ``name:``); returns the call that withdraws it when the crew's
        mailboxes leave the hub. Display only: the sent history records it beside the
        canonical ids (docs/history.md); nothing routes by it. This default, for a hub
        that records nothing, keeps no name."""
        return lambda: None

    def crew_name(self, crew_id: CrewId | None) -> str | None:
        """The name the crew ``crew_id`` runs as on this hub (:meth:`name_crew`), or
        ``None`` (not live here, or never named)."""
        return None

    def sent_history(
        self, sender: Endpoint, to: MailboxAddress | None, since_ms: int | None, include_body: bool
    ) -> SentHistory:
        """``sender``'s sent history (``client.sent``). This default, for a hub that keeps
        none, is an ``unavailable`` coverage without rows (never an empty complete one)."""
        from orkeon_actors.history.view import Coverage, CoverageState, SentHistory

        return SentHistory(sender, Coverage(CoverageState.UNAVAILABLE, None), (), include_body)

    def verify_sent(self, sender: str | MailboxAddress | Endpoint) -> LedgerReport:
        """Walk ``sender``'s sent ledger to genesis (``agent://crew/agent``). Raises
        ``SentHistoryUnavailableError`` on a hub that keeps no sent history."""
        from orkeon_actors.errors import SentHistoryUnavailableError

        raise SentHistoryUnavailableError(
            "this hub keeps no sent history: start the runtime on a store (Runtime.start(store=...))"
        )

    @abc.abstractmethod
    def stop(self) -> None:
        """Stop every actor of the hub; blocked callers get ``HubStoppedError``."""


class DeferredAcks(Protocol):
    """The mailbox messages a crew consumed whose acknowledgement waits for the
    transaction that makes their effects durable (its next snapshot): ``(address,
    message id)`` rows, thread-safe."""

    def view(self) -> tuple[tuple[str, str], ...]:
        """The rows consumed so far and not acknowledged, in consumption order."""
        ...

    def acknowledged(self, rows: tuple[tuple[str, str], ...]) -> None:
        """``rows`` were deleted by a committed transaction: forget them."""
        ...

    def __len__(self) -> int: ...


class DispatchObserver(Protocol):
    """Hears of every message a durable hub routes or dispatches (how the lifecycle
    sees the triggers of sleeping crews). Both calls run on the dispatching thread and
    must not block, with the one exception :meth:`DurableEventHub.add_dispatch_observer`
    states."""

    def routing(self, message: Message) -> None:
        """``message`` is about to be routed to topics: no subscriber can have it yet."""
        ...

    def dispatched(self, message: Message) -> None:
        """``message`` was routed to topics (also if routing raised), a reply was
        delivered, or a post was kept for a mailbox nobody holds live."""
        ...


class DurableEventHub(EventHub):
    """What the crews and the lifecycle need from a hub whose mailboxes outlive its
    process (the SQLite adapter; the distributed one to come): parked mailboxes,
    acknowledgements deferred to a crew's snapshot, transactional units of work, and the
    observation of dispatch. Layers above the port depend on this, never on an adapter.
    """

    scheduler: Scheduler

    @abc.abstractmethod
    def park_mailboxes(self, registrations: Sequence[MailboxRegistration]) -> None:
        """Release the live mailboxes but keep each address durably registered: posts
        to it are kept and announced to the dispatch observers; the next registration of
        the address reloads them, oldest first. Never blocks on the store."""

    @abc.abstractmethod
    def defer_acks(self, crew_id: CrewId | str) -> DeferredAcks:
        """From now on a message handed out by a mailbox of ``crew_id`` is not
        acknowledged when consumed: it is recorded in the returned log and stays kept
        until its owner acknowledges it with the crew's next snapshot. Call it before
        the crew registers its mailboxes; again: the same log."""

    @abc.abstractmethod
    def end_deferral(self, crew_id: CrewId | str) -> None:
        """Stop deferring ``crew_id``'s acknowledgements (rows still logged stay kept)."""

    @abc.abstractmethod
    def unit_of_work(
        self, crew_id: CrewId | str, agent_id: AgentId | str | None = None, *, consuming: Message | None = None
    ) -> object:
        """A transaction for a handler of ``crew_id``: its effects, its outgoing
        messages and the acknowledgement of ``consuming`` commit together."""

    @abc.abstractmethod
    def add_dispatch_observer(self, observer: DispatchObserver) -> None:
        """Tell ``observer`` of every routing and dispatch from now on. Its
        ``dispatched`` may wait for the store for a topic message (never dispatched on
        the store writer's thread): the lifecycle keeps the event for sleeping crews
        before the publish returns."""

    @abc.abstractmethod
    def remove_dispatch_observer(self, observer: DispatchObserver) -> None:
        """Stop telling ``observer``; idempotent."""
