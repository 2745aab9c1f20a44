"""The child side of :class:`~orkeon_actors.fleet.host_process.HostProcess`: one fleet host
in its own process, driven over its standard input and output.

``python -m orkeon_actors.fleet.host_main --host-id ID --store PATH [--url URI --keys FILE]``
boots ``Runtime.start(store=PATH)`` (with ``--url``: on the broker, as host ``ID``, its
keys from ``FILE``), writes ``{"ready": ..., "pid": ...}`` on one line of standard output,
then serves commands: one JSON object per input line ``{"id": N, "op": NAME, "args":
{...}}``, each run on its own thread, each answered by one line ``{"id": N, "ok": true,
"value": ...}`` or ``{"id": N, "ok": false, "error": TYPE, "message": TEXT}``. The ops are
the table :data:`OPS`. End of input, or the ``exit`` op, stops the runtime and exits 0.

This is test and bench machinery: it speaks the hub's public port only (``bind``,
``post``, ``send``, ``reply``, readers), so what it measures is what a user's code gets.
Logs go to standard error; standard output carries the protocol only.
"""

from __future__ import annotations

import argparse
import functools
import importlib
import json
import os
import sys
import threading
import time
from collections.abc import Callable
from typing import Any, TextIO

from orkeon_actors.errors import CrewFailedError, EventHubError, InvalidArgumentError
from orkeon_actors.hub.port import MailboxReader, MailboxRegistration, Subscription
from orkeon_actors.model.cancel import CancelToken
from orkeon_actors.runtime import Runtime
from orkeon_actors.timed_threads import run_together

__all__ = ["OPS", "HostState", "main"]


class HostState:
    """What the ops share: the runtime and the mailboxes registered (and held) here."""

    def __init__(self, runtime: Runtime, host_id: str) -> None:
        self.runtime = runtime
        self.host_id = host_id
        self.registrations: dict[str, MailboxRegistration] = {}
        self.readers: dict[str, MailboxReader] = {}
        self.extra: dict[str, Any] = {}
        """What ops loaded with ``load_ops`` keep between calls."""
        self.supervisor: Any = None
        """The :class:`~orkeon_actors.lifecycle.CrewSupervisor` of ``serve_crews``."""
        self.subscriptions: dict[str, Subscription] = {}
        self.lock = threading.Lock()

    def reader(self, address: str) -> MailboxReader:
        with self.lock:
            reader = self.readers.get(address)
            if reader is None:
                registration = self.registrations.get(address)
                if registration is None:
                    raise InvalidArgumentError(f"{address} is not registered on {self.host_id}: call register first")
                reader = self.readers[address] = registration.reader()
            return reader


def _deadline_token(timeout: float) -> tuple[CancelToken, threading.Timer]:
    token = CancelToken()
    timer = threading.Timer(timeout, token.cancel)
    timer.daemon = True
    timer.start()
    return token, timer


def _message(message: Any) -> dict[str, Any]:
    return {
        "id": str(message.id),
        "payload": message.payload.decode(),
        "source_crew_id": str(message.source_crew_id),
        "source_agent_id": None if message.source_agent_id is None else str(message.source_agent_id),
        "correlation_id": None if message.correlation_id is None else str(message.correlation_id),
    }


def op_ping(state: HostState) -> dict[str, Any]:
    return {"pid": os.getpid(), "host_id": state.host_id}


def op_register(state: HostState, address: str) -> str:
    registration = state.runtime.hub.register_mailbox(address)
    with state.lock:
        state.registrations[str(registration.address)] = registration
    return str(registration.address)


def op_post(state: HostState, to: str, payload: str, crew: str = "poster", agent: str | None = None) -> str:
    return str(state.runtime.hub.bind(crew, agent).post(to, payload.encode()).id)


def op_post_many(
    state: HostState, to: str, count: int, threads: int = 1, crew: str = "poster", payload: str = "{}"
) -> dict[str, float]:
    """Post ``count`` messages from ``threads`` threads; ``started_at``/``ended_at`` are
    ``time.monotonic()`` (one clock for every process of the machine)."""
    hub = state.runtime.hub
    body = payload.encode()
    share = [count // threads + (1 if i < count % threads else 0) for i in range(threads)]

    def poster(index: int) -> Callable[[], None]:
        client = hub.bind(crew, f"poster-{index}")

        def post_share() -> None:
            for _ in range(share[index]):
                client.post(to, body)

        return post_share

    timed = run_together([functools.partial(poster, i) for i in range(threads)], clock=time.monotonic)
    return {"started_at": timed.started, "ended_at": timed.ended}


def op_sent(state: HostState, crew: str, agent: str) -> dict[str, Any]:
    """The sent history of ``crew/agent`` on this host: its coverage, pending count, the
    message ids of its rows in order, and whether its ledger verifies."""
    history = state.runtime.hub.bind(crew, agent).sent()
    report = state.runtime.hub.verify_sent(f"agent://{crew}/{agent}")
    return {
        "state": history.coverage.state.value,
        "pending": history.coverage.pending,
        "rows": [row.message_id for row in history.rows],
        "verified": report.ok,
    }


def op_receive(state: HostState, address: str, timeout: float = 30.0) -> dict[str, Any]:
    token, timer = _deadline_token(timeout)
    try:
        return _message(state.reader(address).receive(token))
    finally:
        timer.cancel()


def op_drain(state: HostState, address: str, count: int, timeout: float = 120.0) -> dict[str, Any]:
    """Receive ``count`` messages; ``last_at`` is ``time.monotonic()`` at the last one,
    ``ids`` their message ids in order of arrival."""
    reader = state.reader(address)
    token, timer = _deadline_token(timeout)
    ids = []
    try:
        for _ in range(count):
            ids.append(str(reader.receive(token).id))
    finally:
        timer.cancel()
    return {"last_at": time.monotonic(), "ids": ids}


def op_send(
    state: HostState, to: str, payload: str, timeout: float = 30.0, crew: str = "asker", agent: str | None = None
) -> str:
    return state.runtime.hub.bind(crew, agent).send(to, payload.encode(), timeout).payload.decode()


def op_send_many(state: HostState, to: str, count: int, timeout: float = 30.0, crew: str = "asker") -> float:
    """``count`` sequential send/reply round trips; returns the seconds they took."""
    client = state.runtime.hub.bind(crew, "asker")
    started = time.monotonic()
    for index in range(count):
        client.send(to, str(index).encode(), timeout)
    return time.monotonic() - started


def op_serve(state: HostState, address: str, count: int, crew: str, agent: str | None = None) -> int:
    """Answer the next ``count`` requests reaching ``address`` with their own payload."""
    reader = state.reader(address)
    client = state.runtime.hub.bind(crew, agent)
    for _ in range(count):
        request = reader.receive()
        if request.correlation_id is not None:
            client.reply(request.correlation_id, request.payload)
    return count


def op_publish(state: HostState, topic: str, payload: str, crew: str = "publisher", agent: str | None = None) -> str:
    return str(state.runtime.hub.bind(crew, agent).publish(topic, payload.encode()).id)


def op_roster(state: HostState) -> Any:
    roster = getattr(state.runtime.hub, "roster", None)
    if roster is None:
        raise InvalidArgumentError(f"host {state.host_id} runs without a broker: it has no roster")
    return [[entry.host, entry.entity] for entry in roster()]


def op_spawn(state: HostState, blueprint: str, host: str, crew_id: str | None = None, timeout: float = 30.0) -> str:
    fleet = getattr(state.runtime, "fleet", None)
    if fleet is None:
        raise InvalidArgumentError(f"host {state.host_id} runs without a broker: it has no fleet control")
    return str(fleet.spawn(blueprint, host=host, crew_id=crew_id, timeout=timeout))


def op_depth(state: HostState, address: str) -> int:
    with state.lock:
        registration = state.registrations.get(address)
    if registration is None:
        raise InvalidArgumentError(f"{address} is not registered on {state.host_id}: call register first")
    return registration.depth()


def op_post_stream(
    state: HostState, to: str, count: int, crew: str = "poster", agent: str | None = None
) -> dict[str, list[str]]:
    """Post ``count`` messages one after the other, going on past failures: ``accepted``
    are the ids whose ``post`` returned (the broker confirmed them), ``failed`` the
    errors of the others."""
    client = state.runtime.hub.bind(crew, agent)
    accepted: list[str] = []
    failed: list[str] = []
    for index in range(count):
        try:
            accepted.append(str(client.post(to, str(index).encode()).id))
        except EventHubError as exc:
            failed.append(f"{type(exc).__name__}: {exc}")
    return {"accepted": accepted, "failed": failed}


def _supervisor(state: HostState) -> Any:
    if state.supervisor is None:
        raise InvalidArgumentError(f"host {state.host_id} runs no supervisor: call serve_crews first")
    return state.supervisor


def _named(spec: str) -> Any:
    """The object ``MODULE:NAME`` names (the harness runs what its caller chose)."""
    module_name, _, attribute = spec.partition(":")
    try:
        return getattr(importlib.import_module(module_name), attribute)
    except (ImportError, AttributeError) as exc:
        raise InvalidArgumentError(f"{spec!r} names nothing importable ({exc}): write MODULE:NAME") from None


def op_serve_crews(state: HostState, factories: str, **options: Any) -> list[str]:
    """Start a supervisor whose factories are ``factories`` (``MODULE:NAME`` of a
    ``{kind: factory}`` mapping, or of a function called with ``options`` returning one)
    and serve remote spawns with it."""
    from orkeon_actors.lifecycle import CrewSupervisor

    named = _named(factories)
    kinds = named(**options) if callable(named) else named
    with state.lock:
        if state.supervisor is None:
            state.supervisor = CrewSupervisor(state.runtime, factories=dict(kinds))
    if state.runtime.fleet is not None:
        state.runtime.fleet.serve(state.supervisor)
    return sorted(kinds)


def op_load_ops(state: HostState, ops: str) -> list[str]:
    """Add the ops ``MODULE:NAME`` names (a ``{name: fn(state, **args)}`` mapping) to
    this process's table: how a benchmark brings its own probes."""
    extra = _named(ops)
    OPS.update(extra)
    return sorted(extra)


def op_sleepers(state: HostState, kind: str, crews: list[str], timeout: float = 60.0) -> int:
    """Spawn ``crews`` of ``kind`` and put each to sleep once it waits for a message."""
    for crew in crews:
        op_spawn_local(state, kind, crew)
    for crew in crews:
        if not op_sleep_crew(state, crew, timeout):
            raise TimeoutError(f"crew {crew} did not sleep")
    return len(crews)


def op_post_timed(state: HostState, to: list[str], crew: str = "poster") -> list[float]:
    """Post to each of ``to`` in turn; the ``time.perf_counter()`` just before each post."""
    client = state.runtime.hub.bind(crew, "timed")
    stamps = []
    for address in to:
        stamps.append(time.perf_counter())
        client.post(address, b'{"wake": true}')
    return stamps


def op_spawn_local(state: HostState, kind: str, crew_id: str | None = None) -> str:
    return str(_supervisor(state).spawn(kind, crew_id))


def op_sleep_crew(state: HostState, crew_id: str, timeout: float = 30.0) -> bool:
    """Wait until the crew waits for a message, then put it to sleep. A crew that
    finishes instead (one whose mailbox could not open fails at once) raises
    ``CrewFailedError`` with its failure (``InvalidArgumentError`` if it completed),
    the moment its outcome is durable, not after ``timeout``."""
    from orkeon_actors.crew import CrewStatus

    supervisor = _supervisor(state)
    finished = threading.Event()
    outcomes: list[Any] = []

    def ended(outcome: Any) -> None:
        outcomes.append(outcome)
        finished.set()

    withdraw = supervisor.when_finished(crew_id, ended)
    deadline = time.monotonic() + timeout
    delay = 0.001
    try:
        # The supervisor reports no status change, only outcomes: WAITING is polled,
        # with a backoff; a finish wakes the wait at once.
        while (status := supervisor.status(crew_id)) is not CrewStatus.WAITING:
            left = deadline - time.monotonic()
            if status in (CrewStatus.COMPLETED, CrewStatus.FAILED):
                finished.wait(max(0.0, left))  # its outcome is durable a commit later
            if outcomes:
                raise _ended(crew_id, outcomes[0])
            if left <= 0:
                raise TimeoutError(f"crew {crew_id} was not waiting for a message within {timeout} s (status {status})")
            finished.wait(min(delay, left))
            delay = min(delay * 2, 0.05)
    finally:
        withdraw()
    return bool(supervisor.sleep(crew_id, timeout=timeout))


def _ended(crew_id: str, outcome: Any) -> EventHubError:
    """Why ``crew_id`` finished (``outcome``) before it waited for a message."""
    if outcome.failure is None:
        return InvalidArgumentError(
            f"crew {crew_id} {outcome.status.name} before it waited for a message: it cannot sleep"
        )
    return CrewFailedError(
        f"crew {crew_id} failed before it waited for a message: {outcome.failure}",
        crew_id=crew_id,
        failure=outcome.failure,
        outcome=outcome,
    )


def op_crew_state(state: HostState, crew_id: str) -> str:
    return str(_supervisor(state).state(crew_id).name)


def op_wait_finished(state: HostState, crew_id: str, timeout: float = 30.0) -> str:
    return str(_supervisor(state).wait_finished(crew_id, timeout).status.name)


def op_post_all(state: HostState, to: list[str], threads: int = 8, crew: str = "poster") -> float:
    """Post once to each of ``to`` from ``threads`` threads; the ``time.perf_counter()``
    when they started."""
    hub = state.runtime.hub

    def poster(index: int) -> Callable[[], None]:
        client = hub.bind(crew, f"poster-{index}")

        def post_share() -> None:
            for address in to[index::threads]:
                client.post(address, b'{"wake": true}')

        return post_share

    return run_together([functools.partial(poster, i) for i in range(threads)]).started


def op_subscribe(state: HostState, pattern: str, crew: str = "subscriber", agent: str | None = None) -> str:
    """Open a subscription to ``pattern``; its name (for ``next``) is the pattern."""
    subscription = state.runtime.hub.bind(crew, agent).subscribe(pattern)
    with state.lock:
        state.subscriptions[pattern] = subscription
    return pattern


def op_next(state: HostState, pattern: str, timeout: float = 30.0) -> dict[str, Any] | None:
    """The next message of the subscription to ``pattern`` (``None`` after ``timeout``)."""
    message = state.subscriptions[pattern].receive(timeout)
    return None if message.is_timeout else _message(message)


def op_wait_topic(state: HostState, pattern: str, timeout: float = 30.0, crew: str = "waiter") -> dict[str, Any] | None:
    """``wait_for(WaitOnTopic(pattern))``: the first message published after the wait began."""
    from orkeon_actors.model.options import WaitOnTopic

    message = state.runtime.hub.bind(crew, "w").wait_for(WaitOnTopic(pattern), timeout)
    return None if message.is_timeout else _message(message)


def op_pending_waits(state: HostState) -> dict[str, int]:
    return state.runtime.hub.pending_waits()


def op_retain(state: HostState, topic: str, key: str, payload: str, crew: str = "publisher") -> str:
    from orkeon_actors.model.options import PublishOptions

    options = PublishOptions(retain_as_last_value=True, last_value_key=key)
    return str(state.runtime.hub.bind(crew, "p").publish(topic, payload.encode(), options).id)


def op_last_value(state: HostState, key: str) -> dict[str, Any] | None:
    message = state.runtime.hub.bind("reader", "r").get_last_value(key)
    return None if message is None else _message(message)


def op_where(state: HostState, address: str) -> str | None:
    where = getattr(state.runtime.hub, "where", None)
    if where is None:
        raise InvalidArgumentError(f"host {state.host_id} runs without a broker: it knows no other host")
    found: str | None = where(address)
    return found


OPS: dict[str, Callable[..., Any]] = {
    "ping": op_ping,
    "register": op_register,
    "post": op_post,
    "post_many": op_post_many,
    "receive": op_receive,
    "sent": op_sent,
    "drain": op_drain,
    "send": op_send,
    "send_many": op_send_many,
    "serve": op_serve,
    "publish": op_publish,
    "roster": op_roster,
    "spawn": op_spawn,
    "depth": op_depth,
    "post_stream": op_post_stream,
    "serve_crews": op_serve_crews,
    "spawn_local": op_spawn_local,
    "sleep_crew": op_sleep_crew,
    "crew_state": op_crew_state,
    "wait_finished": op_wait_finished,
    "sleepers": op_sleepers,
    "load_ops": op_load_ops,
    "post_timed": op_post_timed,
    "post_all": op_post_all,
    "subscribe": op_subscribe,
    "next": op_next,
    "wait_topic": op_wait_topic,
    "pending_waits": op_pending_waits,
    "retain": op_retain,
    "last_value": op_last_value,
    "where": op_where,
}
"""Every op a host process serves: name -> ``fn(state, **args)``; the value must be JSON."""


class _Answers:
    def __init__(self, stream: TextIO) -> None:
        self._stream = stream
        self._lock = threading.Lock()

    def write(self, answer: dict[str, Any]) -> None:
        line = json.dumps(answer, separators=(",", ":"))
        with self._lock:
            self._stream.write(line + "\n")
            self._stream.flush()


def _serve(state: HostState, answers: _Answers, request: dict[str, Any]) -> None:
    ident = request.get("id")
    try:
        fn = OPS.get(str(request.get("op")))
        if fn is None:
            raise InvalidArgumentError(f"unknown op {request.get('op')!r}: choose from {', '.join(OPS)}")
        answers.write({"id": ident, "ok": True, "value": fn(state, **request.get("args", {}))})
    except (EventHubError, ValueError, TypeError, KeyError, TimeoutError) as exc:
        answers.write({"id": ident, "ok": False, "error": type(exc).__name__, "message": str(exc)})


def _boot(args: argparse.Namespace) -> Runtime:
    if args.url is None:
        return Runtime.start(store=args.store)
    from orkeon_actors.fleet.config import FleetConfig, load_keys
    from orkeon_actors.hub.amqp.topology import InboxCaps

    fleet = FleetConfig(
        args.url,
        args.host_id,
        load_keys(args.keys),
        presence_interval=args.presence_interval,
        presence_ttl=args.presence_ttl,
        kinds=tuple(args.kinds),
        inbox_caps=InboxCaps() if args.inbox_max_length is None else InboxCaps(max_length=args.inbox_max_length),
    )
    return Runtime.start(store=args.store, fleet=fleet)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m orkeon_actors.fleet.host_main")
    parser.add_argument("--host-id", required=True)
    parser.add_argument("--store", required=True)
    parser.add_argument("--url", default=None, help="the broker's AMQP URI (none: a local host)")
    parser.add_argument("--keys", default=None, help="the fleet's host keys file (JSON)")
    parser.add_argument("--presence-interval", type=float, default=2.0, help="seconds between heartbeats")
    parser.add_argument("--presence-ttl", type=float, default=7.0, help="seconds a heartbeat stays valid")
    parser.add_argument("--kinds", nargs="*", default=[], help="crew kinds this host can spawn")
    parser.add_argument("--inbox-max-length", type=int, default=None, help="its inboxes' cap (InboxCaps.max_length)")
    args = parser.parse_args(argv)
    answers = _Answers(sys.stdout)
    sys.stdout = sys.stderr  # nothing but the protocol on the real standard output
    runtime = _boot(args)
    state = HostState(runtime, args.host_id)
    answers.write({"ready": True, "pid": os.getpid(), "host_id": args.host_id})
    try:
        for line in sys.stdin:
            request = json.loads(line)
            if request.get("op") == "exit":
                answers.write({"id": request.get("id"), "ok": True, "value": None})
                break
            threading.Thread(target=_serve, args=(state, answers, request), daemon=True).start()
    finally:
        if state.supervisor is not None:
            state.supervisor.stop()
        runtime.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
