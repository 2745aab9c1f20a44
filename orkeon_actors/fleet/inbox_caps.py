"""Which inboxes of a vhost are capped, and capping the ones that are not
(``orkeon fleet caps``; cross-host messaging design, §10.1: every inbox is capped).

Hosts declare their inboxes with cap arguments
(:func:`~orkeon_actors.hub.amqp.topology.inbox_arguments`). An inbox that exists from
before (an older host, other caps) keeps its arguments: AMQP cannot change them, and a
host meeting one warns and uses it as it is. What an operator does about it, on the
broker's machine (``rabbitmqctl``: there is no management plugin, and AMQP reads neither
queue arguments nor policies):

* :func:`inbox_caps` reads each inbox's declared caps, its policy's, and the cap in
  force (the lower of the two, as RabbitMQ applies them);
* :func:`recap` sets the fleet's policies (every inbox capped at once, in place), then
  redeclares with the caps' arguments each inbox whose arguments differ and that no host
  consumes: its messages move to a holding queue ``fleet.recap.<inbox>``, the inbox is deleted
  and declared again with its bindings, the messages move back in order (their
  properties, signed headers and ids unchanged; one over the new cap is dead-lettered as
  any overflow, so its sender is told). An inbox a host consumes is left to the policy
  and listed: stop that host and run it again.

Failures are ``BrokerError`` saying what happened and what is left where (a failed move
leaves the messages in ``fleet.recap.<inbox>``, which the next run moves back first).
Each ``rabbitmqctl`` call costs seconds (an Erlang VM starts): :func:`recap` makes four
(two policies, the queues, the bindings).
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from contextlib import closing
from typing import Any, Final

import attrs
import pika
import pika.adapters.blocking_connection
import pika.exceptions

from orkeon_actors.errors import BrokerError
from orkeon_actors.fleet.broker_admin import apply_policies, rabbitmqctl
from orkeon_actors.hub.amqp.topology import MSG_EXCHANGE, InboxCaps, inbox_arguments
from orkeon_actors.hub.amqp.uri import connection_parameters

__all__ = ["HOLDING_PREFIX", "QueueCaps", "Recapped", "inbox_caps", "recap"]

HOLDING_PREFIX: Final = "fleet.recap."
"""Where an inbox's messages wait while it is redeclared (``fleet.recap.inbox.<address>``:
within the hosts' ``fleet\\.`` permissions, outside the ``^inbox\\.`` policy's caps)."""


@attrs.frozen
class QueueCaps:
    """One inbox as the broker holds it: ``arguments`` it was declared with, its
    ``policy`` (``None``: none applies) and that policy's definition, ``messages`` and
    ``consumers``."""

    queue: str
    arguments: Mapping[str, Any]
    policy: str | None
    policy_definition: Mapping[str, Any]
    messages: int
    consumers: int

    @property
    def declared_max_length(self) -> int | None:
        value = self.arguments.get("x-max-length")
        return int(value) if value is not None else None

    @property
    def max_length(self) -> int | None:
        """The cap in force: the lower of the declared and the policy's (``None``: uncapped)."""
        found = [v for v in (self.declared_max_length, self.policy_definition.get("max-length")) if v is not None]
        return min(int(v) for v in found) if found else None

    def declared_with(self, caps: InboxCaps) -> bool:
        """Whether its arguments are exactly what a host with ``caps`` declares."""
        return dict(self.arguments) == inbox_arguments(caps)


def inbox_caps(vhost: str) -> dict[str, QueueCaps]:
    """Every inbox queue of ``vhost`` (``inbox.*``), read with ``rabbitmqctl``
    (``BrokerError`` saying what to run without it)."""
    definitions: dict[str, Mapping[str, Any]] = {}
    for policy in json.loads(rabbitmqctl("list_policies", "-p", vhost, "--formatter", "json") or "[]"):
        definition = policy.get("definition", {})
        definitions[str(policy["name"])] = json.loads(definition) if isinstance(definition, str) else definition
    return {
        name: attrs.evolve(found, policy_definition=definitions.get(found.policy or "", {}))
        for name, found in _queues(vhost).items()
        if name.startswith("inbox.")
    }


def _queues(vhost: str) -> dict[str, QueueCaps]:
    """Every queue of ``vhost`` with its arguments, policy name, length and consumers
    (no policy definitions: those are :func:`inbox_caps`')."""
    rows = json.loads(
        rabbitmqctl(
            "list_queues", "-p", vhost, "name", "arguments", "policy", "messages", "consumers", "--formatter", "json"
        )
        or "[]"
    )
    return {
        str(row["name"]): QueueCaps(
            str(row["name"]),
            {str(key): value for key, _type, value in row.get("arguments") or []},
            str(row.get("policy") or "") or None,
            {},
            int(row.get("messages") or 0),
            int(row.get("consumers") or 0),
        )
        for row in rows
    }


@attrs.frozen
class Recapped:
    """What :func:`recap` did: the inboxes ``redeclared`` with the caps (and how many
    messages each had moved back, ``dead_lettered`` of them over the new cap), those
    ``in_use`` by a host (capped by the policy only, until that host stops and this runs
    again), and the ``vhost``."""

    vhost: str
    redeclared: dict[str, int]
    dead_lettered: dict[str, int]
    in_use: list[str]


def recap(url: str, vhost: str, caps: InboxCaps) -> Recapped:
    """Set the policies of ``caps`` on ``vhost``, then redeclare each inbox whose
    arguments differ and that nobody consumes (see the module docstring). ``url`` is a
    broker URI whose login may configure, read and write the fleet's names."""
    apply_policies(vhost, caps)
    redeclared: dict[str, int] = {}
    dead: dict[str, int] = {}
    in_use: list[str] = []
    queues = _queues(vhost)
    holding_left = {name.removeprefix(HOLDING_PREFIX) for name in queues if name.startswith(HOLDING_PREFIX)}
    inboxes = {name: found for name, found in sorted(queues.items()) if name.startswith("inbox.")}
    todo = [name for name, found in inboxes.items() if not found.declared_with(caps) or name in holding_left]
    bindings = _bindings(vhost) if todo else {}
    for queue in todo:
        found = inboxes[queue]
        if found.consumers:
            in_use.append(queue)
            continue
        moved, over = _redeclare(url, queue, bindings.get(queue, []), caps, found.declared_with(caps))
        redeclared[queue] = moved
        if over:
            dead[queue] = over
    return Recapped(vhost, redeclared, dead, in_use)


def _bindings(vhost: str) -> dict[str, list[str]]:
    """Per queue, the routing keys binding it to ``fleet.msg``."""
    rows = rabbitmqctl(
        "list_bindings", "-p", vhost, "source_name", "destination_name", "routing_key", "--formatter", "json"
    )
    keys: dict[str, list[str]] = {}
    for row in json.loads(rows or "[]"):
        if row.get("source_name") == MSG_EXCHANGE:
            keys.setdefault(str(row["destination_name"]), []).append(str(row["routing_key"]))
    return keys


def _redeclare(url: str, queue: str, keys: list[str], caps: InboxCaps, already: bool) -> tuple[int, int]:
    """Move ``queue``'s messages aside, declare it again with ``caps``, bind ``keys``, move
    them back; how many moved back and how many of those dead-lettered over the cap.
    ``already``: the queue has the caps (only a holding queue left behind is moved back)."""
    holding = HOLDING_PREFIX + queue
    with closing(pika.BlockingConnection(connection_parameters(url))) as connection:
        channel = connection.channel()
        channel.confirm_delivery()
        if not already:
            channel.queue_declare(holding, durable=True, arguments={"x-queue-type": "classic"})
            _move(channel, queue, holding)
            try:
                channel.queue_delete(queue, if_unused=True, if_empty=True)
            except pika.exceptions.ChannelClosedByBroker as exc:
                raise BrokerError(
                    f"{queue} took a consumer or a message while it was being redeclared ({exc}): its messages wait "
                    f"in {holding}; stop the host serving it and run `orkeon fleet caps --apply` again"
                ) from None
            channel.queue_declare(queue, durable=True, arguments=inbox_arguments(caps))
            for key in keys:
                channel.queue_bind(queue, MSG_EXCHANGE, key)
        channel.queue_declare(holding, durable=True, arguments={"x-queue-type": "classic"})
        moved, over = _move(channel, holding, queue)
        channel.queue_delete(holding, if_empty=True)
    return moved, over


def _move(channel: pika.adapters.blocking_connection.BlockingChannel, source: str, target: str) -> tuple[int, int]:
    """Every message of ``source`` into ``target`` in order, each acknowledged at the
    source once the broker confirmed it at the target (a copy refused over the target's
    cap is dead-lettered by the broker: counted); how many moved, how many of those died."""
    moved = over = 0
    for method, properties, body in _each(channel, source):
        try:
            channel.basic_publish("", target, body, properties, mandatory=True)
        except pika.exceptions.NackError:
            over += 1  # reject-publish-dlx: the broker dead-lettered it (its sender is told)
        channel.basic_ack(method.delivery_tag)
        moved += 1
    return moved, over


def _each(
    channel: pika.adapters.blocking_connection.BlockingChannel, queue: str
) -> Iterator[tuple[Any, pika.BasicProperties, bytes]]:
    while True:
        method, properties, body = channel.basic_get(queue, auto_ack=False)
        if method is None:
            return
        yield method, properties, body
