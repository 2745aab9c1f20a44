"""What a row says about its ends beyond their canonical ids (sender-owned history
requirements, MESSAGE-R02): each endpoint keeps its crew's ``name:`` at send time, told
by the real crew actor, display only and marked historical, while keys and filters use
the canonical ids; a ``client://`` or ``topic://`` peer is never an agent and carries no
crew name."""

from __future__ import annotations

import json
from pathlib import Path

import pykka
import pytest

import orkeon_actors as ok
from orkeon_actors.cli.main import main
from orkeon_actors.crew import Agent, CrewActor, ScriptedModel, call, respond, start_crew
from orkeon_actors.history.endpoint import EndpointKind, endpoint_of
from orkeon_actors.model.address import Scheme
from orkeon_actors.orchestration import Sequential, Task
from orkeon_actors.testing import wait_until

from .conftest import Opener

BOB = "agent://b/bob"


def _start_poster(hub: ok.EventHub, name: str, crew_id: str, to: str) -> pykka.ActorRef[CrewActor]:
    """A real crew named ``name`` whose agent ``alice`` posts once to ``to``, then ends
    (the caller stops its actor: a crew run without a supervisor keeps it)."""
    script = ScriptedModel([call("post_message", {"target_mailbox": to, "payload": "hi"}), respond("x")])
    ref = CrewActor.start(
        hub, agents=[Agent("alice", script)], orchestration=Sequential([Task("t", "alice")]), name=name, crew_id=crew_id
    )
    start_crew(ref)
    return ref


class TestReadableNames:
    def test_a_crews_name_at_send_time_is_kept_beside_the_canonical_ids(
        self, open_store: Opener, store_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        rt = open_store()
        hub = rt.hub
        hub.register_mailbox(BOB)
        unname_b = hub.name_crew(ok.CrewId("b"), "billing")  # what a live crew b tells the hub
        poster = _start_poster(hub, "sales-team", "a", BOB)
        alice = hub.bind("a", "alice")
        wait_until(lambda: len(alice.sent().rows) == 1, what="the crew's post is recorded")
        wait_until(lambda: hub.crew_name(ok.CrewId("a")) is None, what="the finished crew left the hub")
        poster.stop()
        unname_b()

        [row] = alice.sent().rows
        assert (row.sender.id, row.sender.name) == ("a/alice", "sales-team")
        assert (row.to.kind, row.to.id, row.to.address, row.to.name) == (EndpointKind.AGENT, "b/bob", BOB, "billing")
        assert hub.crew_name(ok.CrewId("b")) is None  # the names live with the crews; the row keeps its own

        code = main(["message", "sent", "agent://a/alice", "--json", "--store", str(store_path)])
        out = json.loads(capsys.readouterr().out)
        assert code == 0
        assert out["sender"] == {"kind": "agent", "id": "a/alice", "address": "agent://a/alice", "name": "sales-team"}
        assert out["rows"][0]["to"] == {"kind": "agent", "id": "b/bob", "address": BOB, "name": "billing"}
        assert main(["message", "sent", "agent://a/alice", "--store", str(store_path)]) == 0
        text = capsys.readouterr().out
        assert "agent://a/alice (sales-team, name at send time)" in text
        assert "to b/bob (then agent://b/bob; billing, name at send time)" in text

    def test_keys_and_filters_use_the_canonical_ids_whatever_the_name(self, open_store: Opener) -> None:
        rt = open_store()
        hub = rt.hub
        hub.register_mailbox(BOB)
        alice = hub.bind("a", "alice")
        unname = hub.name_crew(ok.CrewId("b"), "billing")
        first = alice.post(BOB, "invoice 7", idempotency_key="invoice-7")
        unname()
        renamed = hub.name_crew(ok.CrewId("b"), "accounts")  # the same id under another blueprint name
        assert alice.post(BOB, "invoice 7", idempotency_key="invoice-7").id == first.id
        alice.post(BOB, "invoice 8")
        renamed()
        rows = alice.sent(to=BOB).rows
        assert [r.to.name for r in rows] == ["billing", "accounts"]
        assert {r.to.id for r in rows} == {"b/bob"}

    def test_client_and_topic_peers_are_never_agents_and_carry_no_crew_name(self, open_store: Opener) -> None:
        rt = open_store()
        hub = rt.hub
        hub.register_mailbox("client://ui")
        unname = hub.name_crew(ok.CrewId("ui"), "a-crew-with-the-clients-name")
        alice = hub.bind("a", "alice")
        alice.post("client://ui", "to a UI")
        unname()
        [row] = alice.sent().rows
        assert (row.to.kind, row.to.id, row.to.name) == (EndpointKind.CLIENT, "ui", None)
        for address in ("client://ui", "topic://news"):
            endpoint = endpoint_of(ok.MailboxAddress.parse(address), "ignored")
            assert endpoint.kind is not EndpointKind.AGENT and endpoint.name is None
        assert ok.MailboxAddress.parse("client://ui").scheme is Scheme.CLIENT


def test_a_sleeping_crews_name_is_read_from_its_snapshot_also_after_a_restart(open_store: Opener) -> None:
    """A recipient that is asleep (no live crew told the hub its name), even across a
    restart of the runtime, is named by its last snapshot; a crew this store never held
    stays unnamed."""
    from orkeon_actors.lifecycle import CrewBlueprint, CrewSupervisor

    def billing(_: ok.CrewId) -> CrewBlueprint:
        bob = Agent("bob", ScriptedModel([call("receive_message", {"wait_forever": True}), respond("done")]))
        return CrewBlueprint(agents=[bob], orchestration=Sequential([Task("go", "bob")]))

    rt = open_store()
    sup = CrewSupervisor(rt, factories={"billing": billing})
    sup.spawn("billing", "b")
    wait_until(lambda: rt.hub.crew_name(ok.CrewId("b")) == "billing", what="crew b live and named")
    assert sup.sleep("b") is True
    assert rt.hub.crew_name(ok.CrewId("b")) is None  # asleep: nothing live names it
    sup.stop()
    rt.stop()

    rt = open_store()  # no supervisor: b stays asleep, its mailbox durable
    rt.hub.register_mailbox("agent://z/zed")
    alice = rt.hub.bind("a", "alice")
    alice.post(BOB, "invoice 9")
    alice.post("agent://z/zed", "to a mailbox no crew snapshot names")
    rows = alice.sent().rows
    assert [(r.to.id, r.to.name) for r in rows] == [("b/bob", "billing"), ("z/zed", None)]
