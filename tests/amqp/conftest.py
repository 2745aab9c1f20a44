"""A real RabbitMQ (127.0.0.1:5672) for the distributed tier's tests, one fresh vhost per
test module (created and deleted with ``rabbitmqctl``). Without a broker the tests skip
with the reason, except under ``CI=true``, where they fail."""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import uuid
from collections.abc import Iterator

import pika
import pytest

from orkeon_actors.hub.amqp.topology import InboxCaps, policy_commands

BROKER = ("127.0.0.1", 5672)


def _broker_reachable() -> str | None:
    try:
        socket.create_connection(BROKER, timeout=2).close()
    except OSError as exc:
        return f"RabbitMQ is not reachable at {BROKER[0]}:{BROKER[1]} ({exc})"
    if shutil.which("rabbitmqctl") is None:
        return "rabbitmqctl is not on PATH (the tests create and delete their own vhost with it)"
    return None


def _rabbitmqctl(*args: str) -> None:
    subprocess.run(["rabbitmqctl", "-q", *args], check=True, capture_output=True, timeout=60)


@pytest.fixture(scope="module")
def vhost() -> Iterator[str]:
    missing = _broker_reachable()
    if missing is not None:
        if os.environ.get("CI") == "true":
            pytest.fail(f"{missing}; under CI=true the broker tests must run")
        pytest.skip(missing)
    name = f"orkeon-test-{uuid.uuid4().hex[:12]}"
    _rabbitmqctl("add_vhost", name)
    try:
        _rabbitmqctl("set_permissions", "-p", name, "guest", ".*", ".*", ".*")
        yield name
    finally:
        _rabbitmqctl("delete_vhost", name)


def apply_policies(vhost: str, caps: InboxCaps) -> None:
    for command in policy_commands(vhost, caps):
        subprocess.run(command, check=True, capture_output=True, timeout=60)


def ready_count(vhost: str, queue: str) -> int:
    """Messages ready (not held by a consumer) in ``queue``, by a passive declare."""
    params = pika.URLParameters(url(vhost))
    with contextlib.closing(pika.BlockingConnection(params)) as connection:
        frame = connection.channel().queue_declare(queue, passive=True)
        return int(frame.method.message_count)


def url(vhost: str) -> str:
    return f"amqp://guest:guest@{BROKER[0]}:{BROKER[1]}/{vhost}"
