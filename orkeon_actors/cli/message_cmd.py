"""``orkeon message sent|ls|verify``: an agent's sent history and a mailbox's held
messages, read from a store file without the writer's lock (sender-owned history
requirements, MESSAGE-R09; the ``--json`` shapes are documented in ``docs/history.md``).

The file is opened read-only (``SQLITE_OPEN_READONLY``, ``PRAGMA query_only``), so the
commands are safe beside a running runtime: WAL readers never block the writer and see
its last commit. ``sent`` reads only the sender's own rows, never a mailbox.

The sender of ``sent`` and ``verify`` is the positional address, else ``--as``, else the
``ORKEON_AGENT`` environment variable; ``--id CREW/AGENT`` names the canonical id instead
and excludes the three. ``verify`` without any sender checks every sender of the store.
"""

from __future__ import annotations

import argparse
import difflib
import json
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any

import apsw

from orkeon_actors.errors import StoreError, StoreVersionError
from orkeon_actors.history.endpoint import Endpoint, endpoint_of, parse_sender
from orkeon_actors.history.view import CoverageState, endpoint_json
from orkeon_actors.model.address import MailboxAddress
from orkeon_actors.store.open_errors import typed_open_errors
from orkeon_actors.store.sent_reads import known_senders, read_history, verify_history

__all__ = ["add_message_parser", "run_message", "utc_text"]

AGENT_VARIABLE = "ORKEON_AGENT"


def add_message_parser(sub: Any, common: argparse.ArgumentParser) -> None:
    message = sub.add_parser(
        "message",
        parents=[common],
        help="an agent's sent history (sent, verify) and a mailbox's held messages (ls), read-only",
        description="Read a store file without its writer's lock: what an agent sent, what a mailbox holds.",
    )
    verbs = message.add_subparsers(dest="message_command", required=True, metavar="VERB")
    sent = verbs.add_parser("sent", parents=[common], help="what an agent sent, with its coverage")
    _sender_arguments(sent)
    sent.add_argument("--to", metavar="ADDRESS", help="only rows to this recipient (its canonical id)")
    sent.add_argument(
        "--since",
        metavar="UNIX_MS",
        type=_non_negative("--since", "unix milliseconds"),
        help="only rows strictly after this instant",
    )
    sent.add_argument(
        "--after-seq",
        metavar="SEQ",
        type=_non_negative("--after-seq", "a row's seq"),
        help="only rows past this ledger position (each row's seq in --json): the poller's cursor, never skips",
    )
    sent.add_argument("--count", action="store_true", help="the number of rows; refused unless coverage is complete")
    sent.add_argument("--include-body", action="store_true", help="include each message's body")
    sent.add_argument("--json", action="store_true", help="print the stable JSON shape (docs/history.md)")
    sent.add_argument("--store", metavar="PATH", required=True, help="the store file")
    ls = verbs.add_parser("ls", parents=[common], help="the messages a mailbox holds, oldest first")
    ls.add_argument("address", metavar="ADDRESS", help="the mailbox, e.g. agent://billing/scorer")
    ls.add_argument("--from", dest="sender", metavar="ADDRESS", help="only messages from this sender")
    ls.add_argument("--json", action="store_true", help="print JSON")
    ls.add_argument("--store", metavar="PATH", required=True, help="the store file")
    verify = verbs.add_parser("verify", parents=[common], help="walk a sender's ledger (or every sender's) to genesis")
    _sender_arguments(verify)
    verify.add_argument("--json", action="store_true", help="print JSON")
    verify.add_argument("--store", metavar="PATH", required=True, help="the store file")


def _sender_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("address", nargs="?", metavar="ADDRESS", help="the sender, agent://crew/agent")
    parser.add_argument("--as", dest="as_address", metavar="ADDRESS", help="the sender, if ADDRESS is not given")
    parser.add_argument("--id", dest="canonical_id", metavar="ID", help="the sender's canonical id, CREW/AGENT")


def _non_negative(flag: str, what: str) -> Callable[[str], int]:
    """The argparse type of ``flag``: a non-negative integer, ``what`` it stands for."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{flag} takes {what} (an integer), got {text!r}") from None
        if value < 0:
            raise argparse.ArgumentTypeError(f"{flag} takes non-negative {what}, got {value}")
        return value

    return parse


def _sender(args: argparse.Namespace, parser: argparse.ArgumentParser, *, required: bool) -> Endpoint | None:
    if args.canonical_id is not None:
        if args.address is not None or args.as_address is not None:
            parser.error("--id names the sender by itself: give it without ADDRESS and --as")
        return parse_sender(canonical_id=args.canonical_id)
    address = args.address or args.as_address or os.environ.get(AGENT_VARIABLE) or None
    if address is None:
        if required:
            parser.error(f"name the sender: ADDRESS, --as ADDRESS, --id CREW/AGENT or the {AGENT_VARIABLE} variable")
        return None
    return parse_sender(address)


@contextmanager
def _read_only(path: str) -> Iterator[apsw.Connection]:
    if not os.path.isfile(path):
        raise StoreError(f"no store file at {path}: give the path a runtime was started with (store=...)", path=path)
    with typed_open_errors(path):
        try:
            conn = apsw.Connection(path, flags=apsw.SQLITE_OPEN_READONLY)
            conn.execute("PRAGMA query_only = ON")
            tables = {str(r[0]) for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        except apsw.NotADBError as exc:
            raise StoreError(f"{path} is not a SQLite database ({exc})", path=path) from exc
    try:
        if "crew_snapshots" not in tables:
            raise StoreVersionError(f"{path} is not an orkeon store (no crew_snapshots table)", path=path)
        yield conn
    finally:
        conn.close()


def run_message(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    """Run one verb; 0 on success, 1 when ``verify`` finds a bad ledger (a refused
    ``--count`` raises ``SentCoverageError``, which ``orkeon`` reports with status 1)."""
    if args.message_command == "sent":
        return _sent(args, parser)
    if args.message_command == "ls":
        return _ls(args)
    return _verify(args, parser)


def _sent(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    sender = _sender(args, parser, required=True)
    assert sender is not None
    to = None if args.to is None else endpoint_of(MailboxAddress.parse(args.to))
    with _read_only(args.store) as conn:
        history = read_history(conn, sender, to, args.since, args.include_body, args.after_seq)
        complete = history.coverage.state is CoverageState.COMPLETE
        known = known_senders(conn) if complete and not history.rows else [sender.id]
    if args.json:
        print(json.dumps(history.to_json(count=args.count), ensure_ascii=False))
        return 0
    if args.count:
        print(history.count())
        return 0
    coverage = history.coverage
    since = "" if coverage.since_ms is None else f" since {utc_text(coverage.since_ms)}"
    pending = f", {coverage.pending} pending" if coverage.pending else ""
    named = history.named_sender
    name = "" if named.name is None else f" ({named.name}, name at send time)"
    if sender.id not in known:
        print(f"{sender.address}: unknown sender: this store holds no sent row, head or pending send of it")
        near = difflib.get_close_matches(sender.id, known, n=3)
        if near:
            print("  did you mean: " + ", ".join(f"agent://{one}" for one in near))
        print(f"  (its coverage is complete{since}: it sent nothing the store recorded since then)")
        return 0
    print(f"{sender.address}{name}: {len(history)} sent, coverage {coverage.state.value}{since}{pending}")
    for seq, row in zip(history.seqs, history.rows, strict=True):
        key = "" if row.idempotency_key is None else f"  key={row.idempotency_key}"
        print(
            f"  #{seq:<5} {utc_text(row.sent_at_ms)}  {row.kind.value:<5}  {row.message_id}  to {row.to.display()}{key}"
        )
        if row.body is not None:
            print(f"      {row.body.decode('utf-8', errors='replace')}")
    return 0


def utc_text(unix_ms: int) -> str:
    """``unix_ms`` as a readable UTC instant at millisecond precision:
    ``2026-12-02 03:35:05.123Z`` (the table's form; ``--json`` keeps unix ms)."""
    instant = datetime.fromtimestamp(unix_ms / 1000, tz=UTC)
    return instant.strftime("%Y-%m-%d %H:%M:%S.") + f"{unix_ms % 1000:03d}Z"


def _ls(args: argparse.Namespace) -> int:
    address = MailboxAddress.parse(args.address)
    source = None if args.sender is None else MailboxAddress.parse(args.sender)
    sql = (
        "SELECT message_id, topic, source_crew_id, source_agent_id, correlation_id, received_at, metadata"
        " FROM mailboxes WHERE mailbox_address = ?"
    )
    params: list[object] = [str(address)]
    if source is not None:
        sql += " AND source_crew_id = ?"
        params.append(str(source.crew_id) if source.crew_id is not None else "")
        if source.agent_id is not None:
            sql += " AND source_agent_id = ?"
            params.append(str(source.agent_id))
    sql += " ORDER BY seq"
    with _read_only(args.store) as conn:
        rows = [_held(tuple(row)) for row in conn.execute(sql, params)]
    if args.json:
        mailbox = endpoint_json(endpoint_of(address))
        del mailbox["name"]  # a mailbox row keeps no crew names: ls shows addresses only
        print(json.dumps({"mailbox": mailbox, "messages": rows}, ensure_ascii=False))
        return 0
    print(f"{address}: {len(rows)} held")
    for row in rows:
        print(f"  {row['received_at']}  {row['message_id']}  from {row['from']['address']}  {row['topic']}")
    return 0


def _held(row: tuple[Any, ...]) -> dict[str, Any]:
    message_id, topic, crew, agent, correlation_id, received_at, metadata = row
    if agent is not None:
        origin: dict[str, str] = {"kind": "agent", "id": f"{crew}/{agent}", "address": f"agent://{crew}/{agent}"}
    elif crew == "_system":
        origin = {"kind": "system", "id": "_system", "address": "_system"}
    else:
        origin = {"kind": "crew", "id": str(crew), "address": f"crew://{crew}"}
    try:
        parsed = json.loads(metadata)
    except (TypeError, ValueError) as exc:
        raise StoreError(f"the mailbox row of message {message_id} is unreadable (metadata: {exc})") from exc
    return {
        "message_id": message_id,
        "from": origin,
        "received_at": received_at,
        "topic": topic,
        "correlation_id": correlation_id,
        "metadata": parsed,
    }


def _verify(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    sender = _sender(args, parser, required=False)
    with _read_only(args.store) as conn:
        if sender is not None:
            senders = [sender]
        else:
            senders = [parse_sender(canonical_id=one) for one in known_senders(conn)]
        reports = [verify_history(conn, one) for one in senders]
    if args.json:
        print(
            json.dumps(
                [
                    {"sender": s.id, "ok": r.ok, "rows": r.rows, "first_bad": r.first_bad, "problem": r.problem}
                    for s, r in zip(senders, reports, strict=True)
                ]
            )
        )
    elif not senders:
        print(f"{args.store}: no sender has a sent history in this store: nothing to verify")
    else:
        for s, r in zip(senders, reports, strict=True):
            verdict = f"ok, {r.rows} row(s)" if r.ok else f"BAD at position {r.first_bad}: {r.problem}"
            print(f"{s.address}: {verdict}")
    return 0 if all(r.ok for r in reports) else 1
