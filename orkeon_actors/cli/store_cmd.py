"""``orkeon store PATH ...``: look into a store without writing SQL.

``crews``, ``waits``, ``mailboxes``, ``outbox``, ``last-values`` and ``show CREW`` (an id
or the name ``crews`` prints) open
the file read-only (safe beside a running runtime, see
:mod:`orkeon_actors.store.inspect`); ``purge`` applies the §11.4 policy (``--dry-run``
only reports what it would delete). A table by default, ``--json`` for scripts.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from typing import Any

import attrs

from orkeon_actors.model.clock import SystemClock

__all__ = ["VIEWS", "add_store_parser", "run_store"]

VIEWS = ("crews", "waits", "mailboxes", "outbox", "last-values", "show", "purge")


def add_store_parser(sub: Any, common: argparse.ArgumentParser) -> None:
    store = sub.add_parser(
        "store",
        parents=[common],
        help="look into a store file (read-only): crews, waits, mailboxes, outbox, last values; purge",
        description="Look into a store file without writing SQL. Every view but purge opens the file read-only.",
    )
    store.add_argument("path", metavar="PATH", help="the store file (what Runtime.start(store=...) was given)")
    store.add_argument("view", choices=VIEWS, help="what to show")
    store.add_argument("crew", nargs="?", metavar="CREW", help="the crew id (show only)")
    store.add_argument("--json", action="store_true", help="print JSON instead of a table")
    store.add_argument("--dry-run", action="store_true", help="purge: report what would be deleted, delete nothing")


def run_store(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    """Print the view; 0 on success, 1 when ``show`` finds no such crew."""
    # Here, not at the top: building the CLI's parser must not load the store.
    from orkeon_actors.store.config import PurgePolicy
    from orkeon_actors.store.inspect import StoreInspector, purge_store

    if args.view == "show" and not args.crew:
        parser.error("orkeon store PATH show needs the crew id: orkeon store PATH show CREW")
    if args.view != "show" and args.crew:
        parser.error(f"orkeon store PATH {args.view} takes no crew id (only show does)")
    if args.view == "purge":
        report = purge_store(args.path, SystemClock().now(), PurgePolicy(), dry_run=args.dry_run)
        figures = attrs.asdict(report)
        if args.json:
            print(json.dumps({"dry_run": args.dry_run, **figures, "total": report.total}, indent=2))
        else:
            verb = "would delete" if args.dry_run else "deleted"
            print(f"purge {verb} {report.total} row(s) in {args.path}")
            print(render_table([{"what": k, "rows": v} for k, v in figures.items()]))
        return 0
    with StoreInspector(args.path) as store:
        if args.view == "show":
            ids = store.resolve(args.crew)  # an id, or the name `crews` prints
            if len(ids) > 1:
                print(f"{len(ids)} crews are named {args.crew!r} in {args.path}: show one by id ({', '.join(ids)})")
                return 1
            shown = store.show(ids[0]) if ids else None
            if shown is None:
                print(f"no crew {args.crew!r} in {args.path}: `orkeon store {args.path} crews` lists them")
                return 1
            print(json.dumps(shown, indent=2, ensure_ascii=False))
            return 0
        rows = {
            "crews": store.crews,
            "waits": store.waits,
            "mailboxes": store.mailboxes,
            "outbox": store.outbox,
            "last-values": store.last_values,
        }[args.view]()
    if args.json:
        print(json.dumps(rows, indent=2, ensure_ascii=False))
        return 0
    if args.view == "crews":  # the states are the store's, as of each crew's last commit
        columns = ("crew_id", "name", "mode", "state", "agents", "pending_waits", "as_of", "age_s")
        rows = [{k: row[k] for k in columns} for row in rows]
        print("states as last committed to the store (age_s: seconds since); a running runtime's crews may be ahead")
    print(render_table(rows, empty=f"no {args.view}"))
    return 0


def render_table(rows: Sequence[dict[str, Any]], empty: str = "nothing") -> str:
    """Rows as aligned columns (``-`` for a missing value)."""
    if not rows:
        return f"({empty})"
    columns = list(rows[0])
    cells = [[_cell(row.get(c)) for c in columns] for row in rows]
    widths = [max(len(c), *(len(line[i]) for line in cells)) for i, c in enumerate(columns)]
    lines = ["  ".join(c.ljust(w) for c, w in zip(columns, widths, strict=True)).rstrip()]
    lines += ["  ".join(v.ljust(w) for v, w in zip(line, widths, strict=True)).rstrip() for line in cells]
    return "\n".join(lines)


def _cell(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, list):
        return ", ".join(str(item) for item in value) or "-"
    return str(value)
