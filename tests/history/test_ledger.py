"""The sent-history ledger: appends are constant work, and verification names the first
position where the head, a node or a row is missing, extra, substituted, corrupt,
unreadable or of another version."""

from __future__ import annotations

import attrs
import pytest
from hypothesis import given
from hypothesis import strategies as st

from orkeon_actors.history.ledger import (
    LEDGER_VERSION,
    LedgerHead,
    LedgerNode,
    LedgerUnreadableError,
    append,
    verify,
)

SENDER = "agent://billing/scorer"


class DictSource:
    """A ledger held in dicts, with damage a test can apply."""

    def __init__(self) -> None:
        self.heads: dict[str, LedgerHead] = {}
        self.nodes: dict[int, LedgerNode] = {}
        self.rows: dict[int, bytes] = {}
        self.unreadable: set[int] = set()

    def send(self, row: bytes, now_ms: int = 1_000) -> None:
        head, node = append(self.heads.get(SENDER), SENDER, row, now_ms)
        self.nodes[node.seq] = node
        self.rows[node.seq] = row
        self.heads[SENDER] = head

    def head(self, sender: str) -> LedgerHead | None:
        if 0 in self.unreadable:
            raise LedgerUnreadableError("head bytes garbled")
        return self.heads.get(sender)

    def node(self, sender: str, seq: int) -> LedgerNode | None:
        if seq in self.unreadable:
            raise LedgerUnreadableError(f"node {seq} garbled")
        return self.nodes.get(seq)

    def row(self, sender: str, seq: int) -> bytes | None:
        return self.rows.get(seq)

    def columns(self, sender: str, seq: int) -> None:
        """A dict keeps no columns beside the bytes: nothing to disagree."""

    def max_seq(self, sender: str) -> int:
        return max([*self.nodes, *self.rows, 0])

    def epochs(self) -> tuple[int, ...]:
        return ()  # no index ran: every node's epoch is 0

    def index_start(self) -> int | None:
        return None

    def index_open(self) -> int | None:
        return None


def _ledger(rows: list[bytes]) -> DictSource:
    source = DictSource()
    for row in rows:
        source.send(row)
    return source


rows_strategy = st.lists(st.binary(min_size=1, max_size=40), min_size=1, max_size=30)


@given(rows=rows_strategy)
def test_an_intact_ledger_verifies(rows: list[bytes]) -> None:
    report = verify(_ledger(rows), SENDER)
    assert (report.ok, report.rows, report.first_bad) == (True, len(rows), None)


def test_no_history_is_a_valid_empty_ledger_and_appends_are_constant_work() -> None:
    assert verify(DictSource(), SENDER).ok
    head, node = append(None, SENDER, b"first", now_ms=42)
    assert (head.count, head.since_ms, node.seq) == (1, 42, 1)
    later, second = append(head, SENDER, b"second", now_ms=99)
    assert (later.count, later.since_ms, second.seq) == (2, 42, 2)  # the boundary stays the first send's


DAMAGES = ["drop_node", "drop_row", "flip_row", "swap_rows", "substitute_row", "old_node", "unreadable_node"]


@given(rows=rows_strategy, at=st.integers(min_value=0), damage=st.sampled_from(DAMAGES), data=st.data())
def test_damage_to_any_row_or_node_is_named_at_its_position(
    rows: list[bytes], at: int, damage: str, data: st.DataObject
) -> None:
    source = _ledger(rows)
    seq = at % len(rows) + 1
    if damage == "drop_node":
        del source.nodes[seq]
    elif damage == "drop_row":
        del source.rows[seq]
    elif damage == "flip_row":
        row = bytearray(source.rows[seq])
        row[data.draw(st.integers(0, len(row) - 1))] ^= 0x80
        source.rows[seq] = bytes(row)
    elif damage == "swap_rows":
        other = data.draw(st.integers(1, len(rows)))
        if rows[other - 1] == rows[seq - 1]:
            return  # swapping equal rows (or a row with itself) changes nothing
        seq, later = sorted((seq, other))
        source.rows[seq], source.rows[later] = source.rows[later], source.rows[seq]
    elif damage == "substitute_row":
        replacement = data.draw(st.binary(min_size=1, max_size=40))
        if replacement == source.rows[seq]:
            return
        source.rows[seq] = replacement
    elif damage == "old_node":
        source.nodes[seq] = attrs.evolve(source.nodes[seq], version=LEDGER_VERSION + 1)
    else:
        source.unreadable.add(seq)
    report = verify(source, SENDER)
    assert not report.ok
    assert report.first_bad == seq, report
    assert report.rows == seq - 1


def test_a_rewritten_chain_that_the_head_does_not_commit_to_is_refused() -> None:
    source = _ledger([b"a", b"b", b"c"])
    forged = _ledger([b"a", b"B", b"c"])  # a consistent chain with one row changed
    source.nodes, source.rows = forged.nodes, forged.rows
    report = verify(source, SENDER)
    assert (report.ok, report.first_bad) == (False, 0)
    assert "tip does not commit" in str(report.problem)


@pytest.mark.parametrize("where", ["node", "row"])
def test_state_past_the_head_is_extra(where: str) -> None:
    source = _ledger([b"a", b"b"])
    head = source.heads[SENDER]
    _, node = append(head, SENDER, b"c", 5)
    if where == "node":
        source.nodes[3] = node
    else:
        source.rows[3] = b"c"
    report = verify(source, SENDER)
    assert (report.ok, report.first_bad) == (False, 3)
    assert "past the head" in str(report.problem)


def test_a_missing_unreadable_or_foreign_version_head_is_reported() -> None:
    orphan = _ledger([b"a"])
    del orphan.heads[SENDER]
    assert verify(orphan, SENDER).problem == "nodes exist but the head is missing"
    garbled = _ledger([b"a"])
    garbled.unreadable.add(0)
    assert str(verify(garbled, SENDER).problem).startswith("the head is unreadable")
    future = _ledger([b"a"])
    future.heads[SENDER] = attrs.evolve(future.heads[SENDER], version=LEDGER_VERSION + 1)
    assert verify(future, SENDER).first_bad == 0
    with pytest.raises(ValueError, match="version"):
        append(future.heads[SENDER], SENDER, b"b", 1)
