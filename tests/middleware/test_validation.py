"""Stage 5, validation (spec §12.3), and the in-memory event schema registry."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

import orkeon_actors as ok
from orkeon_actors.errors import EventValidationError, InvalidArgumentError
from orkeon_actors.middleware import EventSchemaRegistry, ValidationMiddleware
from tests.middleware.conftest import StartRuntime

ORDER_V1 = {"type": "object", "required": ["id"], "properties": {"id": {"type": "integer"}}}


# -- the registry ----------------------------------------------------------------------


def test_register_then_get() -> None:
    registry = ok.InMemoryEventSchemaRegistry()
    registry.register("order.created.v1", ORDER_V1)
    assert registry.get("order.created.v1") == ORDER_V1
    assert registry.get("order.created.v2") is None
    assert "order.created.v1" in registry and len(registry) == 1
    assert registry.ids() == ["order.created.v1"]
    assert isinstance(registry, EventSchemaRegistry)


def test_registering_the_same_schema_again_is_a_no_op() -> None:
    registry = ok.InMemoryEventSchemaRegistry({"order.created.v1": ORDER_V1})
    reordered = {"properties": {"id": {"type": "integer"}}, "required": ["id"], "type": "object"}
    registry.register("order.created.v1", reordered)
    assert registry.get("order.created.v1") == ORDER_V1


def test_registering_a_different_schema_under_a_taken_id_is_rejected() -> None:
    registry = ok.InMemoryEventSchemaRegistry({"order.created.v1": ORDER_V1})
    with pytest.raises(EventValidationError, match="already registered with a different schema"):
        registry.register("order.created.v1", {"type": "string"})
    assert registry.get("order.created.v1") == ORDER_V1


@pytest.mark.parametrize(
    ("schema_id", "schema"),
    [("", ORDER_V1), (ok.NO_DECLARED_SCHEMA_ID, ORDER_V1), ("x", ["not", "an", "object"]), ("x", {"n": {1, 2}})],
)
def test_invalid_registrations_are_rejected(schema_id: str, schema: Any) -> None:
    with pytest.raises(InvalidArgumentError):
        ok.InMemoryEventSchemaRegistry().register(schema_id, schema)


def test_the_registry_keeps_its_own_copy() -> None:
    schema: dict[str, Any] = {"type": "object", "required": ["id"]}
    registry = ok.InMemoryEventSchemaRegistry({"s": schema})
    schema["required"].append("mutated")
    got = registry.get("s")
    assert got == {"type": "object", "required": ["id"]}
    assert got is not None
    got["type"] = "mutated"
    assert registry.get("s") == {"type": "object", "required": ["id"]}


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
    max_leaves=10,
)


@given(
    first=st.dictionaries(st.text(max_size=5), json_values, max_size=4),
    second=st.dictionaries(st.text(max_size=5), json_values, max_size=4),
)
def test_a_registration_is_idempotent_exactly_for_equal_schemas(first: dict[str, Any], second: dict[str, Any]) -> None:
    registry = ok.InMemoryEventSchemaRegistry({"s": first})
    if first == second:
        registry.register("s", second)
    else:
        with pytest.raises(EventValidationError):
            registry.register("s", second)
    assert registry.get("s") == first


# -- the stage -------------------------------------------------------------------------


def test_an_unregistered_schema_id_is_refused_on_publish(start_runtime: StartRuntime) -> None:
    rt = start_runtime([ValidationMiddleware()])
    client = rt.hub.bind("crew-a", "writer")
    with client.subscribe("orders.created") as sub:
        with pytest.raises(EventValidationError, match=r"order\.created\.v9"):
            client.publish("orders.created", {"id": 1}, ok.PublishOptions(schema_id="order.created.v9"))
        assert sub.drain() == []


def test_a_registered_schema_id_passes_and_the_payload_is_not_checked(start_runtime: StartRuntime) -> None:
    rt = start_runtime([ValidationMiddleware()])
    rt.schema_registry.register("order.created.v1", ORDER_V1)
    client = rt.hub.bind("crew-a", "writer")
    with client.subscribe("orders.created") as sub:
        options = ok.PublishOptions(schema_id="order.created.v1")
        client.publish("orders.created", {"id": 1}, options)
        client.publish("orders.created", "not even an object", options)  # conformance is a plugin's job
        assert [m.schema_id for m in sub.drain()] == ["order.created.v1"] * 2


def test_a_schema_registered_after_a_refusal_is_accepted(start_runtime: StartRuntime) -> None:
    rt = start_runtime([ValidationMiddleware()])
    client = rt.hub.bind("crew-a", "writer")
    options = ok.PublishOptions(schema_id="late.v1")
    with pytest.raises(EventValidationError):
        client.publish("late", 1, options)
    rt.schema_registry.register("late.v1", {"type": "integer"})
    assert client.publish("late", 1, options).schema_id == "late.v1"


def test_no_declared_schema_passes_for_every_pattern(start_runtime: StartRuntime) -> None:
    rt = start_runtime([ValidationMiddleware()])
    registration = rt.hub.register_mailbox("agent://crew-b/inbox")
    client = rt.hub.bind("crew-a", "writer")
    assert client.publish("free", 1).schema_id == ok.NO_DECLARED_SCHEMA_ID
    client.post("agent://crew-b/inbox", 1)
    request = client.request("agent://crew-b/inbox", 2, timeout=10)
    assert request.correlation_id is not None
    rt.hub.bind("crew-b", "inbox").reply(request.correlation_id, 3)
    assert registration.depth() == 2


def test_an_explicit_registry_wins_over_the_runtime_one(start_runtime: StartRuntime) -> None:
    own = ok.InMemoryEventSchemaRegistry({"mine.v1": {"type": "integer"}})
    stage = ValidationMiddleware(own)
    rt = start_runtime([stage])
    rt.schema_registry.register("theirs.v1", {"type": "integer"})
    client = rt.hub.bind("crew-a", "writer")
    client.publish("t", 1, ok.PublishOptions(schema_id="mine.v1"))
    with pytest.raises(EventValidationError):
        client.publish("t", 1, ok.PublishOptions(schema_id="theirs.v1"))
    rt.stop()
    assert stage.registry is own


def test_an_unattached_stage_without_registry_refuses_declared_schemas() -> None:
    stage = ValidationMiddleware()
    message = ok.Message(ok.MessageId.new(), "t", ok.CrewId("c"), ok.SystemClock().now(), schema_id="x.v1")
    with pytest.raises(EventValidationError):
        stage.on_publish(message, lambda m: m)
    assert stage.on_receive(message, lambda m: m) is message  # receive is never validated


def test_the_runtime_registry_is_released_on_stop(start_runtime: StartRuntime) -> None:
    stage = ValidationMiddleware()
    rt = start_runtime([stage])
    assert stage.registry is rt.schema_registry
    rt.stop()
    assert stage.registry is None
