"""The SQLite adapter of the lifecycle's indexes (Orkeon EventHub & Crew Lifecycle
specification, §7.2, §7.3, §11.1): what wakes a sleeping crew
(:class:`SqliteWakeIndex`: ``pending_waits``, ``sleeping_cursors``, ``mailboxes``,
``cursor_events``), the finite waits by expiry (:class:`SqliteExpiryIndex`), and
:class:`SqliteLifecycleBackend`, the durable hub with its lifecycle stores.

Reads run on the calling thread through the hub's reader pool; writes are queued on
the hub's writer, in order with every other write (a wake's read of kept events comes
after every keeping write queued before it).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import Final

import apsw
from loguru import logger

from orkeon_actors.crew.handover import CursorFilter
from orkeon_actors.errors import HubStoppedError, StoreWriteError
from orkeon_actors.hub.waiter import Waiter
from orkeon_actors.lifecycle.ports import KeptEvents
from orkeon_actors.model.address import MailboxAddress
from orkeon_actors.model.ids import CorrelationId, CrewId
from orkeon_actors.model.message import FrozenMap, Message
from orkeon_actors.store import cursor_events
from orkeon_actors.store.codec import format_time
from orkeon_actors.store.crew_states import SqliteCrewStateStore
from orkeon_actors.store.durable_hub import SqliteEventHub
from orkeon_actors.store.outcome_book import OutcomeBook
from orkeon_actors.store.reader import ReaderPool
from orkeon_actors.store.schema import ASLEEP_COUNT_SQL
from orkeon_actors.store.write_queue import crew_key

__all__ = ["WINDOW_SQL", "SqliteExpiryIndex", "SqliteLifecycleBackend", "SqliteWakeIndex"]

WINDOW_SQL: Final = (
    "SELECT expires_at, wait_id, crew_id FROM pending_waits WHERE expires_at IS NOT NULL "
    "AND (expires_at, wait_id) > (?, ?) AND expires_at <= ? ORDER BY expires_at, wait_id LIMIT ?"
)
"""The next window of expiries after ``(expires_at, wait_id)``, up to a time, at most N rows."""

_IDS_PER_QUERY: Final = 500
"""Wait ids checked per query (below SQLite's host parameter limit)."""

_PATTERNS = (
    "SELECT topic, count(*) FROM (SELECT crew_id, topic FROM pending_waits WHERE kind = 'OnTopic' "
    "UNION SELECT crew_id, topic FROM sleeping_cursors) GROUP BY topic"
)
_KEPT_FOR_PARKED_WAITS = """
SELECT DISTINCT e.crew_id FROM cursor_events e WHERE EXISTS (
    SELECT 1 FROM pending_waits w WHERE w.crew_id = e.crew_id AND w.kind = 'OnTopic'
    AND w.topic || char(10) || coalesce(w.metadata_match, '{}') = e.cursor_key)
"""


def _metadata(text: object) -> FrozenMap:
    value = json.loads(str(text)) if text is not None else {}
    return FrozenMap({str(k): str(v) for k, v in value.items()} if isinstance(value, dict) else {})


def _marks(values: Sequence[object]) -> str:
    return ", ".join("?" * len(values))


class SqliteWakeIndex:
    """The :class:`~orkeon_actors.lifecycle.ports.WakeIndex` of a durable hub."""

    def __init__(self, hub: SqliteEventHub) -> None:
        self.hub = hub

    def topic_patterns(self) -> dict[str, int]:
        return {str(topic): int(count) for topic, count in self.hub.readers.query(_PATTERNS)}

    def asleep_count(self) -> int:
        """The crews with pending waits: one row the store's triggers keep (schema
        version 8), not a scan of the waits."""
        [(asleep,)] = self.hub.readers.query(ASLEEP_COUNT_SQL)
        return int(asleep)

    def has_pending_waits(self, crew_id: CrewId) -> bool:
        return bool(self.hub.readers.query("SELECT 1 FROM pending_waits WHERE crew_id = ? LIMIT 1", (str(crew_id),)))

    def crews_to_wake_at_boot(self) -> list[CrewId]:
        readers = self.hub.readers
        kept = readers.query("SELECT DISTINCT m.mailbox_address FROM mailboxes m")
        crews = {MailboxAddress.parse(str(a)).crew_id for (a,) in kept}
        crews.update(CrewId(str(c)) for (c,) in readers.query(_KEPT_FOR_PARKED_WAITS))
        return [CrewId(c) for c in sorted(c for c in crews if c is not None)]

    def topic_waits(self, patterns: Sequence[str]) -> list[tuple[CrewId, str, FrozenMap | None]]:
        rows = self.hub.readers.query(
            f"SELECT DISTINCT crew_id, topic, metadata_match FROM pending_waits WHERE kind = 'OnTopic' "
            f"AND topic IN ({_marks(patterns)})",
            tuple(patterns),
        )
        return [(CrewId(str(c)), str(t), None if m is None else _metadata(m)) for c, t, m in rows]

    def sleeping_cursors(self, patterns: Sequence[str]) -> list[tuple[CrewId, str, str, FrozenMap]]:
        rows = self.hub.readers.query(
            f"SELECT crew_id, cursor_key, topic, metadata_match FROM sleeping_cursors WHERE topic IN "
            f"({_marks(patterns)})",
            tuple(patterns),
        )
        return [(CrewId(str(c)), str(k), str(t), _metadata(m)) for c, k, t, m in rows]

    def waits_on_reply(self, crew_id: CrewId, correlation_id: CorrelationId | None) -> bool:
        rows = self.hub.readers.query(
            "SELECT 1 FROM pending_waits WHERE crew_id = ? AND correlation_id = ? LIMIT 1",
            (str(crew_id), str(correlation_id)),
        )
        return bool(rows)

    def cursor_key(self, cursor: CursorFilter) -> str:
        return cursor_events.cursor_key(*cursor)

    def keep_event(self, crew_id: CrewId, keys: Sequence[str], message: Message) -> None:
        if not keys:
            return
        crew, targets, limit = str(crew_id), tuple(keys), cursor_events.MAX_KEPT

        def work(conn: apsw.Connection) -> None:
            cursor_events.keep_event(conn, crew, targets, message, limit)

        def failed(exc: BaseException) -> None:
            logger.warning("crew {}: topic event {} not kept for its sleeping cursors: {}", crew, message.id, exc)

        try:
            self.hub.writer.post(work, on_error=failed)
        except HubStoppedError:
            logger.debug("crew {}: topic event {} not kept, the store is closed", crew, message.id)

    def keep_for_sleepers(
        self, keys: Mapping[CrewId, list[str]], message: Message, skip: Callable[[CrewId], bool]
    ) -> Waiter[None]:
        limit = cursor_events.MAX_KEPT
        targets = {crew: list(cursor_keys) for crew, cursor_keys in keys.items()}

        def work(conn: apsw.Connection) -> None:
            try:
                for crew, cursor_keys in targets.items():
                    if not skip(crew):  # decided here, in order with the wakes' reads
                        cursor_events.keep_event(conn, str(crew), cursor_keys, message, limit)
            except apsw.Error as exc:  # the port's callers know StoreError, not the driver's errors
                raise StoreWriteError(f"topic event {message.id} could not be kept for sleeping crews: {exc}") from exc

        return self.hub.writer.submit(work)

    def load_kept(
        self,
        crew_id: CrewId,
        after_read: Callable[[], None],
        on_loaded: Callable[[KeptEvents], None],
        on_error: Callable[[BaseException], None],
    ) -> None:
        key = str(crew_id)

        def read(conn: apsw.Connection) -> KeptEvents:
            messages, missed, upto = cursor_events.load_kept(conn, key)
            by_cursor: dict[CursorFilter, int] = {}
            for cursor_key, count in missed.items():
                topic, _, match = cursor_key.partition("\n")
                metadata = _metadata(match)
                by_cursor[(topic, metadata or None)] = count
            after_read()
            return KeptEvents(tuple(messages), by_cursor, upto)

        # Urgent: a waking crew reads here; it overtakes the bulk posts of other crews,
        # never a keyless write (the keeping writes above are keyless: read in order).
        self.hub.writer.post(read, after_commit=on_loaded, on_error=on_error, key=crew_key(key), urgent=True)


class SqliteExpiryIndex:
    """The :class:`~orkeon_actors.lifecycle.ports.ExpiryIndex` over ``pending_waits``."""

    def __init__(self, readers: ReaderPool) -> None:
        self.readers = readers

    def time_key(self, at: datetime) -> str:
        return format_time(at)

    def window(self, after: tuple[str, str], upto: str, limit: int) -> list[tuple[str, str, str]]:
        rows = self.readers.query(WINDOW_SQL, (*after, upto, limit))
        return [(str(expires), str(wait_id), str(crew)) for expires, wait_id, crew in rows]

    def still_indexed(self, wait_ids: Sequence[str]) -> set[str]:
        """Primary-key lookups, one query per ``_IDS_PER_QUERY`` ids."""
        found: set[str] = set()
        for start in range(0, len(wait_ids), _IDS_PER_QUERY):
            chunk = tuple(wait_ids[start : start + _IDS_PER_QUERY])
            rows = self.readers.query(f"SELECT wait_id FROM pending_waits WHERE wait_id IN ({_marks(chunk)})", chunk)
            found.update(str(row[0]) for row in rows)
        return found


class SqliteLifecycleBackend:
    """The :class:`~orkeon_actors.lifecycle.ports.LifecycleBackend` of a durable hub."""

    def __init__(self, hub: SqliteEventHub) -> None:
        self._hub = hub
        self._states = SqliteCrewStateStore(hub)
        self._wakes = SqliteWakeIndex(hub)
        self._expiries = SqliteExpiryIndex(hub.readers)
        self._outcomes = OutcomeBook(hub, self._states)

    @property
    def hub(self) -> SqliteEventHub:
        return self._hub

    @property
    def states(self) -> SqliteCrewStateStore:
        return self._states

    @property
    def wakes(self) -> SqliteWakeIndex:
        return self._wakes

    @property
    def expiries(self) -> SqliteExpiryIndex:
        return self._expiries

    @property
    def outcomes(self) -> OutcomeBook:
        return self._outcomes
