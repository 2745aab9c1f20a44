"""What a reader of a sent history gets: :class:`Coverage`, :class:`SentHistory` and its
JSON form (sender-owned history requirements, MESSAGE-R03, R09; the shape is documented
in ``docs/history.md`` and stable).

Coverage is one of three states, never collapsed into one another:

* ``unavailable``: the store keeps no index (history off, an older store, a store
  opened without it since): no claim at all, never an empty complete history;
* ``complete``: every send of the sender since ``since_ms`` (unix ms of its first indexed
  send, or of the index's start for a sender with none) is in ``rows``;
* ``partial``: ``pending`` sends were reserved and not completed yet (an interrupted
  send, resumed by the sender's next operation or the next boot).
"""

from __future__ import annotations

import base64
import enum
from typing import Any

import attrs

from orkeon_actors.errors import SentCoverageError
from orkeon_actors.history.endpoint import Endpoint
from orkeon_actors.history.records import SentRecord

__all__ = ["Coverage", "CoverageState", "SentHistory", "endpoint_json"]


class CoverageState(enum.Enum):
    UNAVAILABLE = "unavailable"
    COMPLETE = "complete"
    PARTIAL = "partial"


@attrs.frozen
class Coverage:
    state: CoverageState
    since_ms: int | None
    pending: int = 0

    def to_json(self) -> dict[str, Any]:
        return {"state": self.state.value, "since_ms": self.since_ms, "pending": self.pending}

    def require_complete(self, sender: Endpoint) -> None:
        """Raise ``SentCoverageError`` unless the coverage is ``complete``."""
        if self.state is CoverageState.UNAVAILABLE:
            raise SentCoverageError(
                f"the sent history of {sender.address} is unavailable (this store keeps no sent index): "
                "a count would claim an empty complete history; open the store with sent_history=True",
                state=self.state.value,
            )
        if self.state is CoverageState.PARTIAL:
            raise SentCoverageError(
                f"the sent history of {sender.address} is partial: {self.pending} send(s) are pending "
                "(interrupted, not completed yet); the sender's next operation or the next boot resumes them, "
                "count again after that",
                state=self.state.value,
                pending=self.pending,
            )


def endpoint_json(endpoint: Endpoint) -> dict[str, str | None]:
    """``{"kind", "id", "address", "name"}``: ``kind`` and ``id`` are canonical;
    ``address`` and ``name`` (the crew's ``name:`` then, or ``None``) are display-only
    and historical (docs/history.md)."""
    return {"kind": endpoint.kind.value, "id": endpoint.id, "address": endpoint.address, "name": endpoint.name}


@attrs.frozen
class SentHistory:
    """A sender's rows (oldest first) under their coverage. ``rows`` holds the bodies only
    when they were asked for (``include_body``)."""

    sender: Endpoint
    coverage: Coverage
    rows: tuple[SentRecord, ...]
    include_body: bool = False
    seqs: tuple[int, ...] = ()
    """Each row's position in its sender's ledger (1, 2, ...), in commit order: the
    cursor a poller resumes after (``orkeon message sent --after-seq``); empty for a
    history that keeps none."""

    def __len__(self) -> int:
        return len(self.rows)

    @property
    def named_sender(self) -> Endpoint:
        """:attr:`sender` with the readable name its latest row recorded (``None`` without
        rows): the query names the sender by id or address, a row knows its name then."""
        if not self.rows or self.rows[-1].sender.name is None:
            return self.sender
        return attrs.evolve(self.sender, name=self.rows[-1].sender.name)

    def _positions(self) -> tuple[int | None, ...]:
        return self.seqs if len(self.seqs) == len(self.rows) else (None,) * len(self.rows)

    def count(self) -> int:
        """How many rows, refusing (``SentCoverageError``) a coverage that is not
        complete."""
        self.coverage.require_complete(self.sender)
        return len(self.rows)

    def to_json(self, *, count: bool = False) -> dict[str, Any]:
        """The stable JSON shape (``docs/history.md``); ``count`` adds ``"count"`` and
        refuses, like :meth:`count`, a coverage that is not complete."""
        out: dict[str, Any] = {
            "sender": endpoint_json(self.named_sender),
            "coverage": self.coverage.to_json(),
            "rows": [
                _row_json(row, self.include_body, seq) for row, seq in zip(self.rows, self._positions(), strict=True)
            ],
        }
        if count:
            out["count"] = self.count()
        return out


def _row_json(row: SentRecord, include_body: bool, seq: int | None) -> dict[str, Any]:
    out: dict[str, Any] = {
        "seq": seq,
        "message_id": row.message_id,
        "kind": row.kind.value,
        "to": endpoint_json(row.to),
        "sent_at": row.sent_at_ms,
        "topic": row.topic,
        "correlation_id": row.correlation_id,
        "idempotency_key": row.idempotency_key,
        "metadata": row.metadata,
    }
    if include_body and row.body is not None:
        out["body"] = _body_text(row.body)
    return out


def _body_text(body: bytes) -> dict[str, str]:
    try:
        return {"utf8": body.decode("utf-8")}
    except UnicodeDecodeError:
        return {"base64": base64.b64encode(body).decode("ascii")}
