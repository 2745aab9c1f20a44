"""The five built-in stages together, in the spec's order (§12): logging, telemetry,
ACL, idempotency, validation."""

from __future__ import annotations

from typing import Any

import pytest

import orkeon_actors as ok
from orkeon_actors.acl import AclRegistry, RestrictiveCrewLinkPolicy
from orkeon_actors.errors import EventAclError, EventValidationError
from orkeon_actors.middleware import (
    AclMiddleware,
    IdempotencyMiddleware,
    LoggingMiddleware,
    TelemetryMiddleware,
    ValidationMiddleware,
)
from tests.middleware.conftest import Metrics, StartRuntime, Tracing

INBOX = "agent://crew-b/inbox"


@pytest.fixture
def five(
    start_runtime: StartRuntime, tracing: Tracing, metrics: Metrics
) -> tuple[ok.Runtime, ok.middleware.IdempotencyMiddleware]:
    registry = AclRegistry()
    registry.register_crew("crew-a", "crew-a")
    registry.register_crew("crew-b", "crew-b")
    registry.register_crew("crew-c", "crew-c", links=[])  # declared no links: may reach nobody
    idempotency = IdempotencyMiddleware(100)
    rt = start_runtime(
        [
            LoggingMiddleware(),
            TelemetryMiddleware(tracing.provider, metrics.provider),
            AclMiddleware(registry),
            idempotency,
            ValidationMiddleware(),
        ]
    )
    return rt, idempotency


def test_the_five_stages_let_ordinary_traffic_through(
    five: tuple[ok.Runtime, IdempotencyMiddleware], tracing: Tracing, log_records: list[dict[str, Any]]
) -> None:
    rt, idempotency = five
    rt.schema_registry.register("order.v1", {"type": "object"})
    registration = rt.hub.register_mailbox(INBOX)
    client = rt.hub.bind("crew-a", "writer")
    with client.subscribe("orders") as sub:
        client.publish("orders", {"id": 1}, ok.PublishOptions(schema_id="order.v1"))
        assert len(sub.drain()) == 1
    sent = client.post(INBOX, 1)
    with registration.reader() as reader:
        assert reader.receive().id == sent.id
    assert [s.name for s in tracing.spans()] == [
        "event_hub.publish",
        "event_hub.subscribe",
        "event_hub.post",
        "event_hub.receive",
    ]
    assert [(r["extra"]["path"], r["extra"]["outcome"]) for r in log_records] == [
        ("publish", "accepted"),
        ("receive", "consumed"),
        ("publish", "accepted"),
        ("receive", "consumed"),
    ]
    assert len(idempotency.memory) == 1  # only the mailbox message was remembered


def test_an_acl_refusal_is_logged_and_spanned_by_the_outer_stages(
    five: tuple[ok.Runtime, IdempotencyMiddleware], tracing: Tracing, log_records: list[dict[str, Any]]
) -> None:
    rt, _ = five
    registration = rt.hub.register_mailbox(INBOX)
    with pytest.raises(EventAclError):
        rt.hub.bind("crew-c", "rogue").post(INBOX, 1)
    assert registration.depth() == 0
    (record,) = log_records
    assert (record["extra"]["outcome"], record["extra"]["error"]) == ("refused", "EventAclError")
    assert dict(tracing.one("event_hub.post").attributes or {})["event.outcome"] == "refused"


def test_a_validation_refusal_reaches_the_caller(five: tuple[ok.Runtime, IdempotencyMiddleware]) -> None:
    rt, _ = five
    with pytest.raises(EventValidationError):
        rt.hub.bind("crew-a", "writer").publish("orders", 1, ok.PublishOptions(schema_id="order.v7"))


def test_a_restrictive_acl_closes_the_door(start_runtime: StartRuntime) -> None:
    registry = AclRegistry()
    registry.register_crew("crew-a", "crew-a")
    rt = start_runtime([LoggingMiddleware(), AclMiddleware(RestrictiveCrewLinkPolicy(registry))])
    rt.hub.register_mailbox(INBOX)
    with pytest.raises(EventAclError):
        rt.hub.bind("crew-a", "writer").post(INBOX, 1)
