"""Broker administration without the management plugin: ``rabbitmqctl`` for policies and
scratch vhosts (cross-host messaging design, §10.1: caps are set by policy).

RabbitMQ here runs without the management plugin, so there is no HTTP API to call. What
the fleet needs from an operator is done with ``rabbitmqctl`` on the broker's machine
(it needs the Erlang cookie: run as root or as the ``rabbitmq`` user):

* :func:`apply_policies` sets the inbox and DLQ caps of a vhost
  (``rabbitmqctl set_policy``, see :func:`~orkeon_actors.hub.amqp.topology.inbox_policy`).
  A policy changes a live queue in place, where a queue argument would make the next
  declaration fail with ``PRECONDITION_FAILED``. Without ``rabbitmqctl`` it raises
  ``BrokerError`` listing the exact commands to run where it is available.
* :func:`scratch_vhost` creates a throw-away vhost (tests, ``orkeon bench amqp``, the
  host-process harness) and deletes it afterwards, so runs never see each other's queues.

Every failure of ``rabbitmqctl`` is a ``BrokerError`` carrying its stderr.
"""

from __future__ import annotations

import shlex
import shutil
import subprocess
import uuid
from collections.abc import Iterator
from contextlib import contextmanager

from orkeon_actors.errors import BrokerError
from orkeon_actors.hub.amqp.topology import InboxCaps, policy_commands

__all__ = ["apply_policies", "rabbitmqctl", "rabbitmqctl_available", "scratch_vhost"]


def rabbitmqctl_available() -> bool:
    """Whether ``rabbitmqctl`` is on ``PATH`` (it still needs the broker's Erlang cookie)."""
    return shutil.which("rabbitmqctl") is not None


def rabbitmqctl(*args: str, timeout: float = 60.0) -> str:
    """Run ``rabbitmqctl -q ARGS`` and return its stdout; ``BrokerError`` if it is missing,
    fails or does not finish within ``timeout`` seconds."""
    if not rabbitmqctl_available():
        raise BrokerError(
            f"rabbitmqctl is not on PATH: run `rabbitmqctl {shlex.join(args)}` on the broker's machine "
            "(as root or the rabbitmq user)"
        )
    try:
        done = subprocess.run(
            ["rabbitmqctl", "-q", *args], check=False, capture_output=True, text=True, timeout=timeout
        )
    except subprocess.TimeoutExpired:
        raise BrokerError(f"rabbitmqctl {shlex.join(args)} did not finish within {timeout} s") from None
    if done.returncode != 0:
        raise BrokerError(
            f"rabbitmqctl {shlex.join(args)} failed ({done.returncode}): {done.stderr.strip() or done.stdout.strip()}"
        )
    return done.stdout


def apply_policies(vhost: str, caps: InboxCaps | None = None) -> None:
    """Set the inbox and DLQ policies of ``vhost`` (default caps: :class:`InboxCaps`);
    idempotent: setting them again with other caps updates every matching queue in place."""
    commands = policy_commands(vhost, caps if caps is not None else InboxCaps())
    if not rabbitmqctl_available():
        listed = "; ".join(shlex.join(command) for command in commands)
        raise BrokerError(f"rabbitmqctl is not on PATH: run on the broker's machine: {listed}")
    for command in commands:
        rabbitmqctl(*command[1:])


@contextmanager
def scratch_vhost(prefix: str = "orkeon", *, user: str = "guest") -> Iterator[str]:
    """A new vhost named ``<prefix>-<random>`` on which ``user`` has every permission;
    deleted (with its queues) on exit."""
    name = f"{prefix}-{uuid.uuid4().hex[:12]}"
    rabbitmqctl("add_vhost", name)
    try:
        rabbitmqctl("set_permissions", "-p", name, user, ".*", ".*", ".*")
        yield name
    finally:
        rabbitmqctl("delete_vhost", name)
