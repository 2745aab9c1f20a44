"""What a reader of a sent history can trust while senders post from many threads:
a cursor that never skips a row (each row's ledger ``seq``, ``--after-seq``), and a
coverage whose boundary lies below every row it covers, so that ``--since
<coverage.since_ms>`` returns them all and a count never reaches across a time the
index was off (MESSAGE-R03, R09)."""

from __future__ import annotations

import json
import threading
from datetime import UTC, datetime, timedelta
from pathlib import Path

import apsw
import pytest

import orkeon_actors as ok
from orkeon_actors.cli.main import main
from orkeon_actors.history.endpoint import parse_sender
from orkeon_actors.model.clock import SystemClock
from orkeon_actors.store import SqliteEventHub, StoreConfig
from orkeon_actors.store.sent_reads import read_history

BOB = "agent://b/bob"
THREADS = 4
PER_THREAD = 40


class TickingClock(SystemClock):
    """Wall time that moves one millisecond at every reading: each stamp of a send is
    later than the one before, as on a busy machine."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._now = datetime.now(UTC)

    def now(self) -> datetime:
        with self._lock:
            self._now += timedelta(milliseconds=1)
            return self._now


def _post_from_threads(hub: ok.EventHub, senders: list[str]) -> None:
    def post_all(who: str) -> None:
        client = hub.bind(*who.split("/"))
        for i in range(PER_THREAD):
            client.post(BOB, {"i": i})

    threads = [threading.Thread(target=post_all, args=(who,)) for who in senders for _ in range(THREADS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)


def test_a_poller_resuming_after_the_last_seq_never_misses_a_row(store_path: Path) -> None:
    with ok.Runtime.start(store=StoreConfig(str(store_path)), clock=TickingClock()) as rt:
        hub = rt.hub
        assert isinstance(hub, SqliteEventHub)
        hub.register_mailbox(BOB)
        alice = parse_sender("agent://a/alice")
        seen: list[str] = []
        seqs: list[int] = []
        posting = threading.Thread(target=_post_from_threads, args=(hub, ["a/alice"]))
        posting.start()
        reader = apsw.Connection(str(store_path), flags=apsw.SQLITE_OPEN_READONLY)
        try:
            while True:
                done = not posting.is_alive()
                page = read_history(reader, alice, after_seq=seqs[-1] if seqs else None)
                seen += [row.message_id for row in page.rows]
                seqs += page.seqs
                if done:
                    break
        finally:
            reader.close()
        history = hub.sent.read(alice)
        assert hub.sent.read(alice, after_seq=THREADS * PER_THREAD - 1).seqs == (THREADS * PER_THREAD,)
    assert seen == [row.message_id for row in history.rows]  # every row once, none skipped
    assert seqs == list(range(1, THREADS * PER_THREAD + 1))


def test_after_seq_and_seq_on_the_command_line(store_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with ok.Runtime.start(store=StoreConfig(str(store_path))) as rt:
        rt.hub.register_mailbox(BOB)
        alice = rt.hub.bind("a", "alice")
        posted = [alice.post(BOB, i).id for i in range(3)]
        store = ("--store", str(store_path))
        assert main(["message", "sent", "agent://a/alice", "--json", "--after-seq", "1", *store]) == 0
        out = capsys.readouterr().out
        rows = json.loads(out)["rows"]
        assert [(row["seq"], row["message_id"]) for row in rows] == [(2, posted[1]), (3, posted[2])]
        assert main(["message", "sent", "agent://a/alice", "--after-seq", "2", *store]) == 0
        text = capsys.readouterr().out
        assert "1 sent" in text and "#3" in text and posted[2] in text


def test_the_coverage_boundary_lies_below_every_row_of_concurrent_senders(store_path: Path) -> None:
    senders = [f"crew-{n}/agent-{n}" for n in range(4)]
    with ok.Runtime.start(store=StoreConfig(str(store_path)), clock=TickingClock()) as rt:
        hub = rt.hub
        hub.register_mailbox(BOB)
        _post_from_threads(hub, senders)
        for who in senders:
            client = hub.bind(*who.split("/"))
            history = client.sent()
            since = history.coverage.since_ms
            assert since is not None and len(history.rows) == THREADS * PER_THREAD
            assert min(row.sent_at_ms for row in history.rows) > since, who
            assert client.sent(since=since).rows == history.rows  # --since <since_ms> drops nothing
            assert client.sent_count(since=since) == client.sent_count() == len(history.rows)
