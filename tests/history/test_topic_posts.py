"""Which broadcasts are sends (sender-owned history requirements, MESSAGE-R01, R11): a
``topic://`` post by an agent is one row to a ``topic`` endpoint (keyed like any post,
resumed by the outbox for a unit of work); ``publish`` is an event, not a send, and a
crew-level or system topic post is in no agent's history."""

from __future__ import annotations

import pytest

import orkeon_actors as ok
from orkeon_actors.errors import SentHistoryUnavailableError
from orkeon_actors.history.endpoint import EndpointKind
from orkeon_actors.history.records import SendKind
from orkeon_actors.history.view import CoverageState
from orkeon_actors.store import SqliteEventHub
from orkeon_actors.testing import wait_until

from .conftest import Opener


def _durable(rt: ok.Runtime) -> SqliteEventHub:
    assert isinstance(rt.hub, SqliteEventHub)
    return rt.hub


class TestTopicPosts:
    def test_an_agents_topic_post_is_one_row_to_a_topic_and_a_publish_is_none(self, open_store: Opener) -> None:
        rt = open_store()
        hub = rt.hub
        alice = hub.bind("a", "alice")
        listener = hub.bind("c").subscribe("news")
        posted = alice.post("topic://news", {"headline": 1}, {"lang": "en"})
        published = alice.publish("news", "an event the agent emits, not a message it addressed")
        assert [m.id for m in listener.drain()] == [posted.id, published.id]

        history = alice.sent(include_body=True)
        assert history.coverage.state is CoverageState.COMPLETE
        [row] = history.rows
        assert (row.message_id, row.kind, row.topic) == (posted.id, SendKind.POST, "news")
        assert (row.to.kind, row.to.id, row.to.address, row.to.name) == (
            EndpointKind.TOPIC,
            "news",
            "topic://news",
            None,
        )
        assert row.body == b'{"headline":1}' and row.metadata == {"lang": "en"}
        assert [r.message_id for r in alice.sent(to="topic://news").rows] == [posted.id]
        assert alice.sent(to="topic://other").rows == ()
        assert hub.verify_sent("agent://a/alice").ok

    def test_a_keyed_topic_post_replayed_returns_the_original_and_routes_nothing_more(self, open_store: Opener) -> None:
        rt = open_store()
        hub = rt.hub
        alice = hub.bind("a", "alice")
        listener = hub.bind("c").subscribe("news")
        first = alice.post("topic://news", "once", idempotency_key="headline-1")
        again = alice.post("topic://news", "once", idempotency_key="headline-1")
        assert again.id == first.id
        assert [m.id for m in listener.drain()] == [first.id]
        with pytest.raises(ok.errors.IdempotencyKeyConflictError):
            alice.post("topic://news", "other content", idempotency_key="headline-1")
        assert [r.message_id for r in alice.sent().rows] == [first.id]

    def test_a_topic_post_on_a_hub_without_history_takes_no_key(self) -> None:
        with ok.Runtime.start() as rt:
            alice = rt.hub.bind("a", "alice")
            alice.post("topic://news", "fine without a key")
            with pytest.raises(SentHistoryUnavailableError, match="durable store"):
                alice.post("topic://news", "x", idempotency_key="k")

    def test_reserved_and_system_topics_are_in_no_agent_history(self, open_store: Opener) -> None:
        rt = open_store()
        hub = rt.hub
        alice = hub.bind("a", "alice")
        with pytest.raises(ok.errors.ReservedTopicError):
            alice.post("topic://_system.lifecycle", "not for agents")
        hub.system.post("topic://news", "the hub's broadcast")
        assert alice.sent().rows == ()

    def test_a_unit_of_works_topic_post_is_pending_until_the_outbox_routes_it(self, open_store: Opener) -> None:
        rt = open_store()
        hub = _durable(rt)
        listener = hub.bind("c").subscribe("news")
        with hub.unit_of_work("a", "alice") as uow:
            message = uow.post("topic://news", "after the commit")
        wait_until(lambda: not hub.outbox_records(pending_only=True), what="the outbox dispatched")
        wait_until(lambda: hub.bind("a", "alice").sent().coverage.state is CoverageState.COMPLETE)
        [row] = hub.bind("a", "alice").sent().rows
        assert (row.message_id, row.to.kind) == (message.id, EndpointKind.TOPIC)
        assert [m.id for m in listener.drain()] == [message.id]
        assert hub.verify_sent("agent://a/alice").ok
