"""orkeon-payload-schema: the installed plugin, through a real runtime."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from orkeon_payload_schema import PayloadSchemaMiddleware

import orkeon_actors as ok
from orkeon_actors.errors import EventValidationError
from orkeon_actors.model.message import encode_payload

ORDER = {
    "type": "object",
    "required": ["id", "items"],
    "properties": {
        "id": {"type": "integer", "minimum": 1},
        "items": {"type": "array", "items": {"type": "string"}, "minItems": 1},
    },
    "additionalProperties": False,
}
OPTIONS = ok.PublishOptions(schema_id="order.created.v1")


@pytest.fixture
def rt() -> Iterator[ok.Runtime]:
    runtime = ok.Runtime.start(middleware=[PayloadSchemaMiddleware()])
    runtime.schema_registry.register("order.created.v1", ORDER)
    try:
        yield runtime
    finally:
        runtime.stop()


@pytest.fixture
def client(rt: ok.Runtime) -> ok.HubClient:
    return rt.hub.bind("shop", "checkout")


def test_the_plugin_is_discovered_through_its_entry_point() -> None:
    plugin = ok.middleware.discover()["payload_schema"]
    assert (plugin.distribution, plugin.value) == (
        "orkeon-payload-schema",
        "orkeon_payload_schema:PayloadSchemaMiddleware",
    )
    assert isinstance(ok.middleware.load("payload_schema", check_formats=True), PayloadSchemaMiddleware)


def test_the_plugin_runs_when_named_in_runtime_start() -> None:
    with ok.Runtime.start(middleware=["payload_schema"]) as runtime:
        runtime.schema_registry.register("n.v1", {"type": "integer"})
        client = runtime.hub.bind("shop", "checkout")
        client.publish("numbers", 1, ok.PublishOptions(schema_id="n.v1"))
        with pytest.raises(EventValidationError):
            client.publish("numbers", "one", ok.PublishOptions(schema_id="n.v1"))


def test_a_conforming_payload_is_delivered(client: ok.HubClient) -> None:
    with client.subscribe("orders.created") as sub:
        client.publish("orders.created", {"id": 7, "items": ["book"]}, OPTIONS)
        assert [m.json()["id"] for m in sub.drain()] == [7]


@pytest.mark.parametrize(
    ("payload", "where"),
    [
        ({"id": 0, "items": ["book"]}, r"\$\.id"),
        ({"id": 1, "items": []}, r"\$\.items"),
        ({"id": 1, "items": [3]}, r"\$\.items\[0\]"),
        ({"id": 1}, r"'items' is a required property"),
        ({"id": 1, "items": ["a"], "extra": True}, "Additional properties"),
    ],
)
def test_a_non_conforming_payload_is_refused_and_reaches_nobody(
    client: ok.HubClient, payload: dict[str, Any], where: str
) -> None:
    with client.subscribe("orders.created") as sub:
        with pytest.raises(EventValidationError, match=where):
            client.publish("orders.created", payload, OPTIONS)
        assert sub.drain() == []


def test_a_payload_that_is_not_json_is_refused(client: ok.HubClient) -> None:
    with pytest.raises(EventValidationError, match="not JSON"):
        client.publish("orders.created", b"\xff\xfe", OPTIONS)


def test_an_unregistered_schema_id_is_refused(client: ok.HubClient) -> None:
    with pytest.raises(EventValidationError, match="not registered"):
        client.publish("orders.created", {"id": 1}, ok.PublishOptions(schema_id="order.created.v9"))


def test_an_invalid_registered_schema_is_reported(rt: ok.Runtime, client: ok.HubClient) -> None:
    rt.schema_registry.register("broken.v1", {"type": "no-such-type"})
    with pytest.raises(EventValidationError, match="not a valid JSON Schema"):
        client.publish("broken", 1, ok.PublishOptions(schema_id="broken.v1"))


def test_an_unresolvable_reference_is_reported(rt: ok.Runtime, client: ok.HubClient) -> None:
    rt.schema_registry.register("ref.v1", {"$ref": "https://example.invalid/schema.json"})
    with pytest.raises(EventValidationError, match="cannot be resolved"):
        client.publish("ref", 1, ok.PublishOptions(schema_id="ref.v1"))


def test_the_schema_dialect_is_honoured(rt: ok.Runtime, client: ok.HubClient) -> None:
    # Draft 4: exclusiveMinimum is a boolean modifier of minimum.
    rt.schema_registry.register(
        "d4.v1", {"$schema": "http://json-schema.org/draft-04/schema#", "minimum": 5, "exclusiveMinimum": True}
    )
    client.publish("d4", 6, ok.PublishOptions(schema_id="d4.v1"))
    with pytest.raises(EventValidationError):
        client.publish("d4", 5, ok.PublishOptions(schema_id="d4.v1"))


def test_formats_are_checked_only_on_request(rt: ok.Runtime) -> None:
    rt.schema_registry.register("mail.v1", {"type": "string", "format": "email"})
    stage = PayloadSchemaMiddleware(rt.schema_registry, check_formats=True)
    message = ok.Message(
        ok.MessageId.new(), "m", ok.CrewId("shop"), ok.SystemClock().now(), b'"not an email"', schema_id="mail.v1"
    )
    assert PayloadSchemaMiddleware(rt.schema_registry).on_publish(message, lambda m: m) is message
    with pytest.raises(EventValidationError, match="email"):
        stage.on_publish(message, lambda m: m)


def test_undeclared_traffic_and_mailboxes_are_untouched(rt: ok.Runtime, client: ok.HubClient) -> None:
    registration = rt.hub.register_mailbox("agent://shop/inbox")
    client.publish("free", "anything")
    client.post("agent://shop/inbox", b"\xff not json")
    with registration.reader() as reader:
        assert reader.receive().payload == b"\xff not json"


def test_the_receive_path_is_not_validated() -> None:
    stage = PayloadSchemaMiddleware(ok.InMemoryEventSchemaRegistry())
    message = ok.Message(ok.MessageId.new(), "t", ok.CrewId("shop"), ok.SystemClock().now(), b"x", schema_id="nope")
    assert stage.on_receive(message, lambda m: m) is message


def test_the_runtime_registry_is_released_on_stop() -> None:
    stage = PayloadSchemaMiddleware()
    with ok.Runtime.start(middleware=[stage]) as runtime:
        runtime.schema_registry.register("n.v1", {"type": "integer"})
    message = ok.Message(ok.MessageId.new(), "t", ok.CrewId("shop"), ok.SystemClock().now(), b"1", schema_id="n.v1")
    with pytest.raises(EventValidationError, match="not registered"):
        stage.on_publish(message, lambda m: m)


@given(value=st.integers(-1000, 1000) | st.text(max_size=3) | st.none())
def test_acceptance_is_exactly_conformance(value: object) -> None:
    registry = ok.InMemoryEventSchemaRegistry({"n.v1": {"type": "integer", "minimum": 0}})
    stage = PayloadSchemaMiddleware(registry)
    message = ok.Message(
        ok.MessageId.new(), "t", ok.CrewId("shop"), ok.SystemClock().now(), encode_payload(value), schema_id="n.v1"
    )
    conforms = isinstance(value, int) and value >= 0
    if conforms:
        assert stage.on_publish(message, lambda m: m) is message
    else:
        with pytest.raises(EventValidationError):
            stage.on_publish(message, lambda m: m)
