"""A real RabbitMQ (127.0.0.1:5672) for the distributed tier's tests, one fresh vhost per
test module (made ahead and deleted behind it with ``rabbitmqctl``: ``broker.py``).
Without a broker the tests skip with the reason, except under ``CI=true``, where they fail."""

from __future__ import annotations

import contextlib
import subprocess
from collections.abc import Iterator

import pika
import pytest

from orkeon_actors.hub.amqp.topology import InboxCaps, policy_commands

from .broker import BROKER, release_vhost, require_broker, take_vhost, url

__all__ = ["BROKER", "apply_policies", "ready_count", "url", "vhost"]


@pytest.fixture(scope="module")
def vhost() -> Iterator[str]:
    require_broker()
    name = take_vhost()
    try:
        yield name
    finally:
        release_vhost(name)


def apply_policies(vhost: str, caps: InboxCaps) -> None:
    for command in policy_commands(vhost, caps):
        subprocess.run(command, check=True, capture_output=True, timeout=60)


def ready_count(vhost: str, queue: str) -> int:
    """Messages ready (not held by a consumer) in ``queue``, by a passive declare."""
    params = pika.URLParameters(url(vhost))
    with contextlib.closing(pika.BlockingConnection(params)) as connection:
        frame = connection.channel().queue_declare(queue, passive=True)
        return int(frame.method.message_count)
