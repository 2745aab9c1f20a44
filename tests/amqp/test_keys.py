"""Mismatched keys files are said at startup: a host that cannot verify another host's
presence names it within a presence interval, instead of refusing its messages silently."""

from __future__ import annotations

import secrets
import uuid
from pathlib import Path

import pytest
from loguru import logger

from orkeon_actors.fleet.hub import AmqpEventHub
from orkeon_actors.fleet.signing import HostKeys
from orkeon_actors.testing import wait_until

from .fleet import fleet_keys, start_host

pytestmark = pytest.mark.rabbitmq


def test_a_host_whose_copy_of_a_peers_key_differs_names_the_peer(vhost: str, tmp_path: Path) -> None:
    suffix = uuid.uuid4().hex[:6]
    a_id, b_id = f"a-{suffix}", f"b-{suffix}"
    keys = fleet_keys([a_id, b_id])
    b_keys = HostKeys({**keys.keys, a_id: secrets.token_bytes(32)})  # b's file holds another key for a
    errors: list[str] = []
    sink = logger.add(lambda m: errors.append(str(m)), level="ERROR", filter=lambda r: "keys files" in r["message"])
    a = start_host(vhost, a_id, tmp_path / "a.db", keys)
    b = start_host(vhost, b_id, tmp_path / "b.db", b_keys)
    try:
        hub_b = b.hub
        assert isinstance(hub_b, AmqpEventHub)
        wait_until(lambda: a_id in hub_b.gateway.roster.mismatched(), what="b naming a's refused presence")
        assert "bad signature" in hub_b.gateway.roster.mismatched()[a_id]
        assert any(f"keys files of {b_id} and {a_id} differ" in line for line in errors), errors
        assert len([line for line in errors if a_id in line]) == 1  # said once, not at every heartbeat
    finally:
        logger.remove(sink)
        a.stop()
        b.stop()
