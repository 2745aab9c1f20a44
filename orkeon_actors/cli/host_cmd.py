"""``orkeon host``: run one host of a fleet until Ctrl-C or SIGTERM (``docs/distributed.md``).

``orkeon host --broker URI --host-id ID --store PATH [--keys FILE] [--crews MODULE:NAME]
[--presence-interval S] [--presence-ttl S] [--prefetch N] [--publish-timeout S]
[--connect-timeout S] [--delivery-timeout S] [--message-ttl S] [--inbox-max-length N]
[--inbox-max-bytes N] [--inbox-message-ttl-ms MS] [--inbox-expiry-ms MS]`` starts
``Runtime.start(store=PATH, fleet=FleetConfig(URI, ID, keys, ...bounds,
inbox_caps=InboxCaps(...)))`` (every inbox it declares carries those caps; keys from
``--keys``, else ``$ORKEON_FLEET_KEYS``; a keys file its group or others can read is
refused). With ``--crews`` it also starts a
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
import os
import signal
import sys
import threading
from collections.abc import Mapping
from typing import Any

from orkeon_actors.errors import InvalidArgumentError

__all__ = ["add_parser", "caps_of", "load_factories", "run_host"]


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser], common: argparse.ArgumentParser) -> None:
    host = sub.add_parser("host", parents=[common], help="run one host of a fleet on RabbitMQ until Ctrl-C")
    host.add_argument("--broker", metavar="URI", required=True, help="amqp://LOGIN:PASS@HOST:5672/VHOST or amqps://")
    host.add_argument("--host-id", metavar="ID", required=True, help="this host's id, unique in the fleet")
    host.add_argument("--store", metavar="PATH", required=True, help="this host's SQLite store (created if missing)")
    host.add_argument("--keys", metavar="FILE", help="the fleet's signing keys (default: $ORKEON_FLEET_KEYS)")
    host.add_argument(
        "--crews",
        metavar="MODULE:NAME",
        help="crew factories to serve spawns with ({kind: factory}); MODULE is imported from the current directory too",
    )
    bounds = host.add_argument_group("bounds (FleetConfig; defaults in docs/distributed.md)")
    for flag, field, unit in _BOUNDS:
        default = _defaults()[field]
        bounds.add_argument(flag, type=float if unit else int, metavar=unit or "N", help=f"{field} (default {default})")
    caps = host.add_argument_group("inbox caps (InboxCaps: the queue arguments of every inbox this host declares)")
    for flag, field, unit in _CAPS:
        default = _cap_defaults()[field]
        caps.add_argument(flag, type=int, metavar=unit, help=f"{field} (default {default})")


_BOUNDS: tuple[tuple[str, str, str], ...] = (
    ("--presence-interval", "presence_interval", "SECONDS"),
    ("--presence-ttl", "presence_ttl", "SECONDS"),
    ("--prefetch", "prefetch", ""),
    ("--publish-timeout", "publish_timeout", "SECONDS"),
    ("--connect-timeout", "connect_timeout", "SECONDS"),
    ("--delivery-timeout", "delivery_timeout", "SECONDS"),
    ("--message-ttl", "message_ttl", "SECONDS"),
)
"""``orkeon host`` flags for :class:`~orkeon_actors.fleet.config.FleetConfig` bounds: flag,
field, unit (empty: a count)."""


_CAPS: tuple[tuple[str, str, str], ...] = (
    ("--inbox-max-length", "max_length", "N"),
    ("--inbox-max-bytes", "max_length_bytes", "BYTES"),
    ("--inbox-message-ttl-ms", "message_ttl_ms", "MS"),
    ("--inbox-expiry-ms", "orphan_expiry_ms", "MS"),
)
"""``orkeon host`` flags for :class:`~orkeon_actors.hub.amqp.topology.InboxCaps`: flag,
field, unit (``orkeon fleet caps --apply`` takes the same ones, without ``inbox-``)."""


def _cap_defaults() -> dict[str, Any]:
    import attrs

    from orkeon_actors.hub.amqp.topology import InboxCaps

    return {field.name: field.default for field in attrs.fields(InboxCaps)}


def caps_of(args: argparse.Namespace) -> Any:
    """The :class:`~orkeon_actors.hub.amqp.topology.InboxCaps` the command line gives
    (the defaults for the flags not given)."""
    from orkeon_actors.hub.amqp.topology import InboxCaps

    return InboxCaps(**{field: value for _f, field, _u in _CAPS if (value := getattr(args, field, None)) is not None})


def _defaults() -> dict[str, Any]:
    import attrs

    from orkeon_actors.fleet.config import FleetConfig

    return {field.name: field.default for field in attrs.fields(FleetConfig)}


def bounds_of(args: argparse.Namespace) -> dict[str, Any]:
    """The ``FleetConfig`` bounds given on the command line (the others keep their defaults)."""
    return {field: value for _flag, field, _unit in _BOUNDS if (value := getattr(args, field, None)) is not None}


def load_factories(spec: str) -> dict[str, Any]:
    """The ``{kind: factory}`` mapping named ``MODULE:NAME`` (a mapping, or a function
    returning one), ``MODULE`` imported from the current directory too, as ``python -m``
    would. ``InvalidArgumentError`` saying what is wrong otherwise."""
    module_name, _, attribute = spec.partition(":")
    if not module_name or not attribute:
        raise InvalidArgumentError(f"--crews {spec!r}: write it MODULE:NAME, e.g. myfleet.crews:FACTORIES")
    here = os.getcwd()
    if here not in sys.path and "" not in sys.path:  # the `orkeon` script does not put it there
        sys.path.insert(0, here)
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
    fleet = FleetConfig(
        args.broker,
        args.host_id,
        load_keys(args.keys),
        kinds=tuple(sorted(factories)),
        inbox_caps=caps_of(args),
        **bounds_of(args),
    )
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
