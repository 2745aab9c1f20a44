"""Broker administration with rabbitmqctl (no management plugin): scratch vhosts come and
go, the caps are applied as policies, and without rabbitmqctl the error says what to run."""

from __future__ import annotations

import json

import pytest

from orkeon_actors.errors import BrokerError
from orkeon_actors.fleet.broker_admin import apply_policies, rabbitmqctl, scratch_vhost
from orkeon_actors.hub.amqp.topology import InboxCaps

pytestmark = pytest.mark.rabbitmq


def _policies(vhost: str) -> dict[str, dict[str, object]]:
    rows = rabbitmqctl("list_policies", "-p", vhost, "--formatter", "json")
    return {
        row["name"]: json.loads(row["definition"]) if isinstance(row["definition"], str) else row["definition"]
        for row in json.loads(rows)
    }


def test_a_scratch_vhost_exists_inside_the_block_only(vhost: str) -> None:
    with scratch_vhost("orkeon-admin-test") as name:
        assert name in rabbitmqctl("list_vhosts").split()
    assert name not in rabbitmqctl("list_vhosts").split()


def test_the_caps_are_applied_as_policies_and_updated_in_place(vhost: str) -> None:
    apply_policies(vhost, InboxCaps(max_length=7, message_ttl_ms=1000, orphan_expiry_ms=60_000, dlq_max_length=9))
    policies = _policies(vhost)
    assert policies["orkeon-inboxes"] == {
        "max-length": 7,
        "overflow": "reject-publish-dlx",
        "message-ttl": 1000,
        "expires": 60_000,
        "max-length-bytes": 1 << 30,  # the default byte bound
    }
    assert policies["orkeon-dlq"] == {"max-length": 9, "overflow": "drop-head"}
    apply_policies(vhost, InboxCaps(max_length=8))
    assert _policies(vhost)["orkeon-inboxes"]["max-length"] == 8


def test_without_rabbitmqctl_the_error_lists_the_commands_to_run(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", "/nonexistent")
    with pytest.raises(
        BrokerError,
        match=r"rabbitmqctl is not on PATH: run on the broker's machine: rabbitmqctl "
        r"set_policy -p v1 orkeon-inboxes",
    ):
        apply_policies("v1")
