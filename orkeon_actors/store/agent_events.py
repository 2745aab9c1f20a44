"""The agents' events in the store: what ``orkeon studio --store`` shows in its agent view.

:class:`AgentEventRecorder` subscribes to a durable runtime's journal
(:class:`~orkeon_actors.model.agent_events.AgentEventJournal`) and writes each event, in the
JSON of :mod:`orkeon_actors.wire.agent_events`, to the ``agent_events`` table through the
store's writer: the agent loop only appends the event to the recorder's buffer; the first
event into an empty buffer enqueues one write request (:meth:`StoreWriter.post`, under its
own key, so it never holds up a post or a wake) that encodes and inserts everything
buffered by the time the writer runs it, in one ``executemany``. So a burst of events costs
the writer one request, and the JSON is built on the writer's thread, not the crew's.

Guarantees and limits:

* **Bounded.** The table keeps the last ``keep`` events (10,000 by default, the journal's
  own size): every ``keep // 10`` writes, one statement deletes the older rows.
* **An observer's record, not a log of record.** An event is written after the agent did
  what it says; a crash between the two loses it (the crew's own state is in its
  snapshot), and a failed write is logged, never raised into the agent loop.
* **One row per event**, ``id`` increasing in commit order across runs; ``run`` tells the
  runtime that wrote it apart, since call ids (``call-1``...) restart with each runtime.

:func:`read_agent_events` reads them back for a read-only view.
"""

from __future__ import annotations

import json
import secrets
import threading
from collections.abc import Callable
from typing import Any, Final

import apsw
from loguru import logger

from orkeon_actors.model.agent_events import AgentEvent, AgentEventJournal
from orkeon_actors.store.writer import StoreWriter
from orkeon_actors.wire.agent_events import encode_agent_event

__all__ = ["DEFAULT_KEEP", "SCHEMA", "AgentEventRecorder", "read_agent_events"]

DEFAULT_KEEP: Final = 10_000
"""How many agent events a store keeps by default."""

SCHEMA: Final = """
CREATE TABLE agent_events (
    id       INTEGER PRIMARY KEY AUTOINCREMENT,
    run      TEXT NOT NULL,
    crew_id  TEXT NOT NULL,
    agent_id TEXT NOT NULL,
    event    TEXT NOT NULL
);
"""
"""The migration that adds the table (``store/schema.py``)."""

_INSERT = "INSERT INTO agent_events (run, crew_id, agent_id, event) VALUES (?, ?, ?, ?)"
_TRIM = "DELETE FROM agent_events WHERE id <= (SELECT max(id) FROM agent_events) - ?"
_KEY = "agent_events"


class AgentEventRecorder:
    """Writes a journal's events to the store (see the module docstring)."""

    def __init__(self, writer: StoreWriter, *, keep: int = DEFAULT_KEEP) -> None:
        if keep < 1:
            raise ValueError(f"a store keeps at least one agent event, not {keep}")
        self.writer = writer
        self.keep = keep
        self.run = secrets.token_hex(4)
        """This runtime's tag on its rows."""
        self._written = 0
        self._trim_every = max(1, keep // 10)
        self._unsubscribe: Callable[[], None] | None = None
        self._lock = threading.Lock()
        self._buffer: list[AgentEvent] = []

    def attach(self, journal: AgentEventJournal) -> AgentEventRecorder:
        """Record ``journal``'s history so far and every event from now on."""
        history, self._unsubscribe = journal.subscribe(self.record)
        for event in history:
            self.record(event)
        return self

    def detach(self) -> None:
        """Stop recording (before the writer stops); idempotent. What is buffered is
        still written by the request already queued."""
        unsubscribe, self._unsubscribe = self._unsubscribe, None
        if unsubscribe is not None:
            unsubscribe()

    def record(self, event: AgentEvent) -> None:
        """Buffer ``event``; the first into an empty buffer queues the write of the lot."""
        with self._lock:
            self._buffer.append(event)
            if len(self._buffer) > 1:
                return
        self.writer.post(self._write_buffered, on_error=_log_failure, key=_KEY)

    def _write_buffered(self, conn: apsw.Connection) -> None:
        """The writer's request: insert what is buffered now (and trim now and then)."""
        with self._lock:
            events, self._buffer = self._buffer, []
        conn.executemany(
            _INSERT,
            [(self.run, e.crew_id, e.agent_id, json.dumps(encode_agent_event(e), ensure_ascii=False)) for e in events],
        )
        before, self._written = self._written, self._written + len(events)
        if before // self._trim_every != self._written // self._trim_every:
            conn.execute(_TRIM, (self.keep,))


def _log_failure(error: BaseException) -> None:
    logger.bind(component="orkeon_actors.store").warning("an agent event was not stored: {!r}", error)


def read_agent_events(conn: apsw.Connection, after: int, limit: int = DEFAULT_KEEP) -> tuple[list[dict[str, Any]], int]:
    """The stored events after row ``after`` (oldest first, at most ``limit``), each the
    wire JSON with its ``call_id`` prefixed by its run (``run/call-1``) so that calls of
    different runs never merge, and ``seq`` the row's id; and the last row id read (``after``
    when there is none). A store without the table (an older release's) has none."""
    found = conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'agent_events'").fetchone()
    if found is None:
        return [], after
    events: list[dict[str, Any]] = []
    last = after
    for row_id, run, text in conn.execute(
        "SELECT id, run, event FROM agent_events WHERE id > ? ORDER BY id LIMIT ?", (after, limit)
    ):
        last = int(row_id)
        event = json.loads(text)
        if isinstance(event, dict):
            event["seq"] = last
            if "call_id" in event:
                event["call_id"] = f"{run}/{event['call_id']}"
            events.append(event)
    return events, last
