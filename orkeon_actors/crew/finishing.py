"""A crew finishing: it completes or fails, tells its ``wait_finished`` watchers,
releases its waits and closes its mailboxes; and what it does with a late outcome.

Plain functions of :class:`~orkeon_actors.crew.crew_actor.CrewActor`'s state, called
only in its turns (on its thread), the actor passed explicitly.

Guarantees:

* a crew finishes once: the first :func:`complete` or :func:`fail` wins, the cause of
  a failure is kept in ``CrewActor.failure``;
* as it finishes, every live wait, pump and subscription is withdrawn, and every
  ``wait_finished`` watcher is told the outcome once (a broken watcher is logged and
  does not keep it from the others); a crew stopped unfinished tells them ``None``;
* a crew run without a supervisor closes its mailboxes as it finishes (a later post is
  refused, saying the crew finished); a supervised one does when told
  :class:`~orkeon_actors.crew.protocol.CloseMailboxes`;
* the outcome's final state is the crew's snapshot as JSON, or ``None`` (logged) if it
  cannot be encoded: the outcome is reported either way.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import attrs
from loguru import logger

from orkeon_actors.crew.delivery import Mail
from orkeon_actors.crew.finished import WatchFinish
from orkeon_actors.crew.snapshot import CrewOutcome, to_json
from orkeon_actors.crew.state import CrewFailure, CrewStatus
from orkeon_actors.crew.trace_format import short
from orkeon_actors.hub.memory import note_crew_finished
from orkeon_actors.model.ids import AgentId, CrewId
from orkeon_actors.model.message import Message

if TYPE_CHECKING:
    from orkeon_actors.crew.crew_actor import CrewActor

__all__ = [
    "after_finish",
    "close_if_unsupervised",
    "complete",
    "fail",
    "final_json",
    "release_mailboxes",
    "release_waits",
    "tell_finished",
    "tell_watch",
    "watch_finish",
]


def final_json(actor: CrewActor) -> str | None:
    """The finished crew's final state for its outcome; ``None`` (logged) if it
    cannot be encoded: the outcome is reported either way."""
    try:
        return to_json(actor.snapshot())
    except (TypeError, ValueError) as exc:
        logger.warning("crew {}: its final state could not be encoded for its outcome: {}", actor.crew_id, exc)
        return None


def complete(actor: CrewActor, result: str) -> None:
    """The orchestration finished: record ``result``, release waits and mailboxes."""
    if actor.status in (CrewStatus.COMPLETED, CrewStatus.FAILED):
        return
    actor.result = result
    actor.set_status(CrewStatus.COMPLETED)
    actor.trace(None, "crew", f"completed result={short(result)}")
    release_waits(actor)
    close_if_unsupervised(actor)
    tell_finished(actor)


def fail(actor: CrewActor, error_type: str, message: str, agent_id: AgentId | None = None) -> None:
    """Mark the crew failed with its cause (idempotent: the first cause wins)."""
    if actor.status in (CrewStatus.COMPLETED, CrewStatus.FAILED):
        return
    actor.failure = CrewFailure(error_type, message, agent_id)
    actor.set_status(CrewStatus.FAILED)
    actor.trace(agent_id, "crew", f"failed {actor.failure}")
    release_waits(actor)
    close_if_unsupervised(actor)
    tell_finished(actor)
    try:
        actor.on_crew_failed(actor.failure)
    except Exception:
        logger.opt(exception=True).error("on_crew_failed hook of crew {} raised", actor.crew_id)


def close_if_unsupervised(actor: CrewActor) -> None:
    """A crew run without a supervisor closes its mailboxes as it finishes (a
    supervised one does once its outcome is durable): a later post is refused with
    ``MailboxNotFoundError`` saying the crew finished, instead of being kept for
    nobody. The actor stays up for queries until ``ref.stop()``."""
    if actor.on_activity is None:
        release_mailboxes(actor)
        note_crew_finished(actor.hub, actor.crew_id, actor.status.value)


def watch_finish(actor: CrewActor, watch: WatchFinish) -> CrewId:
    """Register ``watch`` (told at once if the crew already finished); the answer
    names the crew."""
    if actor.status in (CrewStatus.COMPLETED, CrewStatus.FAILED):
        tell_watch(actor, watch, CrewOutcome(actor.status, actor.result, actor.failure, final_json(actor)))
    else:
        actor.finish_watches = (*actor.finish_watches, watch)
    return actor.crew_id


def tell_finished(actor: CrewActor) -> None:
    """Tell every watcher the crew's outcome, once (they are forgotten)."""
    watches, actor.finish_watches = actor.finish_watches, ()
    if watches:
        outcome = CrewOutcome(actor.status, actor.result, actor.failure, final_json(actor))
        for watch in watches:
            tell_watch(actor, watch, outcome)


def tell_watch(actor: CrewActor, watch: WatchFinish, outcome: CrewOutcome | None) -> None:
    """Tell ``watch`` the ``outcome`` (``None``: stopped unfinished); a callback that
    raises is logged."""
    try:
        watch.callback(outcome)
    except Exception:  # one broken watcher must not keep the outcome from the others
        logger.opt(exception=True).error("a wait_finished callback of crew {} failed", actor.crew_id)


def release_waits(actor: CrewActor) -> None:
    """Withdraw every agent's wait and pump, the crew pump and the subscriptions."""
    for runtime in actor.runtimes.values():
        runtime.release()
    if actor.crew_pump is not None:
        actor.crew_pump.cancel()
        actor.crew_pump = None
    actor.crew_pump_token = None  # its teller holds the crew (see AgentRuntime.release)
    for sub in actor.subscriptions:
        sub.close()
    actor.subscriptions = ()


def release_mailboxes(actor: CrewActor) -> None:
    """Release the waits, then close the crew's and its agents' mailboxes (one call)
    and withdraw its name from the hub."""
    release_waits(actor)
    held = [rt.registration for rt in actor.runtimes.values() if rt.registration is not None]
    if actor.crew_registration is not None:
        held.append(actor.crew_registration)
    if held:
        actor.hub.close_mailboxes(held)  # one store round trip on the durable hub
    for runtime in actor.runtimes.values():
        runtime.registration = None
    actor.crew_registration = None
    actor.unname()


def after_finish(actor: CrewActor, message: Any) -> None:
    """A late outcome for a finished crew: nothing to do (waits were withdrawn; a
    message taken meanwhile stays recorded in the agent's inbox)."""
    outcome = getattr(message, "outcome", None)
    agent_id = getattr(message, "agent_id", None)
    if isinstance(outcome, Message) and not outcome.is_timeout and agent_id in actor.runtimes:
        runtime = actor.runtimes[agent_id]
        if isinstance(message, Mail):
            runtime.state = attrs.evolve(runtime.state, inbox=(*runtime.state.inbox, outcome))
