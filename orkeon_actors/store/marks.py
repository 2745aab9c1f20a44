"""Mailbox high-water marks: what a supervised crew processed of each of its mailboxes,
in one row per ``(crew, mailbox)`` instead of one ``processed_messages`` row per post
(Orkeon EventHub & Crew Lifecycle specification, §11.2, §11.4; schema version 6).

A mailbox hands its messages out in FIFO order (``mailboxes.seq``), and a supervised
crew's consumption is acknowledged by the transaction of its next snapshot, which
deletes exactly the rows that snapshot reflects. So for mailbox traffic *order implies
processing*: everything up to the last message a snapshot reflects was processed, and
the mark ``(crew_id, mailbox_address) -> (seq, message_id)`` says as much in constant
space, however many posts the crew handles. The mark only moves forward (a larger
``seq``), is written in the snapshot's transaction (so it and the acknowledgement commit
together or not at all) and goes with the crew (its deletion, the purge).

Rows stay where order does not imply processing: topic triggers, replies and expired
waits are recorded per message in ``processed_messages`` (the activator checks them
before it wakes a crew, §11.2). A unit of work (§11.3) records its consuming message
there too: it may consume any message in any order.

``hub.is_processed(message_id, crew)`` is ``True`` for the post a mark names; for an
earlier post of that mailbox it is ``False`` (nothing is left to compare it with: its
row was deleted by the snapshot that reflects it, so it is never delivered again).
"""

from __future__ import annotations

from collections.abc import Iterable

import apsw

__all__ = ["advance_marks", "last_per_mailbox"]

_ADVANCE = """
INSERT INTO mailbox_marks (crew_id, mailbox_address, seq, message_id, processed_at)
SELECT ?1, mailbox_address, seq, message_id, ?2 FROM mailboxes WHERE mailbox_address = ?3 AND message_id = ?4
ON CONFLICT (crew_id, mailbox_address) DO UPDATE SET
    seq = excluded.seq, message_id = excluded.message_id, processed_at = excluded.processed_at
WHERE excluded.seq > mailbox_marks.seq
"""


def last_per_mailbox(consumed: Iterable[tuple[str, str]]) -> list[tuple[str, str]]:
    """The last ``(address, message_id)`` of each mailbox in ``consumed`` (in
    consumption order, so FIFO per mailbox), one per mailbox."""
    return list({address: (address, message_id) for address, message_id in consumed}.values())


def advance_marks(conn: apsw.Connection, crew_id: str, consumed: Iterable[tuple[str, str]], now: str) -> None:
    """Move the crew's marks to the last message of each mailbox in ``consumed`` (rows
    still in ``mailboxes``: call it before they are deleted). A mark never moves back."""
    rows = [(crew_id, now, address, message_id) for address, message_id in last_per_mailbox(consumed)]
    if rows:
        conn.executemany(_ADVANCE, rows)
