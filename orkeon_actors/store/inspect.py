"""Looking into a store file without a runtime and without writing to it.

:class:`StoreInspector` opens the file **read-only** (``SQLITE_OPEN_READONLY``, ``PRAGMA
query_only``) and never takes the single-owner lock, so it can look at the store of a
running runtime: WAL readers never block the writer, and it sees the last committed
state. Each query returns plain rows (dicts of JSON-friendly values) that ``orkeon store``
prints as a table or as JSON. A store written by an older release may lack a table a
query reads; that query then returns no rows.

:func:`purge_store` is the one operation here that writes: it takes the store's lock
(``StoreLockedError`` while a runtime owns it) and runs the §11.4 purge, or with
``dry_run`` reports what the purge would delete and rolls back.
"""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime
from typing import Any

import apsw

from orkeon_actors.errors import StoreError, StoreVersionError
from orkeon_actors.store.config import PurgePolicy
from orkeon_actors.store.connection import StoreLock
from orkeon_actors.store.open_errors import typed_open_errors
from orkeon_actors.store.purge import PurgeReport, purge
from orkeon_actors.store.schema import SCHEMA_VERSION

__all__ = ["StoreInspector", "purge_store"]

Row = dict[str, Any]

_PREVIEW = 80


def _preview(payload: bytes | None) -> str:
    if payload is None:
        return ""
    text = bytes(payload).decode("utf-8", errors="replace")
    return text if len(text) <= _PREVIEW else text[: _PREVIEW - 1] + "…"


def _require_file(path: str) -> None:
    if not os.path.isfile(path):
        raise StoreError(f"no store file at {path}: give the path a runtime was started with (store=...)", path=path)


class StoreInspector:
    """Read-only queries over one store file. Use as a context manager, or ``close()``."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = os.fspath(path)
        _require_file(self.path)
        with typed_open_errors(self.path):
            try:
                self._conn = apsw.Connection(self.path, flags=apsw.SQLITE_OPEN_READONLY)
                self._conn.execute("PRAGMA query_only = ON")
                self._tables = {
                    str(r[0]) for r in self._conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")
                }
            except apsw.NotADBError as exc:
                raise StoreError(f"{self.path} is not a SQLite database ({exc})", path=self.path) from exc
        if "crew_snapshots" not in self._tables:
            self._conn.close()
            raise StoreVersionError(f"{self.path} is not an orkeon store (no crew_snapshots table)", path=self.path)

    def __enter__(self) -> StoreInspector:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._conn.close()

    def _rows(self, table: str, sql: str, params: tuple[Any, ...] = ()) -> list[Row]:
        if table not in self._tables:
            return []
        cursor = self._conn.execute(sql, params)
        try:
            names = [d[0] for d in cursor.getdescription()]
        except apsw.ExecutionCompleteError:
            return []
        return [dict(zip(names, row, strict=True)) for row in cursor]

    def crews(self, now: datetime | None = None) -> list[Row]:
        """Every crew the store knows: snapshots (Asleep, Failed, Active) with their
        pending waits, then crews known only by their outcome (Completed), by id; each with
        its name, mode and agents, and ``as_of`` / ``age_s``: when the runtime last committed
        that state and how many seconds before ``now`` (default: the system clock). A store
        holds committed states only: a running runtime's crew may have moved on since."""
        snapshots = self._rows(
            "crew_snapshots",
            "SELECT s.crew_id, s.snapshot, s.mode, s.state, s.snapshot_at, "
            "(SELECT count(*) FROM pending_waits w WHERE w.crew_id = s.crew_id) AS pending_waits "
            "FROM crew_snapshots s ORDER BY s.crew_id",
        )
        rows: list[Row] = []
        for row in snapshots:
            body = row.pop("snapshot")
            rows.append(
                {"crew_id": row["crew_id"], "name": _snapshot_name(body), **row, "agents": _agents(body)}
                | {"finished_at": None}
            )
        known = {r["crew_id"] for r in rows}
        for outcome in self._rows(
            "crew_outcomes", "SELECT crew_id, status, final_snapshot, finished_at FROM crew_outcomes ORDER BY crew_id"
        ):
            if outcome["crew_id"] in known:
                for row in rows:
                    if row["crew_id"] == outcome["crew_id"]:
                        row["finished_at"] = outcome["finished_at"]
                continue
            final = outcome["final_snapshot"]
            rows.append(
                {
                    "crew_id": outcome["crew_id"],
                    "name": _snapshot_name(final),
                    "mode": _snapshot_field(final, "mode"),
                    "state": outcome["status"],
                    "snapshot_at": None,
                    "pending_waits": 0,
                    "agents": _agents(final),
                    "finished_at": outcome["finished_at"],
                }
            )
        when = now or datetime.now(UTC)
        for row in rows:
            row["as_of"] = row["snapshot_at"] or row["finished_at"]
            row["age_s"] = None if row["as_of"] is None else _age_s(row["as_of"], when)
        return sorted(rows, key=lambda r: str(r["crew_id"]))

    def resolve(self, crew: str) -> list[str]:
        """The ids ``crew`` names: itself when the store knows that id, else every crew
        whose name (the one ``crews`` prints) it is."""
        rows = self.crews()
        if any(row["crew_id"] == crew for row in rows):
            return [crew]
        return [str(row["crew_id"]) for row in rows if row["name"] == crew]

    def waits(self) -> list[Row]:
        """Pending waits of sleeping crews, nearest deadline first (waits without one last)."""
        rows = self._rows(
            "pending_waits",
            "SELECT crew_id, kind, topic, target_mailbox, correlation_id, started_at, expires_at FROM pending_waits "
            "ORDER BY expires_at IS NULL, expires_at, wait_id",
        )
        return [
            {
                "crew_id": r["crew_id"],
                "kind": r["kind"],
                "target": r["topic"] or r["target_mailbox"] or r["correlation_id"],
                "started_at": r["started_at"],
                "expires_at": r["expires_at"],
            }
            for r in rows
        ]

    def mailboxes(self) -> list[Row]:
        """Every durably registered mailbox and how many messages it keeps."""
        registered = {
            r["address"]: r["registered_at"]
            for r in self._rows("mailbox_registry", "SELECT address, registered_at FROM mailbox_registry")
        }
        depths = {
            r["address"]: r["depth"]
            for r in self._rows(
                "mailboxes", "SELECT mailbox_address AS address, count(*) AS depth FROM mailboxes GROUP BY 1"
            )
        }
        return [
            {"address": a, "depth": depths.get(a, 0), "registered": a in registered}
            for a in sorted(set(registered) | set(depths))
        ]

    def outbox(self) -> list[Row]:
        """Outbox rows not yet dispatched (``Pending``) or given up on (``Failed``)."""
        rows = self._rows(
            "outbox",
            "SELECT message_id, state, topic, target_mailbox, source_crew_id, created_at, error FROM outbox "
            "WHERE state != 'Dispatched' ORDER BY seq",
        )
        return [{**r, "error": r.get("error")} for r in rows]

    def last_values(self) -> list[Row]:
        """Retained last values, by scope and key."""
        rows = self._rows(
            "last_values",
            "SELECT scope, key, topic, source_crew_id, published_at, payload FROM last_values ORDER BY scope, key",
        )
        return [{**{k: v for k, v in r.items() if k != "payload"}, "payload": _preview(r["payload"])} for r in rows]

    def show(self, crew_id: str) -> Row | None:
        """The crew's snapshot (or, for a finished crew, its outcome and final state) as
        JSON-friendly data; ``None`` for a crew the store does not know."""
        found = self._rows(
            "crew_snapshots",
            "SELECT crew_id, state, mode, schema_version, snapshot_at, snapshot FROM crew_snapshots WHERE crew_id = ?",
            (crew_id,),
        )
        outcome = self._rows(
            "crew_outcomes",
            "SELECT status, result, failure, final_snapshot, finished_at FROM crew_outcomes WHERE crew_id = ?",
            (crew_id,),
        )
        if not found and not outcome:
            return None
        shown: Row = {"crew_id": crew_id}
        if found:
            row = found[0]
            shown.update({k: row[k] for k in ("state", "mode", "schema_version", "snapshot_at")})
            shown["snapshot"] = json.loads(bytes(row["snapshot"]).decode())
            shown["pending_waits"] = [w for w in self.waits() if w["crew_id"] == crew_id]
        if outcome:
            o = outcome[0]
            shown["outcome"] = {
                "status": o["status"],
                "result": o["result"],
                "failure": None if o["failure"] is None else json.loads(o["failure"]),
                "finished_at": o["finished_at"],
            }
            if not found and o["final_snapshot"] is not None:
                shown["snapshot"] = json.loads(o["final_snapshot"])
        return shown


def _snapshot_field(body: bytes | str | None, field: str) -> Any:
    if body is None:
        return None
    try:
        data = json.loads(body if isinstance(body, str) else bytes(body).decode())
    except ValueError:
        return None
    return data.get(field) if isinstance(data, dict) else None


def _agents(body: bytes | str | None) -> list[str]:
    agents = _snapshot_field(body, "agents")
    if not isinstance(agents, list):
        return []
    return [str(agent.get("agent_id")) for agent in agents if isinstance(agent, dict)]


def _age_s(stamp: str, now: datetime) -> float | None:
    try:
        at = datetime.fromisoformat(stamp)
    except ValueError:
        return None
    at = at if at.tzinfo is not None else at.replace(tzinfo=UTC)
    return round((now - at).total_seconds(), 3)


def _snapshot_name(body: bytes | str | None) -> Any:
    return _snapshot_field(body, "name")


def purge_store(path: str | os.PathLike[str], now: datetime, policy: PurgePolicy, *, dry_run: bool) -> PurgeReport:
    """Run the §11.4 purge on the store at ``path`` as of ``now`` (rolled back with
    ``dry_run``). Takes the store's lock: raises ``StoreLockedError`` while a runtime owns
    it, and ``StoreVersionError`` for a store this release has not migrated yet."""
    text = os.fspath(path)
    _require_file(text)
    with typed_open_errors(text):
        lock = StoreLock(text, 0.0)
        try:
            conn = apsw.Connection(text)
            try:
                found = conn.execute("PRAGMA user_version").fetchone()
                version = int(found[0]) if found is not None else 0
                if version != SCHEMA_VERSION:
                    raise StoreVersionError(
                        f"{text} has schema version {version}, this release writes {SCHEMA_VERSION}: open it once "
                        "with ok.Runtime.start(store=...) to migrate it, then purge",
                        path=text,
                        found=version,
                        known=SCHEMA_VERSION,
                    )
                conn.execute("BEGIN IMMEDIATE")
                try:
                    report, _ = purge(conn, now, policy)
                except BaseException:
                    conn.execute("ROLLBACK")
                    raise
                conn.execute("ROLLBACK" if dry_run else "COMMIT")
            finally:
                conn.close()
        finally:
            lock.release()
    return report
