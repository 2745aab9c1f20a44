"""The sent history of agents on the durable hub: rows owned by their sender, canonical
direction, coverage that never overclaims, keyed retries (sender-owned history
requirements, MESSAGE-R01, R02, R03, R07, R08, R11)."""

from __future__ import annotations

import threading

import pytest

import orkeon_actors as ok
from orkeon_actors.errors import (
    IdempotencyKeyConflictError,
    SentCoverageError,
    SentHistoryUnavailableError,
    UnknownCorrelationError,
)
from orkeon_actors.history.endpoint import EndpointKind
from orkeon_actors.history.records import SendKind
from orkeon_actors.history.view import CoverageState
from orkeon_actors.store import SqliteEventHub, faults
from orkeon_actors.tools import EventHubTools

from .conftest import Opener

BOB = "agent://b/bob"


def _durable(rt: ok.Runtime) -> SqliteEventHub:
    assert isinstance(rt.hub, SqliteEventHub)
    return rt.hub


def _serve_one(hub: ok.EventHub, address: str, agent: ok.HubClient) -> threading.Thread:
    """Answer the first request that reaches ``address`` as ``agent``."""
    reg = hub.register_mailbox(address)

    def run() -> None:
        with reg.reader() as reader:
            request = reader.receive()
            assert request.correlation_id is not None
            agent.reply(request.correlation_id, {"echo": request.json()})

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


def test_post_send_and_reply_of_agents_are_one_row_each_owned_by_the_sender(open_store: Opener) -> None:
    rt = open_store()
    hub = rt.hub
    hub.register_mailbox(BOB)
    alice = hub.bind("a", "alice")
    bob = hub.bind("b", "bob")
    server = _serve_one(hub, "agent://b/desk", bob)
    posted = alice.post(BOB, {"n": 1}, {"trace": "t1"})
    answer = alice.send("agent://b/desk", {"q": 2}, timeout=10)
    server.join(10)

    mine = alice.sent(include_body=True)
    assert mine.coverage.state is CoverageState.COMPLETE
    assert [(r.kind, r.to.id) for r in mine.rows] == [(SendKind.POST, "b/bob"), (SendKind.SEND, "b/desk")]
    assert mine.rows[0].message_id == posted.id
    assert mine.rows[0].metadata == {"trace": "t1"} and mine.rows[0].body == b'{"n":1}'
    theirs = bob.sent()
    assert [(r.kind, r.to.kind, r.to.id, r.correlation_id) for r in theirs.rows] == [
        (SendKind.REPLY, EndpointKind.AGENT, "a/alice", answer.correlation_id)
    ]
    assert theirs.rows[0].message_id == answer.id
    assert alice.sent_count() == 2 and bob.sent_count() == 1
    assert hub.verify_sent("agent://a/alice").ok and hub.verify_sent("agent://b/bob").ok


def test_consuming_or_deleting_the_recipient_copy_changes_no_sender_row(open_store: Opener) -> None:
    rt = open_store()
    hub = rt.hub
    reg = hub.register_mailbox(BOB)
    alice = hub.bind("a", "alice")
    for i in range(3):
        alice.post(BOB, i)
    before = alice.sent(include_body=True)
    with reg.reader() as reader:
        reader.receive()
    reg.close()  # deletes what the mailbox kept
    assert _durable(rt).kept_messages(BOB) == []
    after = alice.sent(include_body=True)
    assert after == before and len(after) == 3
    assert hub.verify_sent("agent://a/alice").ok


def test_system_crew_level_and_timeout_traffic_is_in_no_agent_history(open_store: Opener) -> None:
    rt = open_store()
    hub = rt.hub
    hub.register_mailbox(BOB)
    hub.register_mailbox("agent://a/alice")
    hub.system.post(BOB, "from the system")
    hub.bind("b").post(BOB, "a service principal of crew b")  # no agent: R11
    alice = hub.bind("a", "alice")
    timed_out = alice.wait_for(ok.WaitOnMailbox(ok.MailboxAddress.parse("agent://a/alice")), 0.05)
    assert timed_out.is_timeout
    # A request of the system answered by an agent: the other end is the system.
    desk = hub.register_mailbox("agent://b/desk")
    system_request = hub.system.request("agent://b/desk", "ping", timeout=10)
    with desk.reader() as reader:
        assert reader.receive().id == system_request.id
    assert system_request.correlation_id is not None
    hub.bind("b", "bob").reply(system_request.correlation_id, "pong")
    alice.publish("news", "an event, not a send")
    hub.bind("b").post("topic://news", "a crew-level broadcast")
    hub.system.post("topic://news", "the system's broadcast")
    for who in (alice, hub.bind("b", "bob")):
        history = who.sent()
        assert history.coverage.state is CoverageState.COMPLETE
        assert history.rows == ()
    with pytest.raises(SentHistoryUnavailableError, match="only agents"):
        hub.bind("b").sent()


def test_replies_to_service_principal_requests_are_in_no_agent_history(open_store: Opener) -> None:
    rt = open_store()
    hub = rt.hub
    desk = hub.register_mailbox("agent://b/desk")
    bob = hub.bind("b", "bob")
    # A crew-level caller (a service principal: a crew's own client, a client:// peer's
    # binding) requests; the agent's reply belongs to that request's exchange (R11).
    for requester in (hub.bind("ops"), hub.bind("ui-peer")):
        request = requester.request("agent://b/desk", "status?", timeout=10)
        with desk.reader() as reader:
            assert reader.receive().id == request.id
        assert request.correlation_id is not None
        with pytest.raises(SentHistoryUnavailableError, match="crew-level requester"):
            bob.reply(request.correlation_id, "up", idempotency_key="status-1")
        bob.reply(request.correlation_id, "up")
    assert bob.sent().rows == () and bob.sent().coverage.state is CoverageState.COMPLETE
    # The same agent's reply to an agent's request is its send.
    alice = hub.bind("a", "alice")
    server = _serve_one(hub, "agent://b/counter", bob)
    alice.send("agent://b/counter", "ping", timeout=10)
    server.join(10)
    assert [(r.kind, r.to.id) for r in bob.sent().rows] == [(SendKind.REPLY, "a/alice")]


def test_identical_unkeyed_sends_are_distinct_rows(open_store: Opener) -> None:
    rt = open_store()
    rt.hub.register_mailbox(BOB)
    alice = rt.hub.bind("a", "alice")
    first, second = alice.post(BOB, {"same": 1}), alice.post(BOB, {"same": 1})
    rows = alice.sent(include_body=True).rows
    assert [r.message_id for r in rows] == [first.id, second.id] and first.id != second.id
    assert rows[0].body == rows[1].body
    assert len(_durable(rt).kept_messages(BOB)) == 2


def test_the_tools_idempotency_key_replays_the_original_message(open_store: Opener) -> None:
    rt = open_store()
    rt.hub.register_mailbox(BOB)
    tools = EventHubTools(rt.hub.bind("a", "alice"))
    args = {"target_mailbox": BOB, "payload": {"invoice": 8}, "idempotency_key": "invoice-8"}
    first, again = tools.invoke("post_message", args), tools.invoke("post_message", args)
    assert again["message_id"] == first["message_id"]  # posted_at: the row's millisecond
    [row] = rt.hub.bind("a", "alice").sent().rows
    assert row.idempotency_key == "invoice-8" and len(_durable(rt).kept_messages(BOB)) == 1
    with pytest.raises(IdempotencyKeyConflictError, match="invoice-8"):
        tools.invoke("post_message", {**args, "payload": {"invoice": 9}})
    tools.close()


def test_rows_store_canonical_endpoints_and_client_peers_are_never_agents(open_store: Opener) -> None:
    rt = open_store()
    hub = rt.hub
    hub.register_mailbox("client://ui")
    hub.register_mailbox("crew://b")
    alice = hub.bind("a", "alice")
    alice.post("client://ui", "to a UI")
    alice.post("crew://b", "to a crew")
    rows = alice.sent().rows
    assert [(r.to.kind, r.to.id, r.to.address) for r in rows] == [
        (EndpointKind.CLIENT, "ui", "client://ui"),
        (EndpointKind.CREW, "b", "crew://b"),
    ]
    assert all(r.sender.kind is EndpointKind.AGENT and r.sender.id == "a/alice" for r in rows)
    assert [r.to.id for r in alice.sent(to="client://ui").rows] == ["ui"]


def test_since_is_strict_and_to_filters_by_canonical_recipient(open_store: Opener) -> None:
    rt = open_store()
    hub = rt.hub
    hub.register_mailbox(BOB)
    hub.register_mailbox("agent://b/carol")
    alice = hub.bind("a", "alice")
    first = alice.post(BOB, 1)
    alice.post("agent://b/carol", 2)
    rows = alice.sent().rows
    boundary = rows[0].sent_at_ms
    later = [r for r in rows if r.sent_at_ms > boundary]
    assert list(alice.sent(since=boundary).rows) == later
    assert first.id not in [r.message_id for r in alice.sent(since=boundary).rows]
    assert [r.message_id for r in alice.sent(to=BOB).rows] == [first.id]


def test_a_hub_without_history_reports_unavailable_and_count_refuses_it() -> None:
    with ok.Runtime.start() as rt:
        alice = rt.hub.bind("a", "alice")
        history = alice.sent()
        assert history.coverage.state is CoverageState.UNAVAILABLE and history.rows == ()
        assert history.to_json()["coverage"] == {"state": "unavailable", "since_ms": None, "pending": 0}
        with pytest.raises(SentCoverageError, match="unavailable") as info:
            alice.sent_count()
        assert info.value.state == "unavailable"
        with pytest.raises(SentHistoryUnavailableError):
            rt.hub.verify_sent("agent://a/alice")
        rt.hub.register_mailbox(BOB)
        with pytest.raises(SentHistoryUnavailableError, match="durable store"):
            alice.post(BOB, 1, idempotency_key="k")


def test_a_store_run_without_the_index_never_claims_completeness_across_the_gap(open_store: Opener) -> None:
    rt = open_store()
    rt.hub.register_mailbox(BOB)
    rt.hub.bind("a", "alice").post(BOB, "indexed")
    rt.stop()
    off = open_store(sent_history=False)
    off.hub.bind("a", "alice").post(BOB, "not indexed")
    assert off.hub.bind("a", "alice").sent().coverage.state is CoverageState.UNAVAILABLE
    off.stop()
    on = open_store()
    alice = on.hub.bind("a", "alice")
    history = alice.sent()
    assert history.coverage.state is CoverageState.COMPLETE
    assert history.rows == () and alice.sent_count() == 0  # the row before the gap is outside the coverage
    alice.post(BOB, "indexed again")
    after = alice.sent()
    assert [r.body for r in alice.sent(include_body=True).rows] == [b'"indexed again"']
    assert after.coverage.since_ms is not None and all(r.sent_at_ms > after.coverage.since_ms for r in after.rows)
    assert alice.sent_count() == len(after.rows) == 1  # never counted across the gap
    assert alice.sent(since=0).rows == after.rows  # an earlier since does not reach across it either
    report = on.hub.verify_sent("agent://a/alice")
    assert (report.ok, report.rows) == (True, 2)  # the ledger keeps (and checks) both rows


def test_an_interrupted_reply_completion_is_partial_then_resumed_by_the_senders_next_op(open_store: Opener) -> None:
    rt = open_store()
    hub = rt.hub
    hub.register_mailbox(BOB)
    desk = hub.register_mailbox("agent://b/desk")
    alice, bob = hub.bind("a", "alice"), hub.bind("b", "bob")
    request = alice.request("agent://b/desk", "q", timeout=30)
    with desk.reader() as reader:
        reader.receive()
    assert request.correlation_id is not None
    failures = [0]

    def fail_once(point: str) -> None:
        if point == "send.row_written" and not failures[0]:
            failures[0] += 1
            raise OSError("disk full (injected)")

    faults.install(fail_once)
    try:
        with pytest.raises(OSError, match="injected"):
            bob.reply(request.correlation_id, "answer")
    finally:
        faults.uninstall()
    reply = alice.wait_for(ok.WaitOnReply(request.correlation_id), 5)
    assert reply.json() == "answer"  # the recipient copy was materialised
    partial = bob.sent()
    assert (partial.coverage.state, partial.coverage.pending, partial.rows) == (CoverageState.PARTIAL, 1, ())
    with pytest.raises(SentCoverageError, match="partial") as info:
        bob.sent_count()
    assert info.value.pending == 1
    bob.post(BOB, "next op")
    done = bob.sent()
    assert done.coverage.state is CoverageState.COMPLETE
    assert [(r.kind, r.message_id) for r in done.rows] == [
        (SendKind.REPLY, reply.id),
        (SendKind.POST, done.rows[1].message_id),
    ]
    assert hub.verify_sent("agent://b/bob").ok


def test_a_reply_that_is_refused_leaves_neither_row_nor_intent(open_store: Opener) -> None:
    rt = open_store()
    bob = rt.hub.bind("b", "bob")
    with pytest.raises(UnknownCorrelationError):
        bob.reply(ok.CorrelationId.new(), "nobody asked")
    assert bob.sent().coverage.state is CoverageState.COMPLETE and bob.sent().rows == ()


def test_concurrent_sends_of_one_sender_serialise_into_one_unbroken_ledger(open_store: Opener) -> None:
    rt = open_store()
    hub = rt.hub
    hub.register_mailbox(BOB)
    alice = hub.bind("a", "alice")
    threads = [threading.Thread(target=lambda: [alice.post(BOB, "same") for _ in range(25)]) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    history = alice.sent()
    assert alice.sent_count() == 100  # identical unkeyed posts stay distinct
    assert len({r.message_id for r in history.rows}) == 100
    report = hub.verify_sent("agent://a/alice")
    assert (report.ok, report.rows) == (True, 100)


def test_a_unit_of_works_agent_post_is_pending_until_the_outbox_dispatches_it(open_store: Opener) -> None:
    rt = open_store()
    hub = _durable(rt)
    hub.register_mailbox(BOB)
    alice = hub.bind("a", "alice")
    reached, release = threading.Event(), threading.Event()

    def hold(point: str) -> None:
        if point == "outbox.before_dispatch":
            reached.set()
            release.wait(10)

    faults.install(hold)
    try:
        with hub.unit_of_work("a", "alice") as uow:
            posted = uow.post(BOB, "from a handler")
        assert reached.wait(10)
        coverage = alice.sent().coverage
        assert (coverage.state, coverage.pending) == (CoverageState.PARTIAL, 1)
    finally:
        release.set()
        faults.uninstall()
    deadline = threading.Event()
    for _ in range(1000):
        if alice.sent().coverage.state is CoverageState.COMPLETE:
            break
        deadline.wait(0.01)
    history = alice.sent()
    assert history.coverage.state is CoverageState.COMPLETE
    assert [r.message_id for r in history.rows] == [posted.id]
    assert [m.id for m in hub.kept_messages(BOB)] == [posted.id]
    assert hub.verify_sent("agent://a/alice").ok


class TestIdempotencyKeys:
    def test_the_same_content_returns_the_original_and_sends_nothing_more(self, open_store: Opener) -> None:
        rt = open_store()
        hub = _durable(rt)
        hub.register_mailbox(BOB)
        alice = hub.bind("a", "alice")
        first = alice.post(BOB, {"x": 1}, {"m": "1"}, idempotency_key="order-7")
        again = alice.post(BOB, {"x": 1}, {"m": "1"}, idempotency_key="order-7")
        assert again.id == first.id
        assert [m.id for m in hub.kept_messages(BOB)] == [first.id]
        assert alice.sent_count() == 1
        assert alice.sent().rows[0].idempotency_key == "order-7"

    def test_other_content_raises_and_the_scope_is_sender_recipient_key(self, open_store: Opener) -> None:
        rt = open_store()
        hub = rt.hub
        hub.register_mailbox(BOB)
        hub.register_mailbox("agent://b/carol")
        alice = hub.bind("a", "alice")
        first = alice.post(BOB, "one", idempotency_key="k")
        with pytest.raises(IdempotencyKeyConflictError, match="other content") as info:
            alice.post(BOB, "two", idempotency_key="k")
        assert info.value.original_id == first.id
        assert alice.post("agent://b/carol", "one", idempotency_key="k").id != first.id  # another recipient
        assert hub.bind("a", "dave").post(BOB, "one", idempotency_key="k").id != first.id  # another sender
        assert alice.sent_count() == 2

    def test_the_key_stays_the_senders_after_the_recipient_deleted_its_copy_and_a_restart(
        self, open_store: Opener
    ) -> None:
        rt = open_store()
        reg = rt.hub.register_mailbox(BOB)
        first = rt.hub.bind("a", "alice").post(BOB, "once", idempotency_key="k")
        reg.close()
        rt.stop()
        again_rt = open_store()
        hub = _durable(again_rt)
        hub.register_mailbox(BOB)
        again = hub.bind("a", "alice").post(BOB, "once", idempotency_key="k")
        assert again.id == first.id and again.payload == first.payload
        assert hub.kept_messages(BOB) == []  # nothing sent a second time
        assert hub.bind("a", "alice").sent_count() == 1

    def test_a_keyed_send_replayed_waits_for_the_original_requests_reply(self, open_store: Opener) -> None:
        rt = open_store()
        hub = rt.hub
        desk = hub.register_mailbox("agent://b/desk")
        alice, bob = hub.bind("a", "alice"), hub.bind("b", "bob")
        first = alice.request("agent://b/desk", "q", timeout=30, idempotency_key="ask-1")
        replier_done = threading.Event()

        def answer() -> None:
            with desk.reader() as reader:
                request = reader.receive()
                assert request.correlation_id is not None
                bob.reply(request.correlation_id, "a", idempotency_key="answer-1")
                replier_done.set()

        waiting: list[ok.Message] = []
        sender = threading.Thread(
            target=lambda: waiting.append(alice.send("agent://b/desk", "q", timeout=30, idempotency_key="ask-1"))
        )
        sender.start()
        threading.Thread(target=answer, daemon=True).start()
        sender.join(30)
        assert waiting and waiting[0].correlation_id == first.correlation_id and waiting[0].json() == "a"
        assert replier_done.wait(10)
        assert [r.kind for r in alice.sent().rows] == [SendKind.SEND]
        assert [r.idempotency_key for r in bob.sent().rows] == ["answer-1"]

    def test_keys_are_refused_where_there_is_no_history_to_hold_them(self, open_store: Opener) -> None:
        rt = open_store()
        hub = rt.hub
        hub.register_mailbox(BOB)
        with pytest.raises(SentHistoryUnavailableError, match="agent"):
            hub.bind("a").post(BOB, "crew-level", idempotency_key="k")
        with pytest.raises(SentHistoryUnavailableError, match="agent"):
            hub.bind("a").post("topic://news", "crew-level broadcast", idempotency_key="k")
        with pytest.raises(ok.errors.InvalidArgumentError, match="idempotency_key"):
            hub.bind("a", "alice").post(BOB, "x", idempotency_key="")

    def test_a_keyed_reply_replayed_after_delivery_returns_the_original(self, open_store: Opener) -> None:
        rt = open_store()
        hub = rt.hub
        desk = hub.register_mailbox("agent://b/desk")
        alice, bob = hub.bind("a", "alice"), hub.bind("b", "bob")
        asked = alice.request("agent://b/desk", "q", timeout=30)
        with desk.reader() as reader:
            reader.receive()
        assert asked.correlation_id is not None
        first = bob.reply(asked.correlation_id, "answer", idempotency_key="answer-1")
        assert alice.wait_for(ok.WaitOnReply(asked.correlation_id), 5).id == first.id
        again = bob.reply(asked.correlation_id, "answer", idempotency_key="answer-1")  # a retry after a lost ack
        assert (again.id, again.json()) == (first.id, "answer")
        with pytest.raises(IdempotencyKeyConflictError) as info:
            bob.reply(asked.correlation_id, "another answer", idempotency_key="answer-1")
        assert info.value.original_id == str(first.id)
        with pytest.raises(UnknownCorrelationError):  # no key: an answered request stays unknown
            bob.reply(asked.correlation_id, "answer")
        with pytest.raises(UnknownCorrelationError):  # a key bob never used for this request
            bob.reply(asked.correlation_id, "answer", idempotency_key="answer-2")
        with pytest.raises(UnknownCorrelationError):  # another replier learns nothing
            hub.bind("b", "eve").reply(asked.correlation_id, "answer", idempotency_key="answer-1")
        assert [r.message_id for r in bob.sent().rows] == [first.id]
