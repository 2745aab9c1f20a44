"""Exhaustion: memory or CPU an attacker could make the runtime hold (issue 15)."""

from __future__ import annotations

from pathlib import Path

import pytest

import orkeon_actors as ok
from orkeon_actors.errors import LimitExceededError
from orkeon_actors.hub import routing
from orkeon_actors.model.limits import (
    DEFAULT_MAX_PAYLOAD_BYTES,
    MAX_METADATA_ENTRIES,
    MAX_METADATA_KEY_BYTES,
    MAX_METADATA_VALUE_BYTES,
    Limits,
)
from orkeon_actors.model.message import FrozenMap
from orkeon_actors.testing import wait_until
from orkeon_actors.tools import EventHubTools
from tests.conftest import Background
from tests.security.conftest import start


def test_the_route_cache_is_bounded_in_bytes_and_per_hub(rt: ok.Runtime) -> None:
    router = rt.hub._router  # type: ignore[attr-defined]
    rt.hub.system.subscribe("#")
    client = rt.hub.bind("evil")
    for i in range(3000):
        client.publish(f"t{i}." + "x" * 240, b"")
    assert router._cache_bytes <= routing._CACHE_BYTES
    assert sum(len(topic) for topic in router._cache) <= routing._CACHE_BYTES
    rt.stop()
    assert router._cache == {} and router.count() == 0  # freed with the hub


def test_no_module_global_match_cache_outlives_a_runtime() -> None:
    assert not hasattr(routing.topic_matches, "cache_info")


def test_the_default_payload_limit_is_16_mib(rt: ok.Runtime) -> None:
    watcher = rt.hub.system.subscribe("#")
    reg = rt.hub.register_mailbox("agent://c/b")
    client = rt.hub.bind("c", "a")
    too_big = b"x" * (DEFAULT_MAX_PAYLOAD_BYTES + 1)
    for call in (
        lambda: client.publish("t", too_big),
        lambda: client.post("agent://c/b", too_big),
        lambda: client.request("agent://c/b", too_big, timeout=5),
    ):
        with pytest.raises(LimitExceededError, match="max_payload_bytes") as caught:
            call()
        assert caught.value.limit == DEFAULT_MAX_PAYLOAD_BYTES
    assert watcher.poll() is None
    assert reg.depth() == 0


def test_max_payload_bytes_is_checked_before_anything_is_stored(tmp_path: Path) -> None:
    rt = start("sqlite", tmp_path, max_payload_bytes=1000)
    try:
        reg = rt.hub.register_mailbox("agent://c/b")
        client = rt.hub.bind("c", "a")
        with pytest.raises(LimitExceededError):
            client.post("agent://c/b", "x" * 1000)  # 1002 bytes as JSON
        client.post("agent://c/b", "x" * 998)
        assert reg.depth() == 1
        tools = EventHubTools(client)
        result = tools.invoke("post_message", {"target_mailbox": "agent://c/b", "payload": "y" * 2000}, errors="result")
        assert result["error"] == {
            "type": "LimitExceededError",
            "message": result["error"]["message"],
            "field": "payload",
        }
        assert reg.depth() == 1
    finally:
        rt.stop()


def test_limits_are_validated() -> None:
    with pytest.raises(ValueError, match="positive"):
        ok.Runtime.start(max_payload_bytes=0)


def test_metadata_is_bounded(rt: ok.Runtime) -> None:
    client = rt.hub.bind("c", "a")
    too_many = {f"k{i}": "v" for i in range(MAX_METADATA_ENTRIES + 1)}
    for metadata in (
        too_many,
        {"k" * (MAX_METADATA_KEY_BYTES + 1): "v"},
        {"k": "v" * (MAX_METADATA_VALUE_BYTES + 1)},
        FrozenMap(too_many),
    ):
        with pytest.raises(LimitExceededError, match="MAX_METADATA"):
            client.publish("t", 1, ok.PublishOptions(metadata=metadata))
    tools = EventHubTools(client)
    result = tools.invoke("publish_event", {"topic": "t", "payload": 1, "metadata": too_many}, errors="result")
    assert result["error"]["field"] == "metadata" and "MAX_METADATA_ENTRIES" in result["error"]["message"]


def test_pending_requests_per_agent_are_bounded(tmp_path: Path, hub_kind: str) -> None:
    rt = start(hub_kind, tmp_path, limits=Limits(max_pending_requests=3))
    try:
        rt.hub.register_mailbox("agent://bank/t")
        greedy = rt.hub.bind("shop", "greedy")
        for _ in range(3):
            greedy.request("agent://bank/t", 1, timeout=60)
        with pytest.raises(LimitExceededError, match="max_pending_requests"):
            greedy.request("agent://bank/t", 1, timeout=60)
        rt.hub.bind("shop", "other").request("agent://bank/t", 1, timeout=60)  # others unaffected
        rt.hub.system.request("agent://bank/t", 1, timeout=60)
    finally:
        rt.stop()


def test_a_pending_request_slot_is_given_back_when_it_is_answered(tmp_path: Path, hub_kind: str) -> None:
    rt = start(hub_kind, tmp_path, limits=Limits(max_pending_requests=1))
    try:
        reg = rt.hub.register_mailbox("agent://bank/t")
        client = rt.hub.bind("shop", "a")
        reader = reg.reader()
        for n in range(3):
            sent = client.request("agent://bank/t", n, timeout=60)
            rt.hub.bind("bank", "t").reply(reader.receive().correlation_id or "", n)
            assert client.wait_for(ok.WaitOnReply(sent.correlation_id or ""), 5).json() == n
    finally:
        rt.stop()


def test_waits_per_agent_are_bounded() -> None:
    rt = ok.Runtime.start(limits=Limits(max_waits=2))
    try:
        client = rt.hub.bind("c", "a")
        jobs = [Background(lambda: client.wait_for(ok.WaitOnTopic("t"), 10)) for _ in range(2)]
        wait_until(lambda: rt.hub.pending_waits()["on_topic"] == 2, what="two waits")
        with pytest.raises(LimitExceededError, match="max_waits"):
            client.wait_for(ok.WaitOnTopic("t"), 10)
        rt.hub.bind("c", "b").publish("t", 1)
        for job in jobs:
            assert job.get().json() == 1
        assert rt.hub.quotas.held("max_waits", client.caller) == 0  # both slots given back
        again = Background(lambda: client.wait_for(ok.WaitOnTopic("t"), 10))
        wait_until(lambda: rt.hub.pending_waits()["on_topic"] == 1, what="a new wait")
        rt.hub.bind("c", "b").publish("t", 2)
        assert again.get().json() == 2
    finally:
        rt.stop()


def test_subscriptions_per_client_are_bounded(rt: ok.Runtime) -> None:
    rt.hub.limits = Limits(max_subscriptions=4)
    client = rt.hub.bind("c", "a")
    subscriptions = [client.subscribe(f"t{i}") for i in range(4)]
    with pytest.raises(LimitExceededError, match="max_subscriptions"):
        client.subscribe("t")
    subscriptions[0].close()
    client.subscribe("t").close()
    rt.hub.bind("c", "other").subscribe("t")


def test_wait_for_event_cursors_are_bounded(rt: ok.Runtime) -> None:
    tools = EventHubTools(rt.hub.bind("c", "a"), max_cursors=16)
    for i in range(40):
        tools.invoke("wait_for_event", {"topic": f"t{i}", "timeout_ms": 1})
    assert len(tools.cursors) <= 16
