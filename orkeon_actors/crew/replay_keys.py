"""Idempotency keys on an agent's hub side-effect tool calls, so a crew restored after a
crash never makes a hub side effect twice (issue 29, "Sleep and crashes";
``docs/crews.md``, "Crashes: what is replayed").

A restored agent asks its model again from the conversation of its last snapshot (model
calls are at least once). If the model answers a ``post_message`` or ``send_request``
call that the agent had already run before the crash, running it again would post
twice. On a runtime whose store keeps the sent history (``Runtime.start(store=...)``,
``StoreConfig(sent_history=True)``, the default), the crew runs these two tools with an
``idempotency_key`` derived from where the call stands in the agent's conversation, so
the replayed call is the sent history's keyed retry (``docs/history.md``, "Keyed
retry"): it sends nothing and returns the original message, and the agent reads the
result the first run read.

The key is ``call:{task}:{turn}:{call id}``: the task the agent is running, the number
of model answers it had in that task when the call was made, and the call's id.
All three are in the agent's state (the snapshot holds them), so a replay that reaches
the same call from the same conversation derives the same key. The sender
(``crew/agent``) and the recipient scope every key already. A key longer than the
200 characters the tools accept is replaced by its SHA-256.

Not keyed: a call whose arguments already hold an ``idempotency_key`` (the model's own
wins), ``reply_to`` (a request is answered once by the hub: a replayed reply is refused
with ``UnknownCorrelationError``, never delivered twice, and a reply to a system
request takes no key), ``publish_event`` (a publish is not a send: the sent history
does not record it) and every call on a runtime without a sent history (an in-memory
hub refuses keys; nothing survives its crash to replay anyway).
"""

from __future__ import annotations

import hashlib
import json
from typing import TYPE_CHECKING, Final

import attrs

from orkeon_actors.crew.agent_runtime import AgentRuntime
from orkeon_actors.crew.model import ToolCall
from orkeon_actors.crew.state import AgentState

if TYPE_CHECKING:
    from orkeon_actors.crew.crew_actor import CrewActor

__all__ = ["KEYED_TOOLS", "MAX_KEY", "hold", "keyed", "replay_key"]

KEYED_TOOLS: Final = frozenset({"post_message", "send_request"})
"""The hub tools a crew runs with a derived key on a runtime with a sent history."""

MAX_KEY: Final = 200
"""The longest ``idempotency_key`` the tools accept (``orkeon_actors.tools.dto``)."""


def replay_key(state: AgentState, call: ToolCall) -> str:
    """The key of ``call`` made by the agent in ``state`` (see the module docstring)."""
    task = "" if state.task is None else state.task.task_id
    key = f"call:{task}:{state.turns}:{call.id}"
    if len(key) > MAX_KEY:
        key = "call:" + hashlib.sha256(key.encode()).hexdigest()
    return key


def keyed(state: AgentState, call: ToolCall) -> ToolCall:
    """``call`` with its :func:`replay_key` in its arguments when it is one of
    :data:`KEYED_TOOLS` whose arguments are a JSON object without a key; else ``call``
    itself (arguments that are not an object are left for the tool to refuse)."""
    if call.name not in KEYED_TOOLS:
        return call
    arguments = call.parsed_arguments()  # JSON text by construction (``ToolCall``)
    if not isinstance(arguments, dict) or arguments.get("idempotency_key") is not None:
        return call
    arguments["idempotency_key"] = replay_key(state, call)
    return attrs.evolve(call, arguments=json.dumps(arguments))


def hold(actor: CrewActor, runtime: AgentRuntime) -> bool:
    """The model of ``runtime``'s agent just answered with tool calls (queued): hold
    them until a checkpoint of the crew holds the conversation, when one of them is a
    keyed hub side effect and the crew can be checkpointed (a supervised crew,
    ``on_checkpoint``, on a runtime with a sent history) and its model does not declare
    ``replays_identically`` (a :class:`~orkeon_actors.crew.model.ScriptedModel` does: a
    replay from any earlier snapshot re-derives the same keys). Then the agent is marked
    ``held`` (its crew counts as waiting, so the supervisor's checkpoint, the sleep's
    snapshot transaction, can take it), the supervisor is asked, and ``True`` parks
    the agent: the ``Resume`` after the commit runs the calls
    (:func:`~orkeon_actors.crew.parked_waits.rearm_all`). A crew restored from that
    snapshot runs them too, with the same keys: a call that was made before a crash
    is the keyed retry, answered by the original message."""
    on_checkpoint = actor.on_checkpoint
    if on_checkpoint is None or not runtime.agent.hub_tools or not actor.agent_io.keyed_tool_calls:
        return False
    if getattr(runtime.agent.model, "replays_identically", False) is True:
        return False  # asked again, it makes the same calls with the same ids: the keys suffice
    if not any(call.name in KEYED_TOOLS for call in runtime.state.queued_calls):
        return False
    runtime.held = True
    on_checkpoint(actor.crew_id)
    return True
