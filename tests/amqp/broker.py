"""The real RabbitMQ the distributed tier's tests use (127.0.0.1:5672, guest/guest), and
throwaway vhosts on it made with ``rabbitmqctl``. Without a broker the tests skip with
the reason, except under ``CI=true``, where they fail."""

from __future__ import annotations

import atexit
import os
import shutil
import socket
import subprocess
import uuid

import pytest

BROKER = ("127.0.0.1", 5672)


def broker_missing() -> str | None:
    """Why the broker tests cannot run here, or ``None`` when they can."""
    try:
        socket.create_connection(BROKER, timeout=2).close()
    except OSError as exc:
        return f"RabbitMQ is not reachable at {BROKER[0]}:{BROKER[1]} ({exc})"
    if shutil.which("rabbitmqctl") is None:
        return "rabbitmqctl is not on PATH (the tests create and delete their own vhost with it)"
    return None


def require_broker() -> None:
    """Skip the calling test (fail it under ``CI=true``) when the broker is missing."""
    missing = broker_missing()
    if missing is not None:
        if os.environ.get("CI") == "true":
            pytest.fail(f"{missing}; under CI=true the broker tests must run")
        pytest.skip(missing)


def rabbitmqctl(*args: str) -> None:
    subprocess.run(["rabbitmqctl", "-q", *args], check=True, capture_output=True, timeout=60)


def create_vhost() -> str:
    """A fresh vhost the guest user may use fully."""
    name = f"orkeon-test-{uuid.uuid4().hex[:12]}"
    rabbitmqctl("add_vhost", name)
    rabbitmqctl("set_permissions", "-p", name, "guest", ".*", ".*", ".*")
    return name


def delete_vhost(name: str) -> None:
    rabbitmqctl("delete_vhost", name)


def url(vhost: str) -> str:
    return f"amqp://guest:guest@{BROKER[0]}:{BROKER[1]}/{vhost}"


_session_vhost: list[str] = []


def session_vhost() -> str:
    """One vhost for the adapters of the contract suite, made on first use and deleted
    when the test process exits (each runtime on it has its own host id)."""
    if not _session_vhost:
        _session_vhost.append(create_vhost())
        atexit.register(delete_vhost, _session_vhost[0])
    return _session_vhost[0]
