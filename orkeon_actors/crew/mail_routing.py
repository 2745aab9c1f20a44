"""Mail reaching a crew: idle agents' mailboxes, ``crew://`` mail and event bindings.

Plain functions of :class:`~orkeon_actors.crew.crew_actor.CrewActor`'s state, called
only in its turns (on its thread), the actor passed explicitly.

Guarantees:

* an idle agent's mailbox is watched by one non-blocking hub wait (its *pump*): mail
  wakes the agent through the orchestration (``on_agent_mail``) or, if it does not
  consume it, ``CrewActor.on_message``; mail for a busy agent is kept in its inbox and
  served, oldest first, as soon as it is idle again;
* mail to ``crew://{id}`` is forwarded to the agent ``CrewActor.route`` picks;
* an ``on_event`` binding delivers every matching message to its mailbox, in publish
  order; the subscription's callback only tells the crew (it touches no crew state
  from the hub's thread);
* a withdrawn pump's late outcome is ignored (a late message is still kept); an error
  a pump reports fails the crew.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import attrs

from orkeon_actors.crew.delivery import Bound, EventBinding, Mail, WaitTeller
from orkeon_actors.crew.state import AgentStatus, CrewStatus
from orkeon_actors.crew.trace_format import describe_message
from orkeon_actors.hub.async_wait import deliver_to_mailbox, push_subscription, wait_async
from orkeon_actors.model.address import MailboxAddress
from orkeon_actors.model.ids import AgentId
from orkeon_actors.model.message import Message
from orkeon_actors.model.options import FOREVER, WaitOnMailbox

if TYPE_CHECKING:
    from orkeon_actors.crew.crew_actor import CrewActor

__all__ = [
    "arm_crew_pump",
    "arm_pump",
    "bound_event",
    "handle_mail",
    "mail_arrived",
    "serve_inbox_or_pump",
    "subscribe",
]


def arm_pump(actor: CrewActor, agent_id: AgentId) -> None:
    """Watch idle ``agent_id``'s mailbox (no-op if it is watched or not registered)."""
    runtime = actor.runtimes[agent_id]
    if runtime.pump is not None or runtime.registration is None:
        return
    token = WaitTeller(actor, Mail, agent_id)
    runtime.pump_token = token
    runtime.pump = wait_async(actor.hub, actor.client.caller, WaitOnMailbox(runtime.address), FOREVER, None, token)


def arm_crew_pump(actor: CrewActor) -> None:
    """Watch the crew's own mailbox (``crew://{id}``)."""
    token = WaitTeller(actor, Mail, None)
    actor.crew_pump_token = token
    actor.crew_pump = wait_async(actor.hub, actor.client.caller, WaitOnMailbox(actor.address), FOREVER, None, token)


def serve_inbox_or_pump(actor: CrewActor, agent_id: AgentId) -> None:
    """Handle the oldest message kept for ``agent_id``, or watch its mailbox if it is idle."""
    runtime = actor.runtimes[agent_id]
    if runtime.state.inbox:
        first, *rest = runtime.state.inbox
        runtime.state = attrs.evolve(runtime.state, inbox=tuple(rest))
        handle_mail(actor, agent_id, first)
    elif runtime.state.status is AgentStatus.IDLE:
        arm_pump(actor, agent_id)


def mail_arrived(actor: CrewActor, message: Mail) -> None:
    """A pump's outcome: route ``crew://`` mail, hand an idle agent its mail, keep a
    busy agent's; raise the error a pump reported."""
    outcome = message.outcome
    if message.agent_id is None:
        if actor.crew_pump_token != message.wait_id:
            return  # a withdrawn pump's late outcome
        actor.crew_pump = None
        actor.crew_pump_token = None
        if isinstance(outcome, BaseException):
            raise outcome
        actor.trace(None, "message", f"crew mailbox {describe_message(outcome)}")
        target = actor.route(outcome)
        deliver_to_mailbox(actor.hub, outcome, MailboxAddress.agent(actor.crew_id, target))
        arm_crew_pump(actor)
        return
    runtime = actor.runtimes[message.agent_id]
    if runtime.pump_token == message.wait_id:
        runtime.pump = None
        runtime.pump_token = None
    elif not isinstance(outcome, Message):
        return  # a withdrawn pump's late error
    if isinstance(outcome, BaseException):
        raise outcome
    if runtime.state.status is not AgentStatus.IDLE:
        runtime.state = attrs.evolve(runtime.state, inbox=(*runtime.state.inbox, outcome))
        return
    handle_mail(actor, message.agent_id, outcome)


def handle_mail(actor: CrewActor, agent_id: AgentId, message: Message) -> None:
    """Give idle ``agent_id`` ``message`` (the orchestration, else ``on_message``), then
    serve its next one if it is still idle."""
    actor.trace(agent_id, "message", describe_message(message))
    if not actor.orchestrator.on_agent_mail(actor, agent_id, message):
        actor.on_message(agent_id, message)
    if actor.status not in (CrewStatus.COMPLETED, CrewStatus.FAILED):
        runtime = actor.runtimes[agent_id]
        if runtime.state.status is AgentStatus.IDLE:
            serve_inbox_or_pump(actor, agent_id)


def subscribe(actor: CrewActor, binding: EventBinding) -> None:
    """Subscribe ``binding``'s topic; each message is told to the crew as :class:`Bound`."""

    def on_message(message: Message) -> None:
        actor.tell(Bound(binding, message))

    subscription = push_subscription(actor.hub, actor.client.caller, binding.topic, on_message)
    actor.subscriptions = (*actor.subscriptions, subscription)


def bound_event(actor: CrewActor, message: Bound) -> None:
    """Deliver a bound topic message to its binding's mailbox, unless the hub's
    subscription receive stages drop it."""
    sub = next((s for s in actor.subscriptions if s.pattern == message.binding.topic), None)
    consumed = sub.consume(message.message) if sub is not None else message.message
    if consumed is None:
        return
    actor.trace(None, "event", f"{consumed.topic} -> {message.binding.deliver_to}")
    deliver_to_mailbox(actor.hub, consumed, message.binding.deliver_to)
