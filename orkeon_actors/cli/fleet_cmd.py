"""``orkeon fleet``: look at and act on a running fleet without writing a host program
(``docs/distributed.md``, "Operating a fleet").

``orkeon fleet --broker URI [--keys FILE] [--as ID] [--listen S] [--json] COMMAND``:

* ``roster``: every host heard, its presence age, the kinds it spawns, its crews and
  mailboxes;
* ``post ADDRESS PAYLOAD [--confirm]``: post from ``agent://orkeon-fleet/<ID>``;
* ``spawn KIND --host HOST [--crew-id ID]`` and ``stop CREW``;
* ``dlq [--limit N]``: the dead letters of ``fleet.dlq`` with why each died, left in
  place; ``dlq --requeue MESSAGE_ID`` publishes one again as it was first published;
* ``caps``: each inbox's length, consumers, policy, declared cap, cap in force and
  whether it is capped; ``caps --apply [--max-length N] [--max-bytes N]
  [--message-ttl-ms MS] [--expiry-ms MS]`` sets the fleet's policies and redeclares
  with those caps the inboxes declared otherwise that no host consumes
  (:func:`~orkeon_actors.fleet.inbox_caps.recap`; ``rabbitmqctl``: AMQP can read and
  set neither arguments nor policies).

The process joins the fleet as the operator host ``ID`` (``--as``, else
``$ORKEON_FLEET_OPERATOR``, else ``operator``), which needs a key in the fleet's keys
file (``--keys``, else ``$ORKEON_FLEET_KEYS``): :mod:`orkeon_actors.fleet.operator`.
A table by default, ``--json`` for scripts. Errors are typed and exit 1 with what to do.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence
from typing import Any

import attrs

__all__ = ["add_parser", "run_fleet"]

_SUBCOMMANDS = ("roster", "post", "spawn", "stop", "dlq", "caps")


def _session_options(parser: argparse.ArgumentParser, *, suppress: bool) -> None:
    """The options every subcommand takes, before or after it (after it: ``suppress``,
    so that a subcommand's default does not overwrite one given before it)."""

    def default(value: Any) -> Any:
        return argparse.SUPPRESS if suppress else value

    parser.add_argument(
        "--broker",
        metavar="URI",
        default=default(os.environ.get("ORKEON_FLEET_BROKER")),
        help="the fleet's broker, amqp://LOGIN:PASS@HOST:5672/VHOST (default: $ORKEON_FLEET_BROKER)",
    )
    parser.add_argument("--keys", metavar="FILE", default=default(None), help="the fleet's keys ($ORKEON_FLEET_KEYS)")
    parser.add_argument(
        "--as",
        dest="operator",
        metavar="ID",
        default=default(None),
        help="the operator's id in the keys file (default: $ORKEON_FLEET_OPERATOR, else 'operator')",
    )
    parser.add_argument(
        "--listen",
        type=float,
        metavar="SECONDS",
        default=default(2.5),
        help="how long to listen for the hosts' presence (more than their heartbeat interval; default 2.5)",
    )
    parser.add_argument(
        "--connect-timeout", type=float, metavar="SECONDS", default=default(10.0), help="connect bound (default 10)"
    )
    parser.add_argument("--json", action="store_true", default=default(False), help="JSON for scripts")


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser], common: argparse.ArgumentParser) -> None:
    fleet = sub.add_parser("fleet", parents=[common], help="look at and act on a running fleet (roster, dlq, ...)")
    _session_options(fleet, suppress=False)
    commands = fleet.add_subparsers(dest="fleet_command", required=True, metavar="COMMAND")
    shared = argparse.ArgumentParser(add_help=False)
    _session_options(shared, suppress=True)
    commands.add_parser("roster", parents=[shared], help="hosts, presence age, kinds, crews and mailboxes")
    post = commands.add_parser("post", parents=[shared], help="post a message to a mailbox")
    post.add_argument("address", metavar="ADDRESS", help="e.g. agent://billing-1/scorer")
    post.add_argument("payload", metavar="PAYLOAD", help="the payload (text, sent as UTF-8)")
    post.add_argument("--confirm", action="store_true", help="return once the mailbox's host holds it")
    spawn = commands.add_parser("spawn", parents=[shared], help="start a crew of a kind on a host")
    spawn.add_argument("kind", metavar="KIND")
    spawn.add_argument("--host", required=True, metavar="HOST")
    spawn.add_argument("--crew-id", metavar="ID")
    spawn.add_argument("--timeout", type=float, default=30.0, metavar="SECONDS")
    stop = commands.add_parser("stop", parents=[shared], help="end a crew on the host that announces it")
    stop.add_argument("crew", metavar="CREW")
    stop.add_argument("--timeout", type=float, default=30.0, metavar="SECONDS")
    dlq = commands.add_parser("dlq", parents=[shared], help="dead letters and why (left in place), --requeue one")
    dlq.add_argument("--limit", type=int, default=1000, metavar="N", help="read at most N (default 1000)")
    dlq.add_argument("--requeue", metavar="MESSAGE_ID", help="publish this dead letter again, as first published")
    caps = commands.add_parser("caps", parents=[shared], help="each inbox's length and cap; --apply the policies")
    caps.add_argument(
        "--apply",
        action="store_true",
        help="set the policies and redeclare the unconsumed inboxes declared otherwise (needs rabbitmqctl)",
    )
    caps.add_argument("--max-length", type=int, metavar="N", help="with --apply: messages per inbox at most")
    caps.add_argument("--max-bytes", dest="max_length_bytes", type=int, metavar="BYTES", help="with --apply: bytes")
    caps.add_argument("--message-ttl-ms", type=int, metavar="MS", help="with --apply: the inboxes' message TTL")
    caps.add_argument(
        "--expiry-ms", dest="orphan_expiry_ms", type=int, metavar="MS", help="with --apply: unused inbox expiry"
    )


def run_fleet(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    from orkeon_actors.fleet.config import load_keys
    from orkeon_actors.fleet.operator import DEFAULT_OPERATOR, OPERATOR_ENV, OperatorSession

    if not args.broker:
        parser.error("orkeon fleet needs --broker URI (or $ORKEON_FLEET_BROKER)")
    if args.fleet_command == "caps" and args.apply:
        return _apply_caps(args)
    operator = args.operator or os.environ.get(OPERATOR_ENV) or DEFAULT_OPERATOR
    keys = load_keys(args.keys)
    if keys.key_of(operator) is None:
        from orkeon_actors.errors import InvalidArgumentError

        raise InvalidArgumentError(
            f"the fleet's keys file has no key for the operator {operator!r}: add one "
            f'(e.g. "{operator}": secrets.token_hex(32)) to the keys file every host holds and restart the hosts, '
            "or name the operator's id with --as ID"
        )
    with OperatorSession(
        args.broker, keys, operator, listen=args.listen, connect_timeout=args.connect_timeout
    ) as session:
        result = _act(session, args)
    _print(args, result)
    return 0


def _act(session: Any, args: argparse.Namespace) -> Any:
    command = args.fleet_command
    if command == "roster":
        return session.roster()
    if command == "post":
        message_id, host = session.post(args.address, args.payload.encode(), confirm=args.confirm)
        return {"message_id": message_id, "to": args.address, "host": host, "confirmed": bool(args.confirm)}
    if command == "spawn":
        crew = session.spawn(args.kind, args.host, crew_id=args.crew_id, timeout=args.timeout)
        return {"crew_id": crew, "kind": args.kind, "host": args.host}
    if command == "stop":
        crew, host = session.stop(args.crew, timeout=args.timeout)
        return {"crew_id": crew, "host": host, "stopped": True}
    if command == "dlq" and args.requeue:
        view = session.requeue(args.requeue, limit=args.limit)
        return {"requeued": attrs.asdict(view)}
    if command == "dlq":
        return session.dead_letters(args.limit)
    return session.inboxes()


def _apply_caps(args: argparse.Namespace) -> int:
    from orkeon_actors.fleet.inbox_caps import recap
    from orkeon_actors.fleet.operator import vhost_of
    from orkeon_actors.hub.amqp.topology import InboxCaps

    fields = ("max_length", "max_length_bytes", "message_ttl_ms", "orphan_expiry_ms")
    caps = InboxCaps(**{name: value for name in fields if (value := getattr(args, name, None)) is not None})
    vhost = vhost_of(args.broker)
    done = recap(args.broker, vhost, caps)  # BrokerError listing the commands when rabbitmqctl is missing
    result = {"vhost": vhost, "applied": attrs.asdict(caps), **attrs.asdict(done)}
    if args.json:
        print(json.dumps(result, indent=2))
        return 0
    print(f"policies set on {vhost}: {_dict_line(attrs.asdict(caps))}")
    for queue, moved in done.redeclared.items():
        over = done.dead_lettered.get(queue, 0)
        print(f"redeclared {queue} with the caps ({moved} messages moved back, {over} over the cap dead-lettered)")
    for queue in done.in_use:
        print(f"{queue} is consumed by a host: capped by the policy; stop its host and run this again to redeclare it")
    return 0


def _print(args: argparse.Namespace, result: Any) -> None:
    if args.json:
        value = [attrs.asdict(row) for row in result] if isinstance(result, list) else result
        print(json.dumps(value, indent=2))
        return
    if isinstance(result, dict):
        print(_dict_line(result))
        return
    command = args.fleet_command
    if command == "roster":
        _table(
            ["HOST", "AGE S", "EXPIRES IN S", "KINDS", "CREWS", "MAILBOXES"],
            [
                [
                    view.host,
                    f"{view.age_s:.1f}",
                    f"{view.expires_in_s:.1f}",
                    ",".join(view.kinds) or "-",
                    ",".join(sorted(view.crews)) or "-",
                    " ".join(view.mailboxes) or "-",
                ]
                for view in result
            ],
            empty="no host heard (are they running on this vhost, with this keys file?)",
        )
    elif command == "dlq":
        _table(
            ["MESSAGE ID", "REASON", "QUEUE", "SENDER", "SIGNED BY", "WHY"],
            [
                [row.message_id, row.reason, row.queue, row.sender or "-", row.signed_by or "(invalid)", row.detail]
                for row in result
            ],
            empty="fleet.dlq is empty",
        )
    else:
        _table(
            ["MAILBOX", "HOST", "MESSAGES", "CONSUMERS", "POLICY", "DECLARED", "CAP", "CAPPED"],
            [
                [
                    row.mailbox,
                    row.host,
                    str(row.messages),
                    str(row.consumers),
                    row.policy or "-",
                    _or_dash(row.declared_max_length),
                    _or_dash(row.max_length),
                    {None: "-", True: "yes", False: "NO"}[row.capped],
                ]
                for row in result
            ],
            empty="no inbox on the roster",
        )
        from orkeon_actors.fleet.broker_admin import rabbitmqctl_available

        if not rabbitmqctl_available():
            print(
                "caps: AMQP cannot read or set a policy; run `orkeon fleet caps` on the broker's machine "
                "(rabbitmqctl on PATH) to see the caps, `--apply` to set them",
                file=sys.stderr,
            )


def _or_dash(value: int | None) -> str:
    return "-" if value is None else str(value)


def _dict_line(result: dict[str, Any]) -> str:
    if "requeued" in result:
        row = result["requeued"]
        return f"requeued {row['message_id']} to {row['exchange']} {row['routing_key']} (it died: {row['reason']})"
    return " ".join(f"{key}={value}" for key, value in result.items())


def _table(header: Sequence[str], rows: list[list[str]], *, empty: str) -> None:
    if not rows:
        print(empty)
        return
    widths = [max(len(line[i]) for line in [list(header), *rows]) for i in range(len(header))]
    for line in [list(header), *rows]:
        print("  ".join(cell.ljust(width) for cell, width in zip(line, widths, strict=True)).rstrip())
