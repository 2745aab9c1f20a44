"""Hosts of a fleet for the tests: signing keys, and runtimes joined to a vhost."""

from __future__ import annotations

import json
import re
import secrets
import uuid
from collections.abc import Sequence
from pathlib import Path

import orkeon_actors as ok
from orkeon_actors.fleet.config import FleetConfig
from orkeon_actors.fleet.signing import HostKeys

from .broker import require_broker, session_vhost, url

FAST_PRESENCE = {"presence_interval": 0.2, "presence_ttl": 3.0}
"""Heartbeat timings for tests: a host's presence reaches the others within a beat."""


def documented_names() -> str:
    """The permission regex ``docs/distributed.md`` tells an operator to grant a host."""
    text = (Path(__file__).parents[2] / "docs" / "distributed.md").read_text()
    found = re.search(r"^NAMES='([^']+)'$", text, re.MULTILINE)
    assert found is not None, "docs/distributed.md lost its NAMES='...' permissions line"
    return found.group(1)


def fleet_keys(hosts: Sequence[str]) -> HostKeys:
    return HostKeys({host: secrets.token_bytes(32) for host in hosts})


def write_keys(path: Path, keys: HostKeys) -> Path:
    """``keys`` as the JSON key file ``$ORKEON_FLEET_KEYS`` names."""
    path.write_text(json.dumps({host: key.hex() for host, key in keys.keys.items()}))
    path.chmod(0o600)  # a host refuses a keys file others can read
    return path


def start_host(
    vhost: str,
    host_id: str,
    store: Path,
    keys: HostKeys,
    *,
    clock: ok.Clock | None = None,
    middleware: Sequence[ok.EventHubMiddleware] = (),
    **options: object,
) -> ok.Runtime:
    """A runtime that is host ``host_id`` of the fleet on ``vhost``."""
    fleet = FleetConfig(url(vhost), host_id, keys, **{**FAST_PRESENCE, **options})  # type: ignore[arg-type]
    return ok.Runtime.start(store=str(store), fleet=fleet, clock=clock, middleware=middleware)


def amqp_runtime(tmp: Path, clock: ok.Clock | None) -> ok.Runtime:
    """The contract suite's AMQP adapter: a host of its own on the session's vhost."""
    require_broker()
    host = f"host-{uuid.uuid4().hex[:10]}"
    return start_host(session_vhost(), host, tmp / f"{host}.db", fleet_keys([host]), clock=clock)
