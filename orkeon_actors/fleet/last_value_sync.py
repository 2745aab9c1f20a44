"""Retained last values for a host that starts after they were retained: at boot a host
exchanges its retained values with every live host over ``fleet.control``, and the newest
value of each ``(scope, key)`` wins everywhere.

While every host runs, a retained publish reaches every host with the publish itself (its
fan-out carries its ``(scope, key)``), so they all hold it. A host that was not running
then learns it here: once its roster heard one round of heartbeats (one
``presence_interval`` after boot: every live host announced itself), it sends each live
host a ``last_values`` control request carrying its own retained values, and each answers
with its own. Both sides keep what they receive unless what they hold is newer, by
``published_at`` then message id: so a host that rejoins with a stale value in its store
does not spread it, and two hosts that each retained the same key while the other was
down converge on the newer value.

Why here and not on the broker: RabbitMQ (without plugins) has no last-value cache, and a
queue per key (``x-max-length`` 1) cannot be listed by a booting host without the
management API, nor a stream compacted; the hosts hold every retained value in their
stores anyway (and keep it across their restarts), so asking them is one round trip per
host, signed like every control message.

Guarantees and limits:

* The exchange runs beside the host (its boot does not wait for it), but a read does:
  ``get_last_value`` on this host, made before its first exchange finished, **waits for
  it** (at most ``presence_interval`` plus ``EXCHANGE_TIMEOUT`` plus 1 s after start;
  counted in :attr:`LastValueSync.reads_held`), so a late joiner reads the newest value
  retained anywhere in the fleet before it started, never just its own store's. Should
  the exchange overrun that bound, the read returns this host's own value with a
  WARNING. ``rt.fleet.last_values.wait()`` waits for the exchange explicitly. The cost:
  the first reads of a host that has just started, even alone in its fleet, take up to
  one ``presence_interval`` (the time its roster needs to know the live hosts).
* A value lives as long as one host that holds it (in its store) runs or comes back: a
  value only a host that never returns held is lost.
* A host that does not answer within ``EXCHANGE_TIMEOUT`` (it died but its presence has
  not expired yet) is skipped with a WARNING; its values come with its own next boot.
* "Newest" is by the publisher's clock: hosts with skewed clocks order retains by it.
"""

from __future__ import annotations

import base64
import threading
from typing import TYPE_CHECKING, Any, Final

from loguru import logger

from orkeon_actors.errors import BrokerError, EventHubError, SignatureError
from orkeon_actors.fleet.gateway import now_ms
from orkeon_actors.hub.amqp.topology import scoped_topic_key, topic_key
from orkeon_actors.model.message import Message
from orkeon_actors.store import last_values
from orkeon_actors.wire import amqp as wire

if TYPE_CHECKING:
    from orkeon_actors.fleet.control import ControlPlane
    from orkeon_actors.fleet.hub import AmqpEventHub

__all__ = ["EXCHANGE_TIMEOUT", "OP", "LastValueSync"]

OP: Final = "last_values"
"""The control operation: ``{"op": "last_values", "values": [...]}``, answered with the
server's ``values``."""
EXCHANGE_TIMEOUT: Final = 5.0
"""Seconds a booting host waits for each live host's answer."""

_log = logger.bind(component="orkeon_actors.fleet")


def newer(candidate: Message, held: Message | None) -> bool:
    """Whether ``candidate`` replaces ``held`` as a last value (the newest wins: later
    ``published_at``, then the larger message id; the same message replaces itself)."""
    return held is None or (candidate.published_at, str(candidate.id)) >= (held.published_at, str(held.id))


class LastValueSync:
    """One host's side of the exchange (see the module docstring): serves ``last_values``
    on its control plane and runs its own exchange once, after :meth:`start`."""

    def __init__(self, hub: AmqpEventHub, control: ControlPlane) -> None:
        self.hub = hub
        self.control = control
        self._done = threading.Event()
        self._stopping = threading.Event()
        self.learned = 0
        """How many values this host's exchange kept (a metric)."""
        self.reads_held = 0
        """How many ``get_last_value`` calls waited for the exchange (a metric)."""
        control.ops[OP] = self.serve
        hub.before_last_value_read = self.before_read

    def start(self) -> LastValueSync:
        threading.Thread(target=self._exchange, name=f"last-values-{self.hub.host_id}", daemon=True).start()
        return self

    def stop(self) -> None:
        self._stopping.set()
        self._done.set()  # a read from now on does not wait for an exchange that will not run

    def wait(self) -> bool:
        """Return once this host's exchange finished (``True``), or ``False`` after its
        bound (``presence_interval`` + ``EXCHANGE_TIMEOUT`` + 1 s)."""
        return self._done.wait(self.hub.fleet_config.presence_interval + EXCHANGE_TIMEOUT + 1.0)

    @property
    def done(self) -> bool:
        return self._done.is_set()

    def before_read(self) -> None:
        """Called by the hub before every ``get_last_value``: wait for the first exchange
        (see the module docstring); at once once it finished."""
        if self._done.is_set():
            return
        self.reads_held += 1
        if not self.wait() and not self._stopping.is_set():
            _log.warning(
                "host {}: a last value was read before the boot exchange finished: this host's own value only",
                self.hub.host_id,
            )

    # -- the wire ----------------------------------------------------------------------

    def _encoded(self) -> list[dict[str, object]]:
        """Every value retained here, each as a signed-format envelope (``wire.amqp``)."""
        held = self.hub.writer.execute(last_values.load_all)
        gateway = self.hub.gateway
        out: list[dict[str, object]] = []
        for (scope, key), message in sorted(held.items(), key=lambda item: (str(item[0][0] or ""), item[0][1])):
            to = topic_key(message.topic) if scope is None else scoped_topic_key(scope, message.topic)
            headers, body = wire.encode(
                message,
                kind="topic",
                to=to,
                sender=wire.sender_of(message, gateway.entity),
                expires_at_ms=now_ms() + int(EXCHANGE_TIMEOUT * 1000),
                retain=(scope, key),
            )
            out.append({"headers": gateway.signer.sign(headers, body), "body": base64.b64encode(body).decode()})
        return out

    def _keep(self, values: object, host: str) -> int:
        """Keep the newer of ``values`` (from ``host``); how many were kept."""
        if not isinstance(values, list):
            raise SignatureError(f"host {host!r} sent last values that are not a list")
        kept = 0
        for value in values:
            try:
                headers, body = dict(value["headers"]), base64.b64decode(value["body"])
                self.hub.gateway.verifier.signing_host(headers, body)  # each value signed by a fleet host
                envelope = wire.decode(headers, body)
            except (SignatureError, KeyError, TypeError, ValueError) as exc:
                _log.warning("a last value from host {} was refused: {}", host, exc)
                continue
            if envelope.retain is None:
                _log.warning("a last value from host {} carries no (scope, key): refused", host)
                continue
            scope, key = envelope.retain
            try:
                kept += self.hub.keep_last_value(scope, key, envelope.message, recheck=True)
            except EventHubError as exc:  # the ACL of this host refused its publisher
                _log.warning("a last value from host {} was refused: {}", host, exc)
        return kept

    def serve(self, host: str, request: dict[str, Any]) -> dict[str, Any]:
        """``host`` booted: keep its newer values, answer with this host's."""
        self._keep(request.get("values", []), host)
        return {"values": self._encoded()}

    # -- the exchange -------------------------------------------------------------------

    def _exchange(self) -> None:
        try:
            if self._stopping.wait(self.hub.fleet_config.presence_interval):
                return
            peers = sorted(host for host in self.hub.gateway.roster.hosts() if host != self.hub.host_id)
            if not peers:
                return
            mine = self._encoded()
            threads = [threading.Thread(target=self._ask, args=(host, mine), daemon=True) for host in peers]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join(EXCHANGE_TIMEOUT + 1.0)
        except (EventHubError, BrokerError) as exc:  # the store or the broker went away meanwhile
            _log.warning("host {}: the last-value exchange at boot stopped: {}", self.hub.host_id, exc)
        finally:
            self._done.set()

    def _ask(self, host: str, mine: list[dict[str, object]]) -> None:
        try:
            answer = self.control.ask(host, {"op": OP, "values": mine}, timeout=EXCHANGE_TIMEOUT)
            kept = self._keep(answer.get("values", []), host)
        except (EventHubError, BrokerError, SignatureError) as exc:
            _log.warning("host {}: no last values from host {} at boot: {}", self.hub.host_id, host, exc)
            return
        self.learned += kept
        if kept:
            _log.info("host {}: kept {} last value(s) from host {}", self.hub.host_id, kept, host)
