"""How a crew's trace shows what happened: short, single-line texts, with the ids
minted at random (ULIDs) left out so that two runs of a simulation produce the same
trace (the simulation's recorder compares them).

Pure functions; the crew actor calls them when it records a step for its
:class:`~orkeon_actors.crew.crew_actor.CrewObserver`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, Final

from orkeon_actors.model.message import Message
from orkeon_actors.model.options import WaitDescriptor, WaitOnMailbox, WaitOnTopic

__all__ = ["describe_message", "describe_wait", "redact", "redact_arguments", "short"]

_VOLATILE: Final = frozenset({"id", "event_id", "message_id", "correlation_id", "original_wait_id", "wait_id"})
"""Keys whose values are minted at random: shown as ``…``."""


def short(text: str, limit: int = 120) -> str:
    """``text`` on one line, cut to ``limit`` characters (an ellipsis marks the cut)."""
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def redact(value: Any) -> str:
    """A tool result (JSON data) for the trace, without ids minted at random."""

    def scrub(v: Any) -> Any:
        if isinstance(v, Mapping):
            return {k: ("…" if k in _VOLATILE and v[k] is not None else scrub(x)) for k, x in v.items()}
        if isinstance(v, list):
            return [scrub(x) for x in v]
        return v

    return short(json.dumps(scrub(value), sort_keys=True, default=str, ensure_ascii=False), 200)


def redact_arguments(arguments: str) -> str:
    """A tool call's JSON arguments for the trace (as :func:`redact`; text that is not
    JSON is shown as it is, shortened)."""
    try:
        return redact(json.loads(arguments))
    except ValueError:
        return short(arguments)


def describe_wait(descriptor: WaitDescriptor) -> str:
    """What a parked agent waits on."""
    if isinstance(descriptor, WaitOnTopic):
        return f"topic {descriptor.topic}"
    if isinstance(descriptor, WaitOnMailbox):
        return f"mailbox {descriptor.address}"
    return "reply"


def describe_message(message: Message) -> str:
    """A message a crew received: its topic, source and (shortened) payload, or the
    wait it timed out."""
    if message.is_timeout:
        return f"timed out waiting on {message.metadata.get('original_topic', '?')}"
    source = (
        f"{message.source_crew_id}/{message.source_agent_id}"
        if message.source_agent_id
        else str(message.source_crew_id)
    )
    return f"{message.topic} from {source}: {short(message.payload.decode('utf-8', 'replace'), 80)}"
