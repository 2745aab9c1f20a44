"""The control plane: spawn and stop crews on another host (cross-host messaging design,
§5 U4), over ``fleet.control``.

:class:`ControlPlane` consumes this host's durable ``control.<host>`` queue and answers
on the requester's ``control.<host>.replies`` queue (exclusive, auto-delete). A request
is a signed JSON message ``{"op": "spawn", "blueprint", "crew_id"}`` or ``{"op": "stop",
"crew_id"}``; the answer is ``{"ok": true, "crew_id"}`` or ``{"ok": false, "error",
"message"}`` with the remote error's type name.

Guarantees:

* **A bounded answer.** :meth:`spawn` and :meth:`stop` return the crew id or raise within
  ``timeout`` seconds: ``BrokerUnavailableError`` if the request could not be published,
  ``FleetControlError`` naming the remote failure, or ``FleetTimeoutError`` when no
  answer came (the target host may be down; the request then stays in its durable
  control queue and runs when it comes back, unless it expired first).
* **Signed both ways.** Requests and answers are signed and verified like every
  cross-host message; an unverifiable one is rejected to the dead-letter exchange.
* **Once per request id.** Requests share the replay seen-set of the host's messages
  (kept in its store, surviving a restart: :mod:`~orkeon_actors.fleet.seen_store`): a
  request whose id was served already (a captured ``spawn`` replayed within its expiry,
  or a redelivery) is not run again; it is logged at WARNING and, while this process
  remembers its answer, answered again with it. One with other content under a seen id
  is refused to the dead-letter exchange.
* **Local execution.** The handler runs the host's own ``spawn(blueprint, crew_id)`` /
  ``stop(crew_id, requesting_host)`` callables (its supervisor): only after the crew is
  started (ready), or ended, is the answer sent, so the caller can post to it right away
  once presence announced it, or knows it is gone. Either callable may return the
  entities concerned; the answer carries them (``entities``).
  Handlers run on a worker thread, never on the broker's I/O thread.
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from typing import Any

from loguru import logger

from orkeon_actors.errors import BrokerError, EventHubError, FleetControlError, FleetTimeoutError, SignatureError
from orkeon_actors.fleet.signing import Signer, Verifier
from orkeon_actors.hub.amqp.link import BrokerLink, Delivery, Outgoing
from orkeon_actors.hub.amqp.topology import CONTROL_EXCHANGE, control_queue, replies_key, replies_queue

__all__ = ["ControlPlane"]

_log = logger.bind(component="orkeon_actors.fleet")
_ANSWERS_KEPT = 10_000
"""How many served requests' answers a host remembers, to answer a duplicate again."""


class ControlPlane:
    """Sends and serves control requests for one host (see the module docstring)."""

    def __init__(
        self,
        host: str,
        link: BrokerLink,
        signer: Signer,
        verifier: Verifier,
        *,
        spawn: Callable[[str, str | None], str | tuple[str, Sequence[str]]],
        stop: Callable[[str, str], Sequence[str] | None],
        now_ms: Callable[[], int] = lambda: int(time.time() * 1000),
        ops: Mapping[str, Callable[[str, dict[str, Any]], dict[str, Any]]] | None = None,
        first_sight: Callable[[Mapping[str, object], bytes], bool] | None = None,
    ) -> None:
        self.host = host
        self._link = link
        self._signer = signer
        self._verifier = verifier
        self._spawn = spawn
        self._stop = stop
        self._now_ms = now_ms
        self.ops: dict[str, Callable[[str, dict[str, Any]], dict[str, Any]]] = dict(ops or {})
        """More operations this host serves besides spawn and stop: name -> handler of
        (the verified sending host, the request), returning the answer's fields (its
        ``EventHubError``, ``KeyError`` and ``ValueError`` are answered as refusals)."""
        self._waiting: dict[str, Future[dict[str, Any]]] = {}
        self._lock = threading.Lock()
        self._first_sight = first_sight or verifier.first_sight
        """The replay seen-set (the gateway's, kept in the host's store): a request id is
        served once."""
        self._answers: OrderedDict[str, dict[str, Any] | None] = OrderedDict()
        """Request ids served (their answer, ``None`` while serving): a duplicate is
        answered again, never run again."""

    def start(self) -> ControlPlane:
        """Serve this host's control queue and listen for answers (both declared by the
        link's topology: ``Declarer().control(host)``)."""
        self._link.consume(replies_queue(self.host), self._answered, prefetch=64)
        self._link.consume(control_queue(self.host), self._requested, prefetch=4)
        return self

    # -- asking ---------------------------------------------------------------------------

    def spawn(self, host: str, blueprint: str, crew_id: str | None = None, *, timeout: float = 30.0) -> str:
        """Start a crew of ``blueprint`` on ``host`` and return its id once it runs."""
        return self.spawn_announced(host, blueprint, crew_id, timeout=timeout)[0]

    def spawn_announced(
        self, host: str, blueprint: str, crew_id: str | None = None, *, timeout: float = 30.0
    ) -> tuple[str, list[str]]:
        """:meth:`spawn`, with the entities (mailboxes) the new crew announced there
        (when the serving ``spawn`` callable returns them: ``(crew_id, entities)``)."""
        answer = self._answer(host, {"op": "spawn", "blueprint": blueprint, "crew_id": crew_id}, timeout)
        return str(answer["crew_id"]), [str(e) for e in answer.get("entities", [])]

    def stop(self, host: str, crew_id: str, *, timeout: float = 30.0) -> str:
        """Stop crew ``crew_id`` on ``host``; returns its id once it stopped."""
        return self.stop_ended(host, crew_id, timeout=timeout)[0]

    def stop_ended(self, host: str, crew_id: str, *, timeout: float = 30.0) -> tuple[str, list[str]]:
        """:meth:`stop`, with the entities (mailboxes) the crew no longer announces
        there (when the serving ``stop`` callable returns them)."""
        answer = self._answer(host, {"op": "stop", "crew_id": crew_id}, timeout)
        return str(answer["crew_id"]), [str(e) for e in answer.get("entities", [])]

    def ask(self, host: str, request: dict[str, Any], *, timeout: float = 30.0) -> dict[str, Any]:
        """Run ``request`` (``{"op": NAME, ...}``, an op of the target's :attr:`ops`) on
        ``host``: its answer's fields, or the errors of :meth:`spawn`."""
        return self._answer(host, request, timeout)

    def _answer(self, host: str, request: dict[str, Any], timeout: float) -> dict[str, Any]:
        request_id = uuid.uuid4().hex
        future: Future[dict[str, Any]] = Future()
        with self._lock:
            self._waiting[request_id] = future
        body = json.dumps(request, separators=(",", ":")).encode()
        try:
            self._send(host, body, request_id, f"control://{host}", reply_to=self.host, timeout=timeout)
            answer = future.result(timeout)
        except FutureTimeout:
            raise FleetTimeoutError(
                f"host {host!r} did not answer {request['op']} within {timeout} s: is its runtime running and "
                "announced on the roster? The request stays queued for it until it expires"
            ) from None
        finally:
            with self._lock:
                self._waiting.pop(request_id, None)
        if not answer.get("ok"):
            raise FleetControlError(
                f"host {host!r} refused {request['op']}: {answer.get('error')}: {answer.get('message')}"
            )
        return answer

    def _send(self, host: str, body: bytes, message_id: str, to: str, *, reply_to: str | None, timeout: float) -> None:
        headers: dict[str, object] = {
            "message_id": message_id,
            "from": f"control://{self.host}",
            "to": to,
            "expires_at": self._now_ms() + int(timeout * 1000),
        }
        if reply_to is not None:
            headers["reply_to"] = reply_to
        signed = self._signer.sign(headers, body)
        key = host if reply_to is not None else replies_key(host)
        self._link.publish_and_wait(
            Outgoing(CONTROL_EXCHANGE, key, body, message_id, signed, expiration_ms=int(timeout * 1000)), timeout
        )

    def _answered(self, delivery: Delivery) -> None:
        self._link.ack(delivery)
        try:
            self._verify(delivery, f"control://{self.host}")
            answer = json.loads(delivery.body)
        except (SignatureError, ValueError) as exc:
            _log.warning("control answer refused: {}", exc)
            return
        with self._lock:
            future = self._waiting.get(str(delivery.headers.get("message_id")))
        if future is not None and not future.done():
            future.set_result(answer)

    # -- serving --------------------------------------------------------------------------

    def _requested(self, delivery: Delivery) -> None:
        try:
            sender_host = self._verify(delivery, f"control://{self.host}")
            request = json.loads(delivery.body)
            first = self._first_sight(delivery.headers, delivery.body)
        except (SignatureError, ValueError) as exc:
            _log.warning("control request refused, dead-lettered: {}", exc)
            self._link.reject(delivery)
            return
        request_id = str(delivery.headers["message_id"])
        if not first:
            with self._lock:
                answer = self._answers.get(request_id)
            _log.warning(
                "control request {} ({}) from host {} was received already (a replay or a redelivery): not run again{}",
                request_id,
                request.get("op") if isinstance(request, dict) else None,
                sender_host,
                "; its answer is sent again" if answer is not None else "",
            )
            if answer is not None:  # published and confirmed off the I/O thread
                threading.Thread(
                    target=self._answer_with,
                    args=(delivery, sender_host, answer),
                    name=f"control-{self.host}",
                    daemon=True,
                ).start()
            else:
                self._link.ack(delivery)
            return
        with self._lock:
            self._answers[request_id] = None
            if len(self._answers) > _ANSWERS_KEPT:
                self._answers.popitem(last=False)
        threading.Thread(
            target=self._serve, args=(delivery, sender_host, request), name=f"control-{self.host}", daemon=True
        ).start()

    def _serve(self, delivery: Delivery, sender_host: str, request: dict[str, Any]) -> None:
        try:
            entities: list[str] = []
            extra: dict[str, Any] = {}
            if request.get("op") == "spawn":
                spawned = self._spawn(str(request["blueprint"]), request.get("crew_id"))
                crew_id, entities = (spawned, []) if isinstance(spawned, str) else (spawned[0], list(spawned[1]))
            elif request.get("op") == "stop":
                crew_id = str(request["crew_id"])
                entities = list(self._stop(crew_id, sender_host) or ())
            elif str(request.get("op")) in self.ops:
                crew_id, extra = "", self.ops[str(request["op"])](sender_host, request)
            else:
                known = ", ".join(["spawn", "stop", *self.ops])
                raise FleetControlError(f"unknown control operation {request.get('op')!r}: use one of {known}")
            answer: dict[str, Any] = {"ok": True, "crew_id": crew_id, "entities": entities, **extra}
        except (EventHubError, KeyError, ValueError) as exc:
            answer = {"ok": False, "error": type(exc).__name__, "message": str(exc)}
        with self._lock:
            request_id = str(delivery.headers["message_id"])
            if request_id in self._answers:
                self._answers[request_id] = answer
        self._answer_with(delivery, sender_host, answer)

    def _answer_with(self, delivery: Delivery, sender_host: str, answer: dict[str, Any]) -> None:
        body = json.dumps(answer, separators=(",", ":")).encode()
        message_id = str(delivery.headers["message_id"])
        try:
            self._send(sender_host, body, message_id, f"control://{sender_host}", reply_to=None, timeout=10.0)
        except BrokerError as exc:  # this host is stopping or lost the broker: the asker times out
            _log.warning("the control answer to host {} was not sent: {}", sender_host, exc)
        finally:
            self._link.ack(delivery)

    def _verify(self, delivery: Delivery, expected_to: str) -> str:
        host = self._verifier.signing_host(delivery.headers, delivery.body)
        if str(delivery.headers.get("from")) != f"control://{host}":
            raise SignatureError(f"a control message from {delivery.headers.get('from')} was signed by {host!r}")
        if str(delivery.headers.get("to")) != expected_to:
            raise SignatureError(f"a control message for {delivery.headers.get('to')} reached {expected_to}")
        return host
