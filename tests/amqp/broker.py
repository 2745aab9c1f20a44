"""The real RabbitMQ the distributed tier's tests use (127.0.0.1:5672, guest/guest), and
throwaway vhosts on it made with ``rabbitmqctl``. Without a broker the tests skip with
the reason, except under ``CI=true``, where they fail."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import threading
import uuid
from concurrent.futures import Future, ThreadPoolExecutor

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


class _VhostPool:
    """Fresh vhosts made one ahead of use and deleted behind it on two background threads:
    each ``rabbitmqctl`` call boots an Erlang VM (seconds on a loaded machine), and a test
    module need not wait for its own vhost's creation nor for the last one's deletion.
    Every module still gets a vhost no other module used; a failed creation fails the
    module that takes it, a failed deletion the next take (or :func:`drain`)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._executor: ThreadPoolExecutor | None = None
        self._next: Future[str] | None = None
        self._deleting: list[Future[None]] = []

    def _pool(self) -> ThreadPoolExecutor:
        if self._executor is None:
            self._executor = ThreadPoolExecutor(max_workers=2, thread_name_prefix="test-vhosts")
        return self._executor

    def _check_deletions(self) -> None:
        done = [future for future in self._deleting if future.done()]
        self._deleting = [future for future in self._deleting if not future.done()]
        for future in done:
            future.result()  # raises the deletion's error

    def take(self) -> str:
        with self._lock:
            self._check_deletions()
            ready = self._next if self._next is not None else self._pool().submit(create_vhost)
            self._next = self._pool().submit(create_vhost)
        return ready.result(timeout=180)

    def release(self, name: str) -> None:
        with self._lock:
            self._check_deletions()
            self._deleting.append(self._pool().submit(delete_vhost, name))

    def drain(self) -> None:
        """Delete the spare vhost, wait for every deletion, raise the first failure."""
        with self._lock:
            spare, self._next = self._next, None
            if spare is not None:
                self._deleting.append(self._pool().submit(lambda: delete_vhost(spare.result())))
            deleting, self._deleting = self._deleting, []
            executor, self._executor = self._executor, None
        if executor is not None:
            executor.shutdown(wait=True)
        for future in deleting:
            future.result()


_POOL = _VhostPool()


def take_vhost() -> str:
    """A fresh vhost the guest user may use fully (made ahead by the pool); hand it back
    with :func:`release_vhost`."""
    return _POOL.take()


def release_vhost(name: str) -> None:
    """Delete ``name`` (and its queues) in the background."""
    _POOL.release(name)


_session_vhost: list[str] = []


def session_vhost() -> str:
    """One vhost for the adapters of the contract suite, made on first use and deleted
    when the test session ends (each runtime on it has its own host id)."""
    if not _session_vhost:
        _session_vhost.append(take_vhost())
    return _session_vhost[0]


def drain() -> None:
    """At the end of the session: delete the session's vhost and the pool's spare, wait
    for every deletion, raise the first that failed."""
    if _session_vhost:
        release_vhost(_session_vhost.pop())
    _POOL.drain()
