"""Presence: who lives on which host, as a union view every gateway rebuilds from
heartbeats (cross-host messaging design, §7).

Each gateway announces its local entities (mailbox addresses) and itself (the entity
``_gateway``, carrying the crew kinds it can spawn, so an agentless host is still a spawn
target) on ``fleet.roster`` every ``interval`` seconds, in signed messages of at most
``chunk`` entities keyed ``roster.<host>.<n>``. Every gateway consumes all of them
through its exclusive, auto-delete ``roster.<host>`` queue.

Guarantees:

* **Signed.** A presence message is accepted only if its signature is valid for the host
  it announces (:meth:`~orkeon_actors.fleet.signing.Verifier.signing_host`): no host can
  claim another's entities. A refused one is logged and dropped.
* **Soft state.** An entry lives ``ttl`` seconds after the heartbeat that carried it; a
  host that stops heartbeating vanishes from the view by itself. A heartbeat *replaces*
  what it says of its host's entities (chunk ``n`` of ``total``: entities the host no
  longer announces disappear once a complete round arrived without them).
* **Never late.** A round is published only while the broker link is connected: one
  taken during an outage is skipped, not held and published after the reconnect
  (where every other host would refuse it as expired); the first heartbeat after the
  reconnect announces the host afresh.
* **Local first.** The local host's own entities are in the view at once (``add``), not
  after a round trip through the broker, and stay there while it heartbeats: each
  heartbeat renews their expiry in its own view, as its round does in the others'.
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Sequence
from typing import Any, Final

import attrs
from loguru import logger

from orkeon_actors.errors import SignatureError
from orkeon_actors.fleet.signing import Signer, Verifier
from orkeon_actors.hub.amqp.link import BrokerLink, Delivery, Outgoing
from orkeon_actors.hub.amqp.topology import ROSTER_EXCHANGE, roster_queue

__all__ = ["GATEWAY", "Presence", "Roster"]

GATEWAY: Final = "_gateway"
_MISMATCHED_MAX: Final = 1_000
_log = logger.bind(component="orkeon_actors.fleet")


@attrs.frozen
class Presence:
    """One entry of the view: ``entity`` lives on ``host`` until ``expires_at`` (unix ms);
    ``kinds`` are the crew kinds a ``_gateway`` entry can spawn."""

    host: str
    entity: str
    expires_at: int
    kinds: tuple[str, ...] = ()


class Roster:
    """Heartbeats this host's entities and keeps the union view (see the module docstring).

    ``now_ms`` is the clock (unix milliseconds); ``interval`` and ``ttl`` in seconds
    (``ttl`` should be a few intervals, so one lost heartbeat does not drop a host).
    """

    def __init__(
        self,
        host: str,
        link: BrokerLink,
        signer: Signer,
        verifier: Verifier,
        *,
        kinds: Sequence[str] = (),
        interval: float = 2.0,
        ttl: float = 7.0,
        chunk: int = 500,
        now_ms: Callable[[], int] = lambda: int(time.time() * 1000),
    ) -> None:
        if not 0 < interval < ttl:
            raise ValueError(f"need 0 < interval < ttl, got interval={interval} ttl={ttl}")
        self.host = host
        self.kinds = tuple(kinds)
        self._link = link
        self._signer = signer
        self._verifier = verifier
        self._interval = interval
        self._ttl_ms = int(ttl * 1000)
        self._chunk = chunk
        self._now_ms = now_ms
        self._lock = threading.Lock()
        self._local: set[str] = set()
        self._view: dict[str, Presence] = {}
        self._rounds: dict[str, tuple[str, set[int], set[str]]] = {}
        """Per other host: the round being received, its chunks and entities so far."""
        self._complete_rounds: dict[str, int] = {}
        self._publishing = threading.Lock()
        """Held from a heartbeat's snapshot of the local entities to its last publish, so
        rounds leave in the order they were taken: a round taken before an ``add`` can
        never arrive after one taken since, and drop the new entity from other views."""
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._mismatched: dict[str, str] = {}
        """Hosts whose presence this host cannot verify, and why (at most
        :data:`_MISMATCHED_MAX`, each logged once)."""

    # -- this host's entities ---------------------------------------------------------

    def add(self, entities: Iterable[str]) -> None:
        """Announce ``entities`` as living here (in the view at once, on the broker at
        the next heartbeat)."""
        expires = self._now_ms() + self._ttl_ms
        with self._lock:
            for entity in entities:
                self._local.add(entity)
                self._view[entity] = Presence(self.host, entity, expires)

    def remove(self, entities: Iterable[str]) -> None:
        with self._lock:
            for entity in entities:
                self._local.discard(entity)
                entry = self._view.get(entity)
                if entry is not None and entry.host == self.host:
                    del self._view[entity]

    def forget(self, host: str, entities: Iterable[str]) -> None:
        """Drop ``entities`` of ``host`` (another host) from the view now, without
        waiting for its next heartbeat: what a signed answer of that host says it no
        longer announces (a crew it ended). An entry another host took over is kept."""
        if host == self.host:
            return
        with self._lock:
            for entity in entities:
                entry = self._view.get(entity)
                if entry is not None and entry.host == host:
                    del self._view[entity]

    # -- the view ---------------------------------------------------------------------

    def lives_on(self, entity: str) -> str | None:
        """The host ``entity`` lives on now, or ``None`` if no live heartbeat says."""
        with self._lock:
            entry = self._view.get(entity)
        if entry is None or entry.expires_at <= self._now_ms():
            return None
        return entry.host

    def entries(self) -> list[Presence]:
        """Every live entry, by host then entity."""
        now = self._now_ms()
        with self._lock:
            live = [entry for entry in self._view.values() if entry.expires_at > now]
        return sorted(live, key=lambda e: (e.host, e.entity))

    def heard(self) -> dict[str, float]:
        """Every live host and how many seconds ago its latest presence round was
        signed (its gateway entry's ``expires_at`` less the TTL), oldest first."""
        now = self._now_ms()
        ages = {
            e.host: max(0.0, (now - (e.expires_at - self._ttl_ms)) / 1000)
            for e in self.entries()
            if e.entity == f"{GATEWAY}@{e.host}"
        }
        return dict(sorted(ages.items(), key=lambda item: -item[1]))

    def hosts(self) -> dict[str, tuple[str, ...]]:
        """Every live gateway and the crew kinds it can spawn."""
        return {e.host: e.kinds for e in self.entries() if e.entity == f"{GATEWAY}@{e.host}"}

    # -- running ----------------------------------------------------------------------

    def start(self) -> Roster:
        """Consume the roster queue (declared by the link's topology) and start
        heartbeating."""
        self._link.consume(roster_queue(self.host), self._received, prefetch=64)
        self.heartbeat()
        self._thread = threading.Thread(target=self._beat, name=f"roster-{self.host}", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def _beat(self) -> None:
        while not self._stop.wait(self._interval):
            self.heartbeat()

    def rounds_from(self, host: str) -> int:
        """How many complete presence rounds of ``host`` this view has received: a
        caller that needs a view taken after some change of ``host`` waits for the count
        to rise by two (the round in flight may predate the change; the next cannot)."""
        with self._lock:
            return self._complete_rounds.get(host, 0)

    def heartbeat(self) -> None:
        """Publish one round of this host's presence now (rounds leave in the order
        their entities were read, whichever thread publishes them)."""
        with self._publishing:
            self._publish_round()

    def _publish_round(self) -> None:
        with self._lock:
            local = sorted(self._local)
        gateway = f"{GATEWAY}@{self.host}"
        entities = [gateway, *(entity for entity in local if entity != gateway)]
        chunks = [entities[i : i + self._chunk] for i in range(0, len(entities), self._chunk)]
        round_id = uuid.uuid4().hex
        expires = self._now_ms() + self._ttl_ms
        self._refresh_own(gateway, expires)
        if not self._link.connected:  # held by the link, it would arrive stale after the reconnect
            return
        for index, part in enumerate(chunks):
            body = json.dumps(
                {"round": round_id, "chunk": index, "chunks": len(chunks), "entities": part, "kinds": list(self.kinds)},
                separators=(",", ":"),
            ).encode()
            headers = self._signer.sign(
                {
                    "message_id": f"{round_id}.{index}",
                    "from": f"{GATEWAY}@{self.host}",
                    "to": "roster",
                    "expires_at": expires,
                },
                body,
            )
            self._link.publish(
                Outgoing(
                    ROSTER_EXCHANGE,
                    f"roster.{self.host}.{index}",
                    body,
                    str(headers["message_id"]),
                    headers,
                    mandatory=False,
                    expiration_ms=self._ttl_ms,
                    persistent=False,
                )
            )

    def _refresh_own(self, gateway: str, expires: int) -> None:
        """This host's own entries live as long as the round announcing them lives in the
        other views: renewed at each heartbeat (its own rounds are not read back), the
        gateway's with its kinds."""
        with self._lock:
            self._view[gateway] = Presence(self.host, gateway, expires, self.kinds)
            for entity in self._local:
                if entity != gateway:
                    self._view[entity] = Presence(self.host, entity, expires)

    def mismatched(self) -> dict[str, str]:
        """Hosts whose presence signature this host refused, and why: the fleet's keys
        files differ between this host and each of them (or one is not in its file)."""
        with self._lock:
            return dict(self._mismatched)

    def _check_signer(self, delivery: Delivery) -> bool:
        """Whether the presence's signature verifies; a refused one is a keys mismatch
        with its host, said at ERROR once per host (within one presence interval of
        both hosts running)."""
        claimed = str(delivery.headers.get("host", ""))
        try:
            self._verifier.signer_of(delivery.headers, delivery.body)
        except SignatureError as exc:
            with self._lock:
                first = claimed not in self._mismatched and len(self._mismatched) < _MISMATCHED_MAX
                if first:
                    self._mismatched[claimed] = str(exc)
            if first and self._verifier.knows(claimed):
                _log.error(
                    "host {} refuses the presence of host {}: {}. The keys files of {} and {} differ: give every "
                    "host of the fleet the same keys file; until then {} refuses everything {} sends",
                    self.host,
                    claimed,
                    exc,
                    self.host,
                    claimed,
                    self.host,
                    claimed,
                )
            elif first:
                _log.error(
                    "host {} hears host {}, which is not in its keys file: add {}'s key to the keys file of every "
                    "host, or stop it",
                    self.host,
                    claimed,
                    claimed,
                )
            return False
        return True

    def _received(self, delivery: Delivery) -> None:
        self._link.ack(delivery)
        if not self._check_signer(delivery):
            return
        try:
            host = self._verifier.signing_host(delivery.headers, delivery.body)
            data: dict[str, Any] = json.loads(delivery.body)
            entities = [str(e) for e in data["entities"]]
            round_id, chunk, chunks = str(data["round"]), int(data["chunk"]), int(data["chunks"])
            kinds = tuple(str(k) for k in data.get("kinds", ()))
            expires = int(str(delivery.headers["expires_at"]))
        except (SignatureError, ValueError, KeyError, TypeError) as exc:
            _log.warning("presence message refused ({}): {}", type(exc).__name__, exc)
            return
        if host == self.host:
            return  # our own view is local first
        with self._lock:
            for entity in entities:
                self._view[entity] = Presence(host, entity, expires, kinds if entity.startswith(GATEWAY) else ())
            current, seen_chunks, seen = self._rounds.get(host, (round_id, set(), set()))
            if current != round_id:
                seen_chunks, seen = set(), set()
            seen_chunks.add(chunk)
            seen.update(entities)
            self._rounds[host] = (round_id, seen_chunks, seen)
            if len(seen_chunks) == chunks:  # a complete round: what it did not name is gone
                self._complete_rounds[host] = self._complete_rounds.get(host, 0) + 1
                for entity in [e for e, p in self._view.items() if p.host == host and e not in seen]:
                    del self._view[entity]
