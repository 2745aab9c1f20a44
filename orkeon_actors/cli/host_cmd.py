"""``orkeon host``: run one host of a fleet until Ctrl-C or SIGTERM (``docs/distributed.md``).

``orkeon host --broker URI --host-id ID --store PATH [--keys FILE] [--crews MODULE:NAME]``
starts ``Runtime.start(store=PATH, fleet=FleetConfig(URI, ID, keys))`` (keys from
``--keys``, else ``$ORKEON_FLEET_KEYS``). With ``--crews`` it also starts a
:class:`~orkeon_actors.lifecycle.CrewSupervisor` whose factories are ``MODULE.NAME`` (a
mapping ``{kind: factory}``, or a function returning one), announces those kinds on the
roster and serves other hosts' ``rt.fleet.spawn`` / ``stop`` with it. It prints one line
``orkeon host ID: up on BROKER (store PATH, kinds ...)`` once it is up, then runs until
interrupted; then it puts its live crews to sleep and stops (exit 0).

Errors: a bad URI, missing keys or an unimportable ``--crews`` print what is wrong and
exit 1 (``BrokerUnavailableError`` when the broker does not answer within the connect
bound; ``ExclusiveConsumerError`` when a host with this id already runs).
"""

from __future__ import annotations

import argparse
import importlib
import signal
import threading
from collections.abc import Mapping
from typing import Any

from orkeon_actors.errors import InvalidArgumentError

__all__ = ["add_parser", "load_factories", "run_host"]


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser], common: argparse.ArgumentParser) -> None:
    host = sub.add_parser("host", parents=[common], help="run one host of a fleet on RabbitMQ until Ctrl-C")
    host.add_argument("--broker", metavar="URI", required=True, help="amqp://LOGIN:PASS@HOST:5672/VHOST or amqps://")
    host.add_argument("--host-id", metavar="ID", required=True, help="this host's id, unique in the fleet")
    host.add_argument("--store", metavar="PATH", required=True, help="this host's SQLite store (created if missing)")
    host.add_argument("--keys", metavar="FILE", help="the fleet's signing keys (default: $ORKEON_FLEET_KEYS)")
    host.add_argument("--crews", metavar="MODULE:NAME", help="crew factories to serve spawns with ({kind: factory})")


def load_factories(spec: str) -> dict[str, Any]:
    """The ``{kind: factory}`` mapping named ``MODULE:NAME`` (a mapping, or a function
    returning one). ``InvalidArgumentError`` saying what is wrong otherwise."""
    module_name, _, attribute = spec.partition(":")
    if not module_name or not attribute:
        raise InvalidArgumentError(f"--crews {spec!r}: write it MODULE:NAME, e.g. myfleet.crews:FACTORIES")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise InvalidArgumentError(f"--crews {spec!r}: cannot import {module_name}: {exc}") from None
    value = getattr(module, attribute, None)
    if callable(value) and not isinstance(value, Mapping):
        value = value()
    if not isinstance(value, Mapping) or not value:
        raise InvalidArgumentError(f"--crews {spec!r}: {module_name}.{attribute} is not a non-empty {{kind: factory}}")
    return dict(value)


def run_host(args: argparse.Namespace, *, stop: threading.Event | None = None) -> int:
    """Run the host until ``stop`` is set (by SIGINT/SIGTERM when not given)."""
    from orkeon_actors.fleet.config import FleetConfig, load_keys
    from orkeon_actors.hub.amqp.uri import redacted
    from orkeon_actors.lifecycle import CrewSupervisor
    from orkeon_actors.runtime import Runtime

    factories = load_factories(args.crews) if args.crews else {}
    fleet = FleetConfig(args.broker, args.host_id, load_keys(args.keys), kinds=tuple(sorted(factories)))
    stopping = stop if stop is not None else _on_signals()
    runtime = Runtime.start(store=args.store, fleet=fleet)
    supervisor = None
    try:
        if factories:
            supervisor = CrewSupervisor(runtime, factories=factories)
            assert runtime.fleet is not None
            runtime.fleet.serve(supervisor)
        kinds = ", ".join(sorted(factories)) or "none"
        print(
            f"orkeon host {args.host_id}: up on {redacted(args.broker)} (store {args.store}, kinds {kinds})", flush=True
        )
        stopping.wait()
    finally:
        if supervisor is not None:
            supervisor.stop()
        runtime.stop()
    print(f"orkeon host {args.host_id}: stopped", flush=True)
    return 0


def _on_signals() -> threading.Event:
    event = threading.Event()
    for number in (signal.SIGINT, signal.SIGTERM):
        signal.signal(number, lambda _n, _f: event.set())
    return event
