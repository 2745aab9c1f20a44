"""Ops a test loads into a host process (``load_ops``): hold the deliveries of its
gateway's inboxes before its hub keeps them, count them, and let them go."""

from __future__ import annotations

import threading
from typing import Any

from orkeon_actors.fleet.host_main import HostState


def op_hold_inbox(state: HostState) -> bool:
    hub: Any = state.runtime.hub
    gate = threading.Event()
    lock = threading.Lock()
    arrived = [0]
    take_posts = hub.take_posts

    def held(batch: list[Any]) -> list[BaseException | None]:
        with lock:
            arrived[0] += len(batch)
        gate.wait(60)
        return list(take_posts(batch))

    hub.take_posts = held
    state.extra["held"] = (gate, lock, arrived)
    return True


def op_held(state: HostState) -> int:
    """How many deliveries reached the hold so far."""
    _gate, lock, arrived = state.extra["held"]
    with lock:
        return int(arrived[0])


def op_release_inbox(state: HostState) -> bool:
    gate, _lock, _arrived = state.extra["held"]
    gate.set()
    return True


OPS = {"hold_inbox": op_hold_inbox, "held": op_held, "release_inbox": op_release_inbox}
