"""Observing the hub's waits: who waits for what, until when.

A hub exposes ``wait_observer`` (``None`` by default: then no wait costs anything more
than an attribute read). An observer set there is told, on the thread that registers
or settles the wait, when a wait starts (with its :class:`WaitInfo`) and when it ends
(settled by a message, a timeout, a cancellation or the hub's stop). The Studio
(:mod:`orkeon_actors.studio`) uses it to show each crew's pending waits counting down.

Guarantees: ``wait_started`` is called once per wait round before the wait can time out;
``wait_ended`` once per started wait, with the same ``wait_id``. Both must be short and
must not block or call back into the hub (they run inside hub operations). A
``wait_id`` may start again after it ended (a receive stage that drops a duplicate
re-arms the same wait).
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Protocol, runtime_checkable

import attrs

from orkeon_actors.model.ids import AgentId, CrewId

__all__ = ["WaitInfo", "WaitObserver", "wait_info"]


@attrs.frozen
class WaitInfo:
    """One pending wait.

    ``kind`` is ``on_topic``, ``on_mailbox`` or ``on_reply``; ``target`` the waited
    topic pattern, mailbox address or correlation id; ``expires_at`` the wall-clock
    instant (the hub clock's) at which a finite wait times out, ``None`` for ``FOREVER``.
    """

    wait_id: str
    crew_id: CrewId
    agent_id: AgentId | None
    kind: str
    target: str
    started_at: datetime
    expires_at: datetime | None


@runtime_checkable
class WaitObserver(Protocol):
    """What a hub's ``wait_observer`` is told (see the module docstring)."""

    def wait_started(self, info: WaitInfo) -> None: ...

    def wait_ended(self, wait_id: str) -> None: ...


def wait_info(
    wait_id: str,
    crew_id: CrewId,
    agent_id: AgentId | None,
    kind: str,
    target: str,
    started_at: datetime,
    remaining: float | None,
) -> WaitInfo:
    """The :class:`WaitInfo` of a wait whose deadline is ``remaining`` seconds away
    (``None``: no deadline); ``expires_at`` is ``started_at`` plus that much."""
    expires_at = None if remaining is None else started_at + timedelta(seconds=max(0.0, remaining))
    return WaitInfo(wait_id, crew_id, agent_id, kind, target, started_at, expires_at)
