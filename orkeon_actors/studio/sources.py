"""What the Studio shows, read from a live runtime or from a store file.

Both sources answer the same questions as JSON-ready dicts (the shape the page reads):

* :meth:`overview`: ``{"mode": "live"|"store", "read_only", "now", "crews": [...],
  "waits": [...], "mailboxes": [...], "outbox": {...}, "acl": {...}, "metrics": {...}}``;
* :meth:`snapshot`: one crew's snapshot as a JSON tree (``None`` if there is none);
* :meth:`post`: post a message as ``client://studio`` (live runtimes started with posting
  allowed only; a store file is always read-only).

:class:`StoreFileSource` opens the SQLite file **read-only** with its own connection per
read: it never takes the store's writer lock, so it can watch a store another process is
running. :class:`LiveSource` combines the running hub (the tap's waits), the crew
supervisors registered on the runtime (``runtime.supervisors``) and, on a durable
runtime, the same store reads for sleeping crews.

Visibility follows the ACL (spec §10.2.1): the Studio is the external peer
``client:studio``; a crew is shown, and its traffic streamed, only if the runtime's ACL
would let that crew post to ``client://studio``. Without an ACL stage everything is shown.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Protocol

import apsw
import pykka

from orkeon_actors.acl.policy import CrewLinkPolicy
from orkeon_actors.acl.registry import AclRegistry
from orkeon_actors.acl.stage import AclMiddleware
from orkeon_actors.crew.crew_actor import query_crew
from orkeon_actors.crew.snapshot import to_dict
from orkeon_actors.errors import EventHubError, InvalidArgumentError
from orkeon_actors.lifecycle.ports import LifecycleState
from orkeon_actors.model.address import MailboxAddress
from orkeon_actors.model.ids import CrewId, MessageId
from orkeon_actors.model.message import Message
from orkeon_actors.store.agent_events import read_agent_events
from orkeon_actors.store.inspect import StoreInspector
from orkeon_actors.studio.feed import rfc3339
from orkeon_actors.studio.tap import StudioTap
from orkeon_actors.wire.agent_events import encode_agent_event

if TYPE_CHECKING:
    from orkeon_actors.runtime import Runtime

__all__ = ["STUDIO_CLIENT", "LiveSource", "StoreFileSource", "StudioSource", "Visibility"]

STUDIO_CLIENT = "studio"
"""The Studio's peer name: it is ``client://studio``, ``client:studio`` in ``links:``."""

_LIST_LIMIT = 500
_STORED_KINDS = {"OnTopic": "on_topic", "OnMailbox": "on_mailbox", "OnReply": "on_reply"}
"""``pending_waits.kind`` as stored (spec §8.3) -> the hub's wait kinds."""


class StudioSource(Protocol):
    """What the server reads (see the module docstring)."""

    read_only: bool

    def overview(self) -> dict[str, Any]: ...

    def snapshot(self, crew_id: str) -> dict[str, Any] | None: ...

    def post(self, to: str, payload: object) -> dict[str, Any]: ...

    def visible(self, item: dict[str, Any]) -> bool: ...

    def agent_events(self, after: int) -> dict[str, Any]: ...


class Visibility:
    """Which crews the Studio may see: those the ACL lets post to ``client://studio``."""

    def __init__(self, policy: CrewLinkPolicy | None) -> None:
        self.policy = policy
        self._studio = MailboxAddress.parse(f"client://{STUDIO_CLIENT}")

    def crew(self, crew_id: str | None) -> bool:
        if self.policy is None or crew_id is None:
            return True
        try:
            crew = CrewId(crew_id)
        except EventHubError:
            return False
        if crew.is_system:
            return True
        probe = Message(MessageId.new(), "_system.post", crew, datetime.now(UTC), target_mailbox=self._studio)
        return self.policy.decide(probe, "post").allowed

    def event(self, item: dict[str, Any]) -> bool:
        """An event is shown when every crew it names is visible."""
        return self.crew(item.get("crew")) and self.crew(item.get("to_crew"))


# -- reading a store file ---------------------------------------------------------------------


def _open_read_only(path: str) -> apsw.Connection:
    if not os.path.exists(path):
        raise InvalidArgumentError(f"no store at {path!r}: pass the path of a store file a runtime created")
    return apsw.Connection(path, flags=apsw.SQLITE_OPEN_READONLY)


def _rows(conn: apsw.Connection, sql: str, params: Iterable[object] = ()) -> list[tuple[Any, ...]]:
    return list(conn.execute(sql, tuple(params)))


def _iso_z(text: str | None) -> str | None:
    if text is None:
        return None
    return rfc3339(datetime.fromisoformat(text))


class StoreFileSource:
    """Reads a store file read-only (see the module docstring)."""

    read_only = True

    def __init__(self, path: str | os.PathLike[str], visibility: Visibility | None = None) -> None:
        self.path = os.fspath(path)
        self.visibility = visibility or Visibility(None)
        _open_read_only(self.path).close()  # fail now, with a typed error, if it is not there
        StoreInspector(self.path).close()  # and as `orkeon store` does if it is not a store

    def visible(self, item: dict[str, Any]) -> bool:
        return self.visibility.event(item)

    def stored_crews(self, conn: apsw.Connection) -> list[dict[str, Any]]:
        """Every crew the store knows, newest first: its last committed snapshot (state
        ``Asleep`` or ``Failed``, as of ``as_of``), then crews known only by their outcome
        (``Completed`` or ``Failed``), with the name, mode and agents of their final snapshot."""
        crews = []
        for crew_id, raw, mode, snapshot_at, state in _rows(
            conn,
            "SELECT crew_id, snapshot, mode, snapshot_at, state FROM crew_snapshots ORDER BY snapshot_at DESC LIMIT ?",
            (_LIST_LIMIT,),
        ):
            name, agents = _name_and_agents(raw)
            crews.append(_crew_dict(crew_id, name, state, mode, agents, _iso_z(snapshot_at)))
        if _has_table(conn, "crew_outcomes"):
            known = {crew["id"] for crew in crews}
            for crew_id, status, final, finished_at in _rows(
                conn,
                "SELECT crew_id, status, final_snapshot, finished_at FROM crew_outcomes "
                "ORDER BY finished_at DESC LIMIT ?",
                (_LIST_LIMIT,),
            ):
                if crew_id in known:
                    continue
                name, agents = _name_and_agents(final.encode() if isinstance(final, str) else final or b"{}")
                mode = _snapshot_mode(final)
                crews.append(_crew_dict(crew_id, name, status, mode, agents, _iso_z(finished_at)))
        return crews

    def stored_waits(self, conn: apsw.Connection) -> list[dict[str, Any]]:
        waits = []
        for wait_id, crew_id, kind, topic, mailbox, correlation, started_at, expires_at in _rows(
            conn,
            "SELECT wait_id, crew_id, kind, topic, target_mailbox, correlation_id, started_at, expires_at "
            "FROM pending_waits ORDER BY expires_at IS NULL, expires_at LIMIT ?",
            (_LIST_LIMIT,),
        ):
            waits.append(
                {
                    "wait_id": wait_id,
                    "crew": crew_id,
                    "agent": None,
                    "kind": _STORED_KINDS.get(kind, kind),
                    "target": topic or mailbox or correlation,
                    "started_at": _iso_z(started_at),
                    "expires_at": _iso_z(expires_at),
                    "asleep": True,
                }
            )
        return waits

    def overview(self) -> dict[str, Any]:
        conn = _open_read_only(self.path)
        try:
            crews = [c for c in self.stored_crews(conn) if self.visibility.crew(c["id"])]
            waits = [w for w in self.stored_waits(conn) if self.visibility.crew(w["crew"])]
            mailboxes = [
                {"address": address, "depth": depth}
                for address, depth in _rows(
                    conn,
                    "SELECT r.address, (SELECT count(*) FROM mailboxes m WHERE m.mailbox_address = r.address) "
                    "FROM mailbox_registry r ORDER BY r.address LIMIT ?",
                    (_LIST_LIMIT,),
                )
            ]
            outbox = {state: count for state, count in _rows(conn, "SELECT state, count(*) FROM outbox GROUP BY state")}
        finally:
            conn.close()
        return {
            "mode": "store",
            "read_only": True,
            "source": self.path,
            "now": rfc3339(datetime.now(UTC)),
            "crews": crews,
            "waits": waits,
            "mailboxes": mailboxes,
            "outbox": outbox,
            "acl": {"nodes": [], "edges": []},
            # each wait once, by kind: the page's pending-waits metric is their sum
            "metrics": {"asleep": sum(1 for c in crews if c["state"] == "Asleep"), "pending_waits": _by_kind(waits)},
        }

    def snapshot(self, crew_id: str) -> dict[str, Any] | None:
        if not self.visibility.crew(crew_id):
            return None
        conn = _open_read_only(self.path)
        try:
            rows = _rows(conn, "SELECT snapshot FROM crew_snapshots WHERE crew_id = ?", (crew_id,))
        finally:
            conn.close()
        if not rows:
            return None
        loaded: dict[str, Any] = json.loads(bytes(rows[0][0]))
        return loaded

    def agent_events(self, after: int) -> dict[str, Any]:
        """The agent events the store kept after row ``after``
        (:func:`~orkeon_actors.store.agent_events.read_agent_events`), of visible crews;
        ``kept`` is false for a store of a release that kept none."""
        conn = _open_read_only(self.path)
        try:
            kept = _has_table(conn, "agent_events")
            events, last = read_agent_events(conn, after)
        finally:
            conn.close()
        shown = [event for event in events if self.visibility.crew(str(event.get("crew_id")))]
        return {"events": shown, "last_seq": last, "now": rfc3339(datetime.now(UTC)), "kept": kept}

    def post(self, to: str, payload: object) -> dict[str, Any]:
        raise InvalidArgumentError(
            "a Studio on a store file is read-only: attach it to the running runtime "
            "(Runtime.start(studio=PORT, studio_post=True)) to post"
        )


def _has_table(conn: apsw.Connection, table: str) -> bool:
    return bool(_rows(conn, "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", (table,)))


def _crew_dict(
    crew_id: str, name: str | None, state: str, mode: str | None, agents: list[str], as_of: str | None
) -> dict[str, Any]:
    """A crew as the page shows it; ``as_of`` is when the store last committed its state
    (``snapshot_at`` is kept as the same value for older pages)."""
    return {
        "id": crew_id,
        "name": name,
        "state": state,
        "mode": mode,
        "agents": agents,
        "as_of": as_of,
        "snapshot_at": as_of,
    }


def _snapshot_mode(final: str | bytes | None) -> str | None:
    if final is None:
        return None
    try:
        data = json.loads(final)
    except ValueError:
        return None
    mode = data.get("mode") if isinstance(data, dict) else None
    return mode if isinstance(mode, str) else None


def _name_and_agents(raw: bytes) -> tuple[str | None, list[str]]:
    try:
        data = json.loads(bytes(raw))
    except ValueError:
        return None, []
    agents = [str(agent.get("agent_id")) for agent in data.get("agents", ()) if isinstance(agent, dict)]
    name = data.get("name")
    return (name if isinstance(name, str) else None), agents


def _by_kind(waits: Iterable[dict[str, Any]]) -> dict[str, int]:
    counts = {"on_topic": 0, "on_mailbox": 0, "on_reply": 0}
    for wait in waits:
        counts[wait["kind"]] = counts.get(wait["kind"], 0) + 1
    return counts


# -- reading a live runtime -------------------------------------------------------------------


def acl_stage(runtime: Runtime) -> AclMiddleware | None:
    """The runtime's ACL stage, if it registered one."""
    for stage in runtime.middleware:
        if isinstance(stage, AclMiddleware):
            return stage
    return None


def acl_graph(registry: AclRegistry | None) -> dict[str, Any]:
    """The ``links:`` declarations as a graph: one node per crew name (and peer), one
    edge per link with its direction and allowed topics."""
    if registry is None:
        return {"nodes": [], "edges": []}
    snap = registry.snapshot
    nodes = {name: {"id": name, "declared": snap.declaration_of(name).declared} for name in snap.ids}
    edges = []
    for name, block in snap.declarations.items():
        for link in block.links:
            nodes.setdefault(link.to, {"id": link.to, "declared": False})
            edges.append(
                {
                    "from": name,
                    "to": link.to,
                    "direction": link.direction.value,
                    "topics": list(link.allowed_topics),
                }
            )
    return {"nodes": sorted(nodes.values(), key=lambda n: n["id"]), "edges": edges}


class LiveSource:
    """Reads a running runtime (see the module docstring)."""

    def __init__(self, runtime: Runtime, tap: StudioTap, *, allow_post: bool = False) -> None:
        self.runtime = runtime
        self.tap = tap
        self.read_only = not allow_post
        stage = acl_stage(runtime)
        self.registry = None if stage is None else stage.registry
        self.visibility = Visibility(None if stage is None else stage.policy)
        path = getattr(getattr(runtime.hub, "config", None), "path", None)
        self.store = None if path is None else StoreFileSource(path, self.visibility)
        self._described: dict[str, tuple[str | None, str, list[str]]] = {}
        self._client: Any = None

    def visible(self, item: dict[str, Any]) -> bool:
        return self.visibility.event(item)

    def _describe_live(self, crew_id: CrewId, ref: Any) -> tuple[str | None, str, list[str]]:
        """Name, mode and agents of a live crew, asked once (they do not change)."""
        known = self._described.get(str(crew_id))
        if known is None and ref is not None:
            try:
                snap = query_crew(ref, "snapshot", timeout=1.0)
            except (pykka.Timeout, pykka.ActorDeadError):  # busy or stopping: no details this round
                return None, "", []
            known = (snap.name, snap.mode, [str(agent.agent_id) for agent in snap.agents])
            self._described[str(crew_id)] = known
        return known or (None, "", [])

    def crew_states(self) -> dict[str, LifecycleState]:
        """Every visible crew's state: the store's (asleep, failed) overridden by the
        supervisors' (live, and finished ones they remember)."""
        states: dict[str, LifecycleState] = {}
        if self.store is not None:
            conn = _open_read_only(self.store.path)
            try:
                for crew_id, state in _rows(conn, "SELECT crew_id, state FROM crew_snapshots LIMIT ?", (_LIST_LIMIT,)):
                    states[crew_id] = LifecycleState(state)
            finally:
                conn.close()
        for supervisor in list(self.runtime.supervisors):
            try:
                live = supervisor.crews()
            except pykka.ActorDeadError:  # stopping right now: it leaves runtime.supervisors next
                continue
            states.update((str(crew), state) for crew, state in live.items())
        return {crew: state for crew, state in states.items() if self.visibility.crew(crew)}

    def overview(self) -> dict[str, Any]:
        crews: dict[str, dict[str, Any]] = {}
        waits: list[dict[str, Any]] = []
        mailboxes: list[dict[str, Any]] = []
        outbox: dict[str, int] = {}
        if self.store is not None:
            stored = self.store.overview()
            crews = {crew["id"]: crew for crew in stored["crews"]}
            waits = stored["waits"]
            mailboxes, outbox = stored["mailboxes"], stored["outbox"]
        asleep = 0
        for supervisor in list(self.runtime.supervisors):
            for crew_id, state in supervisor.crews().items():
                if not self.visibility.crew(str(crew_id)):
                    continue
                entry = crews.setdefault(str(crew_id), {"id": str(crew_id)})
                entry["state"] = state.value
                entry["as_of"] = None  # the supervisor's state is the live one, not a stored one
                if state.value in ("Active", "Snapshotting", "Activating"):
                    name, mode, agents = self._describe_live(crew_id, supervisor.ref(crew_id))
                    entry.setdefault("name", name)
                    entry["mode"] = entry.get("mode") or mode
                    entry["agents"] = entry.get("agents") or agents
            asleep += supervisor.stats.asleep
        live_waits = [_wait_dict(info) for info in self.tap.waits() if self.visibility.crew(str(info.crew_id))]
        # a woken crew's stored waits stay until its next snapshot: only the asleep ones count
        waits = [wait for wait in waits if crews.get(wait["crew"], {}).get("state") == "Asleep"]
        pending = dict(self.runtime.hub.pending_waits())  # the live waits; the asleep crews' are added
        for kind, count in _by_kind(waits).items():
            pending[kind] = pending.get(kind, 0) + count
        return {
            "mode": "live",
            "read_only": self.read_only,
            "source": repr(self.runtime.hub),
            "now": rfc3339(self.runtime.clock.now()),
            "crews": sorted(crews.values(), key=lambda c: c["id"]),
            "waits": live_waits + waits,
            "mailboxes": mailboxes,
            "outbox": outbox,
            "acl": acl_graph(self.registry),
            "metrics": {"asleep": asleep, "pending_waits": pending},
        }

    def agent_events(self, after: int) -> dict[str, Any]:
        """The runtime's agent events after sequence number ``after`` (its journal keeps the
        most recent ones: a page that attaches late sees what happened before), of visible
        crews, in the JSON of :mod:`orkeon_actors.wire.agent_events`."""
        journal = self.runtime.agent_events
        events = [event for event in journal.recent() if event.seq > after]
        last = events[-1].seq if events else after
        shown = [encode_agent_event(event) for event in events if self.visibility.crew(event.crew_id)]
        return {"events": shown, "last_seq": last, "now": rfc3339(self.runtime.clock.now()), "kept": True}

    def snapshot(self, crew_id: str) -> dict[str, Any] | None:
        if not self.visibility.crew(crew_id):
            return None
        for supervisor in list(self.runtime.supervisors):
            ref = supervisor.ref(crew_id)
            if ref is not None:
                return to_dict(query_crew(ref, "snapshot", timeout=2.0))
        return None if self.store is None else self.store.snapshot(crew_id)

    def post(self, to: str, payload: object) -> dict[str, Any]:
        if self.read_only:
            raise InvalidArgumentError("posting from the Studio is off: start it with studio_post=True (--allow-post)")
        if self._client is None:
            crew = self.registry.register_client(STUDIO_CLIENT) if self.registry is not None else CrewId(STUDIO_CLIENT)
            self._client = self.runtime.hub.bind(crew)
        sent = self._client.post(to, payload)
        return {"message_id": str(sent.id), "to": str(sent.target_mailbox)}


def _wait_dict(info: Any) -> dict[str, Any]:
    return {
        "wait_id": info.wait_id,
        "crew": str(info.crew_id),
        "agent": None if info.agent_id is None else str(info.agent_id),
        "kind": info.kind,
        "target": info.target,
        "started_at": rfc3339(info.started_at),
        "expires_at": None if info.expires_at is None else rfc3339(info.expires_at),
        "asleep": False,
    }
