"""Stage 1, logging: one structured loguru record per message and path."""

from __future__ import annotations

from typing import Any

import pytest

import orkeon_actors as ok
from orkeon_actors.errors import EventAclError
from orkeon_actors.middleware import IdempotencyMiddleware, LoggingMiddleware
from orkeon_actors.middleware.logging_stage import LOG_COMPONENT
from tests.middleware.conftest import StartRuntime
from tests.middleware.test_idempotency import KEY, PinId
from tests.middleware.test_pipeline import Refuse

MAILBOX = "agent://crew-b/inbox"


def _extra(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [dict(r["extra"]) for r in records]


def test_publish_and_receive_are_logged_with_structured_fields(
    start_runtime: StartRuntime, log_records: list[dict[str, Any]]
) -> None:
    rt = start_runtime([LoggingMiddleware()])
    registration = rt.hub.register_mailbox(MAILBOX)
    sent = rt.hub.bind("crew-a", "writer").post(MAILBOX, {"secret": "s3cr3t"})
    with registration.reader() as reader:
        reader.receive()
    publish, receive = _extra(log_records)
    assert {k: publish[k] for k in publish if k != "elapsed_ms"} == {
        "component": LOG_COMPONENT,
        "path": "publish",
        "operation": "post",
        "topic": "_system.post",
        "message_id": str(sent.id),
        "source_crew": "crew-a",
        "target": MAILBOX,
        "correlation_id": None,
        "schema_id": ok.NO_DECLARED_SCHEMA_ID,
        "outcome": "accepted",
    }
    assert isinstance(publish["elapsed_ms"], float) and publish["elapsed_ms"] >= 0
    assert (receive["path"], receive["operation"], receive["outcome"]) == ("receive", "receive", "consumed")
    assert receive["message_id"] == str(sent.id)
    assert [r["level"].name for r in log_records] == ["DEBUG", "DEBUG"]
    assert all("s3cr3t" not in r["message"] and "payload" not in r["extra"] for r in log_records)


def test_receive_elapsed_is_the_latency_on_the_runtime_clock(
    start_runtime: StartRuntime, log_records: list[dict[str, Any]]
) -> None:
    clock = ok.VirtualClock()
    rt = start_runtime([LoggingMiddleware()], clock=clock)
    client = rt.hub.bind("crew-a", "writer")
    with client.subscribe("news") as sub:
        client.publish("news", 1)
        clock.advance(1.5)
        next(sub)
    receive = _extra(log_records)[-1]
    assert (receive["operation"], receive["elapsed_ms"]) == ("subscribe", 1500.0)


def test_the_payload_is_logged_only_on_request(start_runtime: StartRuntime, log_records: list[dict[str, Any]]) -> None:
    rt = start_runtime([LoggingMiddleware("INFO", include_payload=True, payload_limit=8)])
    rt.hub.bind("crew-a", "writer").publish("news", "0123456789abcdef")
    (record,) = log_records
    assert record["extra"]["payload"] == '"0123456'
    assert record["level"].name == "INFO"


def test_a_refusal_is_logged_then_reraised(start_runtime: StartRuntime, log_records: list[dict[str, Any]]) -> None:
    rt = start_runtime([LoggingMiddleware(), Refuse(EventAclError("no link to crew-b"), {"post"})])
    rt.hub.register_mailbox(MAILBOX)
    with pytest.raises(EventAclError):
        rt.hub.bind("crew-a", "writer").post(MAILBOX, 1)
    (record,) = log_records
    assert record["level"].name == "WARNING"
    assert (record["extra"]["outcome"], record["extra"]["error"]) == ("refused", "EventAclError")
    assert record["extra"]["reason"] == "no link to crew-b"


def test_a_duplicate_dropped_before_logging_on_receive_is_not_logged(
    start_runtime: StartRuntime, log_records: list[dict[str, Any]]
) -> None:
    # Registered first, logging runs last on receive: the idempotency stage drops the
    # duplicate before it (spec §12).
    rt = start_runtime([LoggingMiddleware(), PinId(), IdempotencyMiddleware()])
    registration = rt.hub.register_mailbox(MAILBOX)
    client = rt.hub.bind("crew-a", "writer")
    key = str(ok.MessageId.new())
    client.post(MAILBOX, 1, {KEY: key})
    client.post(MAILBOX, 1, {KEY: key})
    client.post(MAILBOX, 2)
    with registration.reader() as reader:
        reader.receive()
        reader.receive()
    assert [(e["path"], e["outcome"]) for e in _extra(log_records)] == [("publish", "accepted")] * 3 + [
        ("receive", "consumed")
    ] * 2


def test_a_duplicate_seen_by_logging_is_logged_as_dropped(
    start_runtime: StartRuntime, log_records: list[dict[str, Any]]
) -> None:
    rt = start_runtime([PinId(), IdempotencyMiddleware(), LoggingMiddleware()])
    registration = rt.hub.register_mailbox(MAILBOX)
    client = rt.hub.bind("crew-a", "writer")
    key = str(ok.MessageId.new())
    client.post(MAILBOX, 1, {KEY: key})
    client.post(MAILBOX, 1, {KEY: key})
    client.post(MAILBOX, 2)
    with registration.reader() as reader:
        reader.receive()
        reader.receive()
    receive = [(e["outcome"], e.get("error")) for e in _extra(log_records) if e["path"] == "receive"]
    assert receive == [("consumed", None), ("dropped", "DuplicateMessageError"), ("consumed", None)]


def test_negative_payload_limit_is_rejected() -> None:
    with pytest.raises(ok.errors.InvalidArgumentError):
        LoggingMiddleware(payload_limit=-1)


def test_records_logged_from_many_threads_each_describe_their_own_message(
    start_runtime: StartRuntime, log_records: list[dict[str, Any]]
) -> None:
    import threading

    rt = start_runtime([LoggingMiddleware()])
    barrier = threading.Barrier(4)

    def publish(index: int) -> None:
        client = rt.hub.bind(f"crew-{index}", "writer")
        barrier.wait()
        for n in range(50):
            client.publish(f"topic.{index}", n)

    threads = [threading.Thread(target=publish, args=(index,)) for index in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(log_records) == 200
    for record in log_records:
        extra = record["extra"]
        assert extra["topic"] == "topic." + extra["source_crew"].removeprefix("crew-")
        assert record["message"].startswith(f"hub publish publish {extra['topic']} {extra['message_id']} accepted (")


_NO_SINK_TAKES_IT = """
import orkeon_actors as ok
from loguru import logger
from orkeon_actors.middleware import LoggingMiddleware
from orkeon_actors.middleware import logging_stage

built = []
original = logging_stage._fields
def counting(*args):
    built.append(1)
    return original(*args)
logging_stage._fields = counting

logger.remove()  # only the sink below: INFO and above
records = []
logger.add(lambda m: records.append(m.record), level="INFO", format="{message}")
logger.enable("orkeon_actors")
with ok.Runtime.start(middleware=[LoggingMiddleware()]) as rt:  # records at DEBUG
    client = rt.hub.bind("crew-a", "writer")
    with client.subscribe("news") as sub:
        client.publish("news", 1)
        sub.receive(1)
assert built == [] and records == [], (built, records)
with ok.Runtime.start(middleware=[LoggingMiddleware(level="INFO")]) as rt:
    rt.hub.bind("crew-a", "writer").publish("news", 1)
assert len(built) == 1 and [r["extra"]["topic"] for r in records] == ["news"], (built, records)
"""


def test_a_record_no_sink_takes_is_dropped_before_its_fields_are_built() -> None:
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-c", _NO_SINK_TAKES_IT], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
