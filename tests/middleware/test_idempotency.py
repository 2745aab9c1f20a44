"""Stage 4, idempotency (spec §12.2).

How a duplicate is produced, honestly: a message id reaches a mailbox twice in two real
situations, and each has a test here.

* A sender retries with the same id (an idempotency key). :class:`PinId` is a publish
  stage registered *before* the idempotency stage that sets the message id from the
  ``idempotency-key`` metadata, so two posts carry one id through the public API.
* A transport redelivers a message it already delivered (the durable outbox replaying
  after a crash, spec §11.3; AMQP redelivery). The test calls the in-memory adapter's
  delivery terminal (``hub._deliver_to_mailbox``) with the same message: the second
  delivery skips the publish stages exactly as a redelivery does.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import attrs
import pytest
from hypothesis import given
from hypothesis import strategies as st

import orkeon_actors as ok
from orkeon_actors.errors import DuplicateMessageError, InvalidArgumentError
from orkeon_actors.middleware import IdempotencyMiddleware, Next
from orkeon_actors.middleware.idempotency import RecentKeys
from orkeon_actors.testing import wait_until
from tests.conftest import Background
from tests.middleware.conftest import StartRuntime

MAILBOX = "agent://crew-b/inbox"
KEY = "idempotency-key"


class PinId:
    """Publish stage: the message id becomes the ULID given in ``idempotency-key``."""

    def on_publish(self, message: ok.Message, next: Next) -> ok.Message:
        key = message.metadata.get(KEY)
        if key is not None:
            message = attrs.evolve(message, id=ok.MessageId(key))
        return next(message)

    def on_receive(self, message: ok.Message, next: Next) -> ok.Message:
        return next(message)


def _runtime(start_runtime: StartRuntime, capacity: int = 100) -> ok.Runtime:
    return start_runtime([PinId(), IdempotencyMiddleware(capacity)])


def test_a_retried_post_is_consumed_once_by_a_reader(start_runtime: StartRuntime) -> None:
    rt = _runtime(start_runtime)
    registration = rt.hub.register_mailbox(MAILBOX)
    client = rt.hub.bind("crew-a", "writer")
    key = str(ok.MessageId.new())
    first = client.post(MAILBOX, "first", {KEY: key})
    client.post(MAILBOX, "retry of first", {KEY: key})
    client.post(MAILBOX, "second")
    assert registration.depth() == 3  # both copies reached the mailbox
    with registration.reader() as reader:
        got = [reader.receive(), reader.receive()]
    assert [m.json() for m in got] == ["first", "second"]
    assert got[0].id == first.id
    assert registration.depth() == 0  # the duplicate was consumed and dropped


def test_a_retried_post_is_consumed_once_by_mailbox_waits(start_runtime: StartRuntime) -> None:
    rt = _runtime(start_runtime)
    rt.hub.register_mailbox(MAILBOX)
    client = rt.hub.bind("crew-a", "writer")
    key = str(ok.MessageId.new())
    client.post(MAILBOX, "first", {KEY: key})
    client.post(MAILBOX, "retry", {KEY: key})
    client.post(MAILBOX, "second")
    inbox = rt.hub.bind("crew-b", "inbox")
    wait = ok.WaitOnMailbox(ok.MailboxAddress.parse(MAILBOX))
    assert [inbox.wait_for(wait, 10).json(), inbox.wait_for(wait, 10).json()] == ["first", "second"]


def test_a_redelivered_message_is_dropped_and_no_consumer_sees_an_error(start_runtime: StartRuntime) -> None:
    rt = _runtime(start_runtime)
    hub: Any = rt.hub
    registration = hub.register_mailbox(MAILBOX)
    client = rt.hub.bind("crew-a", "writer")
    original = client.post(MAILBOX, "once")
    with registration.reader() as reader:
        assert reader.receive().id == original.id
        hub._deliver_to_mailbox(original)  # the transport redelivers it
        hub._deliver_to_mailbox(original)
        client.post(MAILBOX, "next")
        assert reader.receive().json() == "next"


def test_a_redelivery_to_a_blocked_reader_is_skipped(start_runtime: StartRuntime) -> None:
    rt = _runtime(start_runtime)
    hub: Any = rt.hub
    registration = hub.register_mailbox(MAILBOX)
    original = rt.hub.bind("crew-a", "writer").post(MAILBOX, "once")
    with registration.reader() as reader:
        reader.receive()
        call = Background(reader.receive)
        hub._deliver_to_mailbox(original)
        wait_until(lambda: registration.depth() == 0, what="the redelivery to be consumed")
        assert not call.done
        rt.hub.bind("crew-a", "writer").post(MAILBOX, "fresh")
        assert call.get().json() == "fresh"  # type: ignore[attr-defined]


def test_the_same_id_in_two_mailboxes_is_delivered_to_both(start_runtime: StartRuntime) -> None:
    rt = _runtime(start_runtime)
    inbox_a = rt.hub.register_mailbox("agent://crew-b/a")
    inbox_b = rt.hub.register_mailbox("agent://crew-b/b")
    client = rt.hub.bind("crew-a", "writer")
    key = str(ok.MessageId.new())
    client.post("agent://crew-b/a", 1, {KEY: key})
    client.post("agent://crew-b/b", 2, {KEY: key})
    with inbox_a.reader() as reader_a, inbox_b.reader() as reader_b:
        assert reader_a.receive().id == reader_b.receive().id == key


def test_topic_traffic_is_never_deduplicated(start_runtime: StartRuntime) -> None:
    rt = _runtime(start_runtime)
    client = rt.hub.bind("crew-a", "writer")
    key = str(ok.MessageId.new())
    with client.subscribe("news") as first_sub, client.subscribe("news") as second_sub:
        client.publish("news", 1, ok.PublishOptions(metadata={KEY: key}))
        client.publish("news", 2, ok.PublishOptions(metadata={KEY: key}))
        client.post("topic://news", 3, {KEY: key})
        assert [m.json() for m in first_sub.drain()] == [1, 2, 3]
        assert [m.json() for m in second_sub.drain()] == [1, 2, 3]
    waiter = rt.hub.bind("crew-b", "waiter")
    for n in (4, 5):
        call = Background(lambda: waiter.wait_for(ok.WaitOnTopic("news"), 10))
        wait_until(lambda: rt.hub.pending_waits()["on_topic"] == 1, what="the topic wait to register")
        client.publish("news", n, ok.PublishOptions(metadata={KEY: key}))
        assert call.get().json() == n  # type: ignore[attr-defined]


def test_the_memory_forgets_the_oldest_first(start_runtime: StartRuntime) -> None:
    rt = _runtime(start_runtime, capacity=2)
    registration = rt.hub.register_mailbox(MAILBOX)
    client = rt.hub.bind("crew-a", "writer")
    keys = [str(ok.MessageId.new()) for _ in range(3)]
    with registration.reader() as reader:
        for key in keys:
            client.post(MAILBOX, key, {KEY: key})
            reader.receive()
        client.post(MAILBOX, "again", {KEY: keys[2]})  # still remembered: dropped
        client.post(MAILBOX, "again", {KEY: keys[0]})  # forgotten: delivered again (stated limit)
        assert reader.receive().id == keys[0]


@pytest.mark.parametrize("capacity", [0, -1, 1.5, True, "10"])
def test_capacity_must_be_a_positive_integer(capacity: Any) -> None:
    with pytest.raises(InvalidArgumentError):
        IdempotencyMiddleware(capacity)


def test_default_capacity() -> None:
    assert IdempotencyMiddleware().capacity == 10_000


# -- properties ------------------------------------------------------------------------


@given(capacity=st.integers(1, 8), keys=st.lists(st.integers(0, 12), max_size=60))
def test_recent_keys_holds_the_last_capacity_distinct_keys(capacity: int, keys: list[int]) -> None:
    memory = RecentKeys(capacity)
    model: list[int] = []  # first-seen order of the keys still remembered
    for key in keys:
        fresh = memory.remember(key)
        assert fresh == (key not in model)
        if fresh:
            model.append(key)
            del model[:-capacity]
        assert len(memory) <= capacity
        assert memory.snapshot() == model


_EPOCH = datetime(2026, 1, 1, tzinfo=UTC)


def _message(message_id: str, target: str | None) -> ok.Message:
    return ok.Message(
        ok.MessageId(message_id),
        "news",
        ok.CrewId("crew-a"),
        _EPOCH,
        target_mailbox=None if target is None else ok.MailboxAddress.parse(target),
    )


@given(
    ids=st.lists(st.sampled_from([str(ok.MessageId.new()) for _ in range(3)]), max_size=30),
    target=st.sampled_from([None, "topic://news"]),
)
def test_topic_messages_are_never_refused(ids: list[str], target: str | None) -> None:
    stage = IdempotencyMiddleware(2)
    for message_id in ids:
        message = _message(message_id, target)
        assert stage.on_receive(message, lambda m: m) is message
    assert len(stage.memory) == 0


@given(ids=st.lists(st.sampled_from([str(ok.MessageId.new()) for _ in range(4)]), max_size=30))
def test_mailbox_messages_pass_exactly_once_while_remembered(ids: list[str]) -> None:
    stage = IdempotencyMiddleware(10)  # more than the distinct ids: nothing is forgotten
    passed: list[str] = []
    for message_id in ids:
        try:
            passed.append(stage.on_receive(_message(message_id, MAILBOX), lambda m: m).id)
        except DuplicateMessageError:
            assert message_id in passed
    assert passed == list(dict.fromkeys(ids))


def test_publishing_is_never_deduplicated() -> None:
    stage = IdempotencyMiddleware(1)
    message = _message(str(ok.MessageId.new()), MAILBOX)
    assert [stage.on_publish(message, lambda m: m) for _ in range(3)] == [message] * 3
