"""Send and reply (spec §4, §9.3, §16.1)."""

from __future__ import annotations

from datetime import timedelta

import pytest

import orkeon_actors as ok
from orkeon_actors.errors import (
    CancelledError,
    InvalidArgumentError,
    MailboxNotFoundError,
    SendTimeoutError,
    UnknownCorrelationError,
)
from orkeon_actors.testing import wait_until
from tests.conftest import Background


def _answer_one(hub: ok.EventHub, address: str, reply: object) -> Background:
    reg = hub.register_mailbox(address)
    responder = hub.bind(ok.MailboxAddress.parse(address).crew_id or "x", "responder")

    def serve() -> ok.Message:
        with reg.reader() as reader:
            request = reader.receive()
            assert request.correlation_id is not None
            responder.reply(request.correlation_id, reply)
            return request

    return Background(serve)


def test_send_answered_within_the_timeout_returns_the_reply(hub: ok.EventHub) -> None:
    server = _answer_one(hub, "agent://fraud/scorer", {"score": 0.1})
    reply = hub.bind("orders", "planner").send("agent://fraud/scorer", {"order": 1}, timeout=10)
    request = server.get()
    assert isinstance(request, ok.Message)
    assert reply.json() == {"score": 0.1}
    assert reply.correlation_id == request.correlation_id
    assert (reply.source_crew_id, reply.source_agent_id) == ("fraud", "responder")
    assert reply.target_crew_id == "orders"
    assert request.json() == {"order": 1} and request.source_crew_id == "orders"


def test_send_not_answered_raises_a_typed_timeout(virtual_runtime: tuple[ok.Runtime, ok.VirtualClock]) -> None:
    rt, clock = virtual_runtime
    rt.hub.register_mailbox("agent://b/b")
    job = Background(lambda: rt.hub.bind("a", "a").send("agent://b/b", 1, timeout=30))
    wait_until(lambda: rt.hub.pending_waits()["on_reply"] == 1, what="the send to wait")
    clock.advance(29)
    assert not job.done
    clock.advance(1)
    with pytest.raises(SendTimeoutError, match="within 30s") as info:
        job.get()
    assert isinstance(info.value, TimeoutError)


def test_a_late_reply_after_the_timeout_is_refused(virtual_runtime: tuple[ok.Runtime, ok.VirtualClock]) -> None:
    rt, clock = virtual_runtime
    reg = rt.hub.register_mailbox("agent://b/b")
    job = Background(lambda: rt.hub.bind("a", "a").send("agent://b/b", 1, timeout=5))
    request = rt.hub.bind("b", "b").wait_for(ok.WaitOnMailbox("agent://b/b"), 5)
    wait_until(lambda: rt.hub.pending_waits()["on_reply"] == 1, what="the send to wait")
    clock.advance(5)
    with pytest.raises(SendTimeoutError):
        job.get()
    assert request.correlation_id is not None
    with pytest.raises(UnknownCorrelationError, match="deadline"):
        rt.hub.bind("b", "b").reply(request.correlation_id, 1)
    assert reg.depth() == 0


@pytest.mark.parametrize("timeout", [ok.FOREVER, 0, -1, None, timedelta(0)])
def test_send_requires_a_positive_finite_timeout(hub: ok.EventHub, timeout: object) -> None:
    hub.register_mailbox("agent://b/b")
    with pytest.raises(InvalidArgumentError):
        hub.bind("a", "a").send("agent://b/b", 1, timeout=timeout)  # type: ignore[arg-type]


def test_send_to_a_missing_mailbox_is_a_typed_error(hub: ok.EventHub) -> None:
    with pytest.raises(MailboxNotFoundError):
        hub.bind("a", "a").send("agent://b/b", 1, timeout=1)


def test_reply_without_a_pending_send_is_an_error(hub: ok.EventHub) -> None:
    with pytest.raises(UnknownCorrelationError, match="correlation"):
        hub.bind("a", "a").reply(ok.CorrelationId.new(), 1)


def test_a_second_reply_to_the_same_request_is_refused(hub: ok.EventHub) -> None:
    hub.register_mailbox("agent://b/b")
    requester = hub.bind("a", "a")
    responder = hub.bind("b", "b")
    request = requester.request("agent://b/b", {"q": 1}, timeout=10)
    assert request.correlation_id is not None
    assert hub.is_active_correlation(request.correlation_id)
    responder.reply(request.correlation_id, "first")
    assert not hub.is_active_correlation(request.correlation_id)
    with pytest.raises(UnknownCorrelationError):
        responder.reply(request.correlation_id, "second")
    reply = requester.wait_for(ok.WaitOnReply(request.correlation_id), 5)
    assert reply.json() == "first"


def test_request_then_wait_on_reply(hub: ok.EventHub, background: type[Background]) -> None:
    hub.register_mailbox("agent://b/b")
    requester = hub.bind("a", "a")
    request = requester.request("agent://b/b", 1, timeout=10)
    assert request.correlation_id is not None
    job = background(lambda: requester.wait_for(ok.WaitOnReply(request.correlation_id), ok.FOREVER))
    wait_until(lambda: hub.pending_waits()["on_reply"] == 1, what="the reply wait")
    incoming = hub.bind("b", "b").wait_for(ok.WaitOnMailbox("agent://b/b"), 5)
    hub.bind("b", "b").reply(incoming.correlation_id, 2)  # type: ignore[arg-type]
    reply = job.get()
    assert isinstance(reply, ok.Message) and reply.json() == 2
    with pytest.raises(UnknownCorrelationError):
        requester.wait_for(ok.WaitOnReply(request.correlation_id), 1)


def test_send_is_cancellable(hub: ok.EventHub, background: type[Background]) -> None:
    hub.register_mailbox("agent://b/b")
    token = ok.CancelToken()
    job = background(lambda: hub.bind("a", "a").send("agent://b/b", 1, timeout=60, cancel=token))
    wait_until(lambda: hub.pending_waits()["on_reply"] == 1, what="the send to wait")
    token.cancel()
    with pytest.raises(CancelledError):
        job.get()
    request = hub.bind("b", "b").wait_for(ok.WaitOnMailbox("agent://b/b"), 5)
    with pytest.raises(UnknownCorrelationError):
        hub.bind("b", "b").reply(request.correlation_id, 1)  # type: ignore[arg-type]


def test_send_to_a_topic_address_is_refused(hub: ok.EventHub) -> None:
    with pytest.raises(InvalidArgumentError, match="topic"):
        hub.bind("a", "a").send("topic://t", 1, timeout=1)
