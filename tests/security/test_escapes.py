"""Escapes: a crew reaching what belongs to another crew or to the hub (issue 15)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import orkeon_actors as ok
from orkeon_actors.acl import LinksBlock, load_links
from orkeon_actors.acl.links import CrewLink, Direction
from orkeon_actors.errors import EventAclError, LimitExceededError, ReservedTopicError, UnknownCorrelationError
from orkeon_actors.model.ids import CorrelationId
from orkeon_actors.tools import EventHubTools

_CROCKFORD = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"


def _neighbours(correlation: str, spread: int) -> list[str]:
    """The ids a prober tries: the same text with the low 20 bits moved by ±spread."""
    value = 0
    for char in correlation:
        value = value * 32 + _CROCKFORD.index(char)
    out = []
    for delta in range(-spread, spread + 1):
        if delta == 0:
            continue
        other = value + delta
        text = "".join(_CROCKFORD[(other >> (5 * i)) & 31] for i in reversed(range(26)))
        out.append(text)
    return out


def test_correlation_ids_are_not_monotonic_neighbours() -> None:
    """Minted from a CSPRNG: 1000 ids of one burst share no 60-bit prefix of randomness."""
    ids = [CorrelationId.new() for _ in range(1000)]
    assert len(set(ids)) == 1000
    randomness = [int("".join(str(_CROCKFORD.index(c)) for c in i[10:14])) for i in ids]
    assert len(set(randomness)) > 990  # a monotonic generator repeats the high random bits in a burst
    assert ids != sorted(ids)


def test_probing_the_neighbours_of_ones_own_id_answers_no_victim(rt: ok.Runtime) -> None:
    hub = rt.hub
    victim_inbox = hub.register_mailbox("agent://bank/teller")
    hub.register_mailbox("agent://evil/probe")
    victim = hub.bind("shop", "buyer")
    pending = victim.request("agent://bank/teller", {"pay": 10}, timeout=60)
    attacker = hub.bind("evil", "mallory")
    own = attacker.request("agent://evil/probe", "x", timeout=60)
    assert own.correlation_id is not None and pending.correlation_id is not None
    tools = EventHubTools(attacker, register_own_mailbox=False)
    guesses = [*_neighbours(own.correlation_id, 100), pending.correlation_id]
    for guess in guesses:
        result = tools.invoke("reply_to", {"correlation_id": guess, "payload": "forged"}, errors="result")
        assert result["error"]["type"] == "UnknownCorrelationError"
    # A refused reply to the real id reads exactly like one to an unknown id.
    unknown = tools.invoke("reply_to", {"correlation_id": CorrelationId.new(), "payload": 1}, errors="result")
    forged = tools.invoke("reply_to", {"correlation_id": pending.correlation_id, "payload": 1}, errors="result")
    assert re.sub("[0-9A-Z]{26}", "ID", unknown["error"]["message"]) == re.sub(
        "[0-9A-Z]{26}", "ID", forged["error"]["message"]
    )
    # The real recipient still answers, and the requester gets its real reply.
    request = victim_inbox.reader().receive()
    hub.bind("bank", "teller").reply(request.correlation_id or "", {"paid": True})
    assert victim.wait_for(ok.WaitOnReply(pending.correlation_id), 5).json() == {"paid": True}


def test_only_the_recipient_crew_replies(rt: ok.Runtime) -> None:
    hub = rt.hub
    hub.register_mailbox("crew://bank")
    pending = hub.bind("shop").request("crew://bank", 1, timeout=60)
    assert pending.correlation_id is not None
    with pytest.raises(UnknownCorrelationError):
        hub.bind("shop", "buyer").reply(pending.correlation_id, "self-answer")
    hub.bind("bank", "anyone").reply(pending.correlation_id, "ok")


def test_a_client_cannot_drain_another_crews_mailbox(rt: ok.Runtime) -> None:
    hub = rt.hub
    hub.register_mailbox("agent://victim/a")
    hub.register_mailbox("crew://victim")
    hub.bind("x").post("agent://victim/a", "secret")
    thief = hub.bind("thief", "t")
    for address in ("agent://victim/a", "crew://victim", "client://ui"):
        with pytest.raises(EventAclError):
            thief.wait_for(ok.WaitOnMailbox(address), 0.01)
    got = hub.bind("victim", "a").wait_for(ok.WaitOnMailbox("agent://victim/a"), 5)
    assert got.json() == "secret"  # still there for its owner


@pytest.mark.parametrize("topic", ["_system.wait_timed_out", "_system.post", "_system.reply", "_system"])
def test_only_the_hub_publishes_on_system_topics(rt: ok.Runtime, topic: str) -> None:
    hub = rt.hub
    watcher = hub.system.subscribe("_system.#")
    client = hub.bind("evil", "e")
    with pytest.raises(ReservedTopicError):
        client.publish(topic, "looks like the hub")
    if topic != "_system":
        with pytest.raises(ReservedTopicError):
            client.post(f"topic://{topic}", "looks like the hub")
    assert watcher.poll() is None
    hub.system.publish("_system.note", "from the hub")
    assert watcher.receive(5).json() == "from the hub"


def test_duplicate_links_entries_never_widen_the_grant() -> None:
    block = load_links(
        "links:\n"
        "  - to: bank\n    direction: outbound\n    allowed_topics: [pay.request]\n"
        "  - to: bank\n    direction: bidirectional\n"
    )
    [link] = block.links
    assert link.direction is Direction.OUTBOUND and link.allowed_topics == ("pay.request",)
    assert any("line 2" in str(w) and "line 5" in str(w) for w in block.warnings)


def test_duplicate_links_sharing_nothing_grant_nothing() -> None:
    block = LinksBlock.of(
        [CrewLink("bank", "outbound", ["a.b"]), CrewLink("bank", "outbound", ["c.d"]), CrewLink("b2", "inbound")]
    )
    assert [link.to for link in block.links] == ["b2"]
    assert block.warnings


def test_a_durable_unit_of_work_holds_the_same_boundary(tmp_path: Path) -> None:
    """The durable hub's other way to send (``hub.unit_of_work``) applies the same rules."""
    with ok.Runtime.start(store=str(tmp_path / "state.db"), max_payload_bytes=100) as rt:
        hub = rt.hub
        hub.register_mailbox("agent://c/a")
        with hub.unit_of_work("evil") as uow:  # type: ignore[attr-defined]
            with pytest.raises(ReservedTopicError):
                uow.publish("_system.post", "looks like the hub")
            with pytest.raises(ReservedTopicError):
                uow.post("topic://_system.reply", "looks like the hub")
            with pytest.raises(LimitExceededError):
                uow.post("agent://c/a", "x" * 200)
            assert uow.outgoing == []


def test_a_subscription_sees_no_mail_of_another_crew(rt: ok.Runtime) -> None:
    hub = rt.hub
    hub.register_mailbox("agent://victim/a")
    hub.register_mailbox("agent://bank/t")
    spy = hub.bind("spy", "s")
    subscriptions = [spy.subscribe("#"), spy.subscribe("_system.#")]
    victim = hub.bind("victim", "b")
    victim.post("agent://victim/a", "secret")
    victim.request("agent://bank/t", "secret request", timeout=60)
    victim.publish("not.secret", "broadcast")
    assert subscriptions[0].receive(5).json() == "broadcast"
    assert [s.poll() for s in subscriptions] == [None, None]
