"""The pipeline (spec §12, §12.1): order, where stages run, refusals, opt-in, hooks."""

from __future__ import annotations

from typing import Any

import pytest

import orkeon_actors as ok
from orkeon_actors.errors import (
    DuplicateMessageError,
    EventAclError,
    EventHubError,
    SendTimeoutError,
)
from orkeon_actors.middleware import MiddlewareContext, Next, Pipeline, current_operation
from orkeon_actors.testing import wait_until
from tests.conftest import Background
from tests.middleware.conftest import Event, Recorder, StartRuntime

MAILBOX = "agent://crew-b/inbox"


def _three(journal: list[Event]) -> list[Recorder]:
    return [Recorder("first", journal), Recorder("second", journal), Recorder("third", journal)]


def _calls(journal: list[Event], path: str) -> list[tuple[str, str]]:
    return [(e.stage, e.operation) for e in journal if e.path == path]


def _order(operation: str) -> list[tuple[str, str]]:
    return [("first", operation), ("second", operation), ("third", operation)]


def _reverse(operation: str) -> list[tuple[str, str]]:
    return [("third", operation), ("second", operation), ("first", operation)]


class Refuse:
    """Refuses, with ``error``, the operations named in ``on`` (publish or receive path)."""

    def __init__(self, error: EventHubError, on: set[str]) -> None:
        self.error = error
        self.on = on

    def on_publish(self, message: ok.Message, next: Next) -> ok.Message:
        if current_operation() in self.on:
            raise self.error
        return next(message)

    def on_receive(self, message: ok.Message, next: Next) -> ok.Message:
        if current_operation() in self.on:
            raise self.error
        return next(message)


# -- order and where the stages run ----------------------------------------------------


def test_publish_runs_publish_stages_in_order_and_subscription_receive_in_reverse(
    start_runtime: StartRuntime,
) -> None:
    journal: list[Event] = []
    rt = start_runtime(_three(journal))
    client = rt.hub.bind("crew-a", "writer")
    with client.subscribe("orders.*") as sub:
        sent = client.publish("orders.created", {"id": 1})
        received = next(sub)
    assert received.id == sent.id
    assert _calls(journal, "publish") == _order("publish")
    assert _calls(journal, "receive") == _reverse("subscribe")


def test_post_crosses_the_stages_to_a_held_reader(start_runtime: StartRuntime) -> None:
    journal: list[Event] = []
    rt = start_runtime(_three(journal))
    registration = rt.hub.register_mailbox(MAILBOX)
    sent = rt.hub.bind("crew-a", "writer").post(MAILBOX, {"n": 1})
    with registration.reader() as reader:
        assert reader.receive().id == sent.id
    assert _calls(journal, "publish") == _order("post")
    assert _calls(journal, "receive") == _reverse("receive")


def test_post_crosses_the_stages_to_a_mailbox_wait(start_runtime: StartRuntime) -> None:
    journal: list[Event] = []
    rt = start_runtime(_three(journal))
    rt.hub.register_mailbox(MAILBOX)
    sent = rt.hub.bind("crew-a", "writer").post(MAILBOX, {"n": 1})
    got = rt.hub.bind("crew-b", "inbox").wait_for(ok.WaitOnMailbox(ok.MailboxAddress.parse(MAILBOX)), 10)
    assert got.id == sent.id
    assert _calls(journal, "publish") == _order("post")
    assert _calls(journal, "receive") == _reverse("wait")


def test_topic_wait_runs_receive_stages_in_reverse(start_runtime: StartRuntime) -> None:
    journal: list[Event] = []
    rt = start_runtime(_three(journal))
    waiter = rt.hub.bind("crew-b", "reader")
    call = Background(lambda: waiter.wait_for(ok.WaitOnTopic("alerts.#"), 10))
    wait_until(lambda: rt.hub.pending_waits()["on_topic"] == 1, what="the topic wait to register")
    sent = rt.hub.bind("crew-a", "writer").publish("alerts.disk.full", {"pct": 99})
    assert call.get().id == sent.id  # type: ignore[attr-defined]
    assert _calls(journal, "publish") == _order("publish")
    assert _calls(journal, "receive") == _reverse("wait")


def test_post_to_a_topic_address_crosses_the_publish_stages_as_post(start_runtime: StartRuntime) -> None:
    journal: list[Event] = []
    rt = start_runtime(_three(journal))
    client = rt.hub.bind("crew-a", "writer")
    with client.subscribe("news") as sub:
        client.post("topic://news", {"n": 1})
        next(sub)
    assert _calls(journal, "publish") == _order("post")
    assert _calls(journal, "receive") == _reverse("subscribe")


def test_send_and_reply_cross_the_publish_stages_and_the_reply_skips_receive_stages(
    start_runtime: StartRuntime,
) -> None:
    journal: list[Event] = []
    rt = start_runtime(_three(journal))
    registration = rt.hub.register_mailbox(MAILBOX)
    requester = rt.hub.bind("crew-a", "asker")
    responder = rt.hub.bind("crew-b", "inbox")
    call = Background(lambda: requester.send(MAILBOX, {"q": 1}, timeout=10))
    with registration.reader() as reader:
        request = reader.receive()
        assert request.correlation_id is not None
        reply = responder.reply(request.correlation_id, {"a": 2})
    answer = call.get()
    assert answer.id == reply.id  # type: ignore[attr-defined]
    assert _calls(journal, "publish") == _order("send") + _order("reply")
    # The request is consumed through the receive stages; the requester's wait for its
    # own reply is not (spec §12.1).
    assert _calls(journal, "receive") == _reverse("receive")
    assert all(e.message.id != reply.id for e in journal if e.path == "receive")


def test_request_then_wait_on_reply_never_crosses_receive_stages(start_runtime: StartRuntime) -> None:
    journal: list[Event] = []
    rt = start_runtime(_three(journal))
    registration = rt.hub.register_mailbox(MAILBOX)
    requester = rt.hub.bind("crew-a", "asker")
    request = requester.request(MAILBOX, {"q": 1}, timeout=10)
    assert request.correlation_id is not None
    with registration.reader() as reader:
        reader.receive()
    rt.hub.bind("crew-b", "inbox").reply(request.correlation_id, {"a": 2})
    answer = requester.wait_for(ok.WaitOnReply(request.correlation_id), 10)
    assert answer.correlation_id == request.correlation_id
    assert _calls(journal, "publish") == _order("send") + _order("reply")
    assert [e.message.id for e in journal if e.path == "receive"] == [request.id] * 3


def test_a_timed_out_wait_does_not_cross_receive_stages(start_runtime: StartRuntime) -> None:
    journal: list[Event] = []
    clock = ok.VirtualClock()
    rt = start_runtime(_three(journal), clock=clock)
    waiter = rt.hub.bind("crew-b", "reader")
    call = Background(lambda: waiter.wait_for(ok.WaitOnTopic("never"), 5))
    wait_until(lambda: rt.hub.pending_waits()["on_topic"] == 1, what="the wait to register")
    clock.advance(5)
    assert call.get().is_timeout  # type: ignore[attr-defined]
    assert journal == []


def test_stages_transform_messages_along_the_chain(start_runtime: StartRuntime) -> None:
    class Stamp:
        def __init__(self, key: str) -> None:
            self.key = key

        def on_publish(self, message: ok.Message, next: Next) -> ok.Message:
            return next(message.with_metadata({self.key: "publish"}))

        def on_receive(self, message: ok.Message, next: Next) -> ok.Message:
            return next(message.with_metadata({self.key: message.metadata.get(self.key, "") + "+receive"}))

    rt = start_runtime([Stamp("a"), Stamp("b")])
    registration = rt.hub.register_mailbox(MAILBOX)
    sent = rt.hub.bind("crew-a", "w").post(MAILBOX, 1)
    assert dict(sent.metadata) == {"a": "publish", "b": "publish"}  # the caller gets what was delivered
    with registration.reader() as reader:
        assert dict(reader.receive().metadata) == {"a": "publish+receive", "b": "publish+receive"}


# -- refusals reach the caller ---------------------------------------------------------


def test_a_refused_publish_raises_to_the_caller_and_reaches_nobody(start_runtime: StartRuntime) -> None:
    journal: list[Event] = []
    error = EventAclError("no link", source="crew-a", target="*")
    rt = start_runtime([Recorder("before", journal), Refuse(error, {"publish"}), Recorder("after", journal)])
    client = rt.hub.bind("crew-a", "writer")
    with client.subscribe("orders.created") as sub:
        with pytest.raises(EventAclError) as raised:
            client.publish("orders.created", {"id": 1})
        assert raised.value is error
        assert sub.drain() == []
    assert [e.stage for e in journal] == ["before"]


def test_a_refused_post_raises_to_the_caller_and_the_mailbox_stays_empty(start_runtime: StartRuntime) -> None:
    rt = start_runtime([Refuse(EventAclError("no link"), {"post"})])
    registration = rt.hub.register_mailbox(MAILBOX)
    with pytest.raises(EventAclError):
        rt.hub.bind("crew-a", "writer").post(MAILBOX, 1)
    assert registration.depth() == 0


def test_a_refused_send_raises_the_stage_error_not_a_timeout(start_runtime: StartRuntime) -> None:
    rt = start_runtime([Refuse(EventAclError("no link"), {"send"})])
    registration = rt.hub.register_mailbox(MAILBOX)
    with pytest.raises(EventAclError):
        rt.hub.bind("crew-a", "asker").send(MAILBOX, 1, timeout=10)
    assert registration.depth() == 0


def test_a_refused_reply_raises_to_the_replier_and_the_request_stays_pending(start_runtime: StartRuntime) -> None:
    clock = ok.VirtualClock()
    rt = start_runtime([Refuse(EventAclError("replies closed"), {"reply"})], clock=clock)
    registration = rt.hub.register_mailbox(MAILBOX)
    call = Background(lambda: rt.hub.bind("crew-a", "asker").send(MAILBOX, 1, timeout=5))
    with registration.reader() as reader:
        request = reader.receive()
    assert request.correlation_id is not None
    with pytest.raises(EventAclError):
        rt.hub.bind("crew-b", "inbox").reply(request.correlation_id, 2)
    assert rt.hub.is_active_correlation(request.correlation_id)
    clock.advance(5)
    with pytest.raises(SendTimeoutError):
        call.get()


def test_a_receive_stage_error_reaches_the_consumer(start_runtime: StartRuntime) -> None:
    rt = start_runtime([Refuse(EventAclError("not for you"), {"receive"})])
    registration = rt.hub.register_mailbox(MAILBOX)
    rt.hub.bind("crew-a", "writer").post(MAILBOX, 1)
    with registration.reader() as reader, pytest.raises(EventAclError):
        reader.receive()


def test_a_duplicate_raised_on_receive_is_dropped_at_the_delivery_site(start_runtime: StartRuntime) -> None:
    class DropOdd:
        def on_publish(self, message: ok.Message, next: Next) -> ok.Message:
            return next(message)

        def on_receive(self, message: ok.Message, next: Next) -> ok.Message:
            if message.json() % 2:
                raise DuplicateMessageError("odd")
            return next(message)

    rt = start_runtime([DropOdd()])
    registration = rt.hub.register_mailbox(MAILBOX)
    client = rt.hub.bind("crew-a", "writer")
    for n in range(1, 5):
        client.post(MAILBOX, n)
    with registration.reader() as reader:
        assert [reader.receive().json(), reader.receive().json()] == [2, 4]
    with client.subscribe("numbers") as sub:
        for n in range(1, 5):
            client.publish("numbers", n)
        assert [m.json() for m in sub.drain()] == [2, 4]


# -- opt-in: no stage, no cost ---------------------------------------------------------


def test_without_middleware_the_chains_are_the_delivery_terminals(start_runtime: StartRuntime) -> None:
    hub: Any = start_runtime().hub
    # Without a sent history, the mailbox terminal is the append itself (a frame less).
    terminal = hub._deliver_to_mailbox if hub._sent is not None else hub._append_to_mailbox
    assert hub._post_chain == terminal
    assert hub._send_chain == terminal
    assert hub._reply_chain == hub._deliver_reply
    assert hub._publish_chain == hub._route
    assert hub.receive_subscription is None
    assert hub.receive_wait is None
    assert hub.receive_reader is None


def test_a_stage_without_both_methods_is_rejected() -> None:
    class HalfStage:
        def on_publish(self, message: ok.Message, next: Next) -> ok.Message:
            return next(message)

    with pytest.raises(TypeError, match="on_receive"):
        Pipeline([HalfStage()])  # type: ignore[list-item]
    with pytest.raises(TypeError):
        ok.Runtime.start(middleware=[object()])  # type: ignore[list-item]


def test_current_operation_outside_a_chain_is_publish() -> None:
    assert current_operation() == "publish"


# -- attach / detach hooks -------------------------------------------------------------


class Hooked:
    def __init__(self, name: str, journal: list[str], fail: bool = False) -> None:
        self.name = name
        self.journal = journal
        self.fail = fail
        self.context: MiddlewareContext | None = None

    def attach(self, context: MiddlewareContext) -> None:
        if self.fail:
            raise RuntimeError(f"{self.name} cannot attach")
        self.context = context
        self.journal.append(f"attach {self.name}")

    def detach(self) -> None:
        self.journal.append(f"detach {self.name}")

    def on_publish(self, message: ok.Message, next: Next) -> ok.Message:
        return next(message)

    def on_receive(self, message: ok.Message, next: Next) -> ok.Message:
        return next(message)


def test_runtime_attaches_in_order_and_detaches_in_reverse_on_stop() -> None:
    journal: list[str] = []
    first, second = Hooked("first", journal), Hooked("second", journal)
    clock = ok.VirtualClock()
    registry = ok.InMemoryEventSchemaRegistry()
    rt = ok.Runtime.start(middleware=[first, second], clock=clock, schema_registry=registry)
    try:
        assert journal == ["attach first", "attach second"]
        assert first.context == MiddlewareContext(rt.hub, clock, registry)
        assert rt.schema_registry is registry
    finally:
        rt.stop()
    rt.stop()  # idempotent: detached once
    assert journal == ["attach first", "attach second", "detach second", "detach first"]


def test_a_failing_attach_undoes_the_attached_stages_and_start_raises() -> None:
    journal: list[str] = []
    stages = [Hooked("first", journal), Hooked("second", journal, fail=True), Hooked("third", journal)]
    with pytest.raises(RuntimeError, match="second cannot attach"):
        ok.Runtime.start(middleware=stages)
    assert journal == ["attach first", "detach first"]


def test_every_runtime_has_a_schema_registry_by_default(start_runtime: StartRuntime) -> None:
    assert isinstance(start_runtime().schema_registry, ok.InMemoryEventSchemaRegistry)


def test_wait_timeouts_are_fanned_out_to_observing_stages(start_runtime: StartRuntime) -> None:
    class Observer(Recorder):
        def __init__(self) -> None:
            super().__init__("observer", [])
            self.timed_out: list[ok.Message] = []

        def on_wait_timed_out(self, message: ok.Message) -> None:
            self.timed_out.append(message)

    first, second = Observer(), Observer()
    clock = ok.VirtualClock()
    rt = start_runtime([first, second], clock=clock)
    call = Background(lambda: rt.hub.bind("crew-b", "r").wait_for(ok.WaitOnTopic("quiet"), 3))
    wait_until(lambda: rt.hub.pending_waits()["on_topic"] == 1, what="the wait to register")
    clock.advance(3)
    timed_out = call.get()
    assert first.timed_out == [timed_out] and second.timed_out == [timed_out]
    rt.stop()
    assert rt.hub.on_wait_timed_out is None  # type: ignore[attr-defined]
