"""Requests another host sent to this host's mailboxes, kept in this host's store until
they are answered or expire, so that a restart of this host does not lose them.

When a request (a ``send`` or ``request`` from another host) is delivered here, the
adapter opens it as a pending request of this hub (the replier's ``reply`` is checked and
staged as for a local request) and keeps its reply route here: the correlation id, the
requester, the mailbox it was sent to, the requester's host and the requester's deadline
(``expires_at``, unix ms). The row is written in the store's group commit that keeps the
request message itself (never later), and deleted once the reply was published home, the
deadline passed or the requester withdrew it (:mod:`~orkeon_actors.fleet.cancels`: that
deletion is committed before the withdrawal is confirmed, and a request withdrawn before
it arrived never has its row written).

Guarantees:

* **Survives a crash.** A host SIGKILLed after it acknowledged a request (the message and
  this row committed) reopens every request whose deadline has not passed when it boots,
  before its gateway consumes anything: the agent that reads the request from its mailbox
  after the restart can reply, and the reply reaches the requester while the requester's
  timeout still runs. A request whose deadline passed meanwhile is deleted, unanswered
  (the requester's ``send`` raised ``SendTimeoutError`` already: its timeout is
  authoritative).
* **At least once.** A crash after the reply was published but before the row was
  deleted reopens the request: a second reply from the restarted agent reaches the
  requester, which refuses it (the correlation is answered) and dead-letters it.

The table (``fleet_requests``) belongs to the fleet adapter: it is created by the first
boot of a store as a fleet host (``CREATE TABLE IF NOT EXISTS``), so a store that never
ran in a fleet does not carry it.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import apsw
import attrs

from orkeon_actors.model.address import MailboxAddress
from orkeon_actors.model.ids import AgentId, CorrelationId, CrewId

__all__ = ["RemoteRequest", "boot", "ensure", "forget", "load_all", "remember"]

_SCHEMA = """
CREATE TABLE IF NOT EXISTS fleet_requests (
    correlation_id  TEXT PRIMARY KEY,
    requester_crew  TEXT NOT NULL,
    requester_agent TEXT,
    target          TEXT NOT NULL,
    reply_host      TEXT NOT NULL,
    expires_at_ms   INTEGER NOT NULL
) WITHOUT ROWID;
"""


@attrs.frozen
class RemoteRequest:
    """The reply route of one request delivered here from ``reply_host``."""

    correlation_id: CorrelationId
    requester_crew: CrewId
    requester_agent: AgentId | None
    target: MailboxAddress
    reply_host: str
    expires_at_ms: int


def ensure(conn: apsw.Connection) -> None:
    """Create the table if this store has none yet (idempotent)."""
    conn.execute(_SCHEMA)


def boot(conn: apsw.Connection) -> list[RemoteRequest]:
    """:func:`ensure` the table, then :func:`load_all`."""
    ensure(conn)
    return load_all(conn)


def remember(conn: apsw.Connection, requests: Sequence[RemoteRequest]) -> None:
    conn.executemany(
        "INSERT OR REPLACE INTO fleet_requests VALUES (?, ?, ?, ?, ?, ?)",
        [
            (
                str(r.correlation_id),
                str(r.requester_crew),
                None if r.requester_agent is None else str(r.requester_agent),
                str(r.target),
                r.reply_host,
                r.expires_at_ms,
            )
            for r in requests
        ],
    )


def forget(conn: apsw.Connection, correlation_ids: Iterable[str]) -> None:
    conn.executemany("DELETE FROM fleet_requests WHERE correlation_id = ?", [(str(c),) for c in correlation_ids])


def load_all(conn: apsw.Connection) -> list[RemoteRequest]:
    """Every request kept (after :func:`ensure`), oldest deadline first."""
    rows = conn.execute(
        "SELECT correlation_id, requester_crew, requester_agent, target, reply_host, expires_at_ms "
        "FROM fleet_requests ORDER BY expires_at_ms"
    )
    return [
        RemoteRequest(
            CorrelationId(str(cid)),
            CrewId(str(crew)),
            None if agent is None else AgentId(str(agent)),
            MailboxAddress.parse(str(target)),
            str(host),
            int(expires),
        )
        for cid, crew, agent, target, host, expires in rows
    ]
