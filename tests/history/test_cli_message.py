"""``orkeon message sent|ls|verify`` on a store file, beside a running runtime that holds
the writer's lock (MESSAGE-R03, R09, R10): the stable JSON shape, the sender's
resolution, strict ``--since``, ``--count`` refusing what it cannot prove, and a read
that never touches a mailbox."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import apsw
import pytest

import orkeon_actors as ok
from orkeon_actors.cli.main import main
from orkeon_actors.history.endpoint import parse_sender
from orkeon_actors.store import faults
from orkeon_actors.store.sent_reads import read_history

from .conftest import Opener

BOB = "agent://b/bob"


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def _json(capsys: pytest.CaptureFixture[str], *argv: str) -> Any:
    code, out, err = _run(capsys, *argv)
    assert code == 0, err
    return json.loads(out)


@pytest.fixture
def running(open_store: Opener) -> ok.Runtime:
    rt = open_store()
    hub = rt.hub
    hub.register_mailbox(BOB)
    hub.register_mailbox("client://ui")
    alice = hub.bind("a", "alice")
    alice.post(BOB, {"n": 1}, {"k": "v"})
    alice.post("client://ui", "", idempotency_key="ui-1")
    hub.bind("b", "carol").post(BOB, "not alice")
    return rt


def test_sent_json_has_the_documented_shape_beside_a_running_runtime(
    running: ok.Runtime, store_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = _json(capsys, "message", "sent", "agent://a/alice", "--json", "--store", str(store_path))
    assert set(out) == {"sender", "coverage", "rows"}
    assert out["sender"] == {"kind": "agent", "id": "a/alice", "address": "agent://a/alice", "name": None}
    assert out["coverage"]["state"] == "complete" and out["coverage"]["pending"] == 0
    assert isinstance(out["coverage"]["since_ms"], int)
    first, second = out["rows"]
    assert (first["seq"], second["seq"]) == (1, 2)
    assert set(first) == {
        "seq",
        "message_id",
        "kind",
        "to",
        "sent_at",
        "topic",
        "correlation_id",
        "idempotency_key",
        "metadata",
    }
    assert (first["kind"], first["to"], first["metadata"]) == (
        "post",
        {"kind": "agent", "id": "b/bob", "address": BOB, "name": None},
        {"k": "v"},
    )
    assert (second["to"]["kind"], second["idempotency_key"]) == ("client", "ui-1")
    with_body = _json(
        capsys, "message", "sent", "agent://a/alice", "--json", "--include-body", "--store", str(store_path)
    )
    assert [row["body"] for row in with_body["rows"]] == [{"utf8": '{"n":1}'}, {"utf8": '""'}]
    counted = _json(capsys, "message", "sent", "agent://a/alice", "--json", "--count", "--store", str(store_path))
    assert counted["count"] == 2


def test_the_sender_is_the_address_then_as_then_the_environment_and_id_excludes_them(
    running: ok.Runtime, store_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    store = ("--store", str(store_path))

    def sender_of(*argv: str) -> str:
        return str(_json(capsys, "message", "sent", *argv, "--json", *store)["sender"]["id"])

    monkeypatch.setenv("ORKEON_AGENT", "agent://b/carol")
    assert sender_of() == "b/carol"
    assert sender_of("--as", "agent://a/alice") == "a/alice"
    assert sender_of("agent://a/alice", "--as", "agent://b/carol") == "a/alice"
    assert sender_of("--id", "a/alice") == "a/alice"
    assert sender_of("--id", "b/carol") == "b/carol"  # over ORKEON_AGENT too
    for conflicting in (["agent://a/alice", "--id", "a/alice"], ["--as", "agent://a/alice", "--id", "a/alice"]):
        with pytest.raises(SystemExit) as exited:
            main(["message", "sent", *conflicting, *store])
        assert exited.value.code == 2
        assert "--id names the sender by itself" in capsys.readouterr().err
    monkeypatch.delenv("ORKEON_AGENT")
    with pytest.raises(SystemExit):
        main(["message", "sent", *store])
    code, _, err = _run(capsys, "message", "sent", "client://ui", *store)
    assert code == 1 and "only agents" in err


def test_since_is_strict_and_to_keeps_one_recipient(
    running: ok.Runtime, store_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store = ("--store", str(store_path))
    rows = _json(capsys, "message", "sent", "agent://a/alice", "--json", *store)["rows"]
    boundary = rows[0]["sent_at"]
    after = _json(capsys, "message", "sent", "agent://a/alice", "--since", str(boundary), "--json", *store)
    assert [r["message_id"] for r in after["rows"]] == [r["message_id"] for r in rows if r["sent_at"] > boundary]
    to_ui = _json(capsys, "message", "sent", "agent://a/alice", "--to", "client://ui", "--json", *store)
    assert [r["to"]["id"] for r in to_ui["rows"]] == ["ui"]


def test_ls_lists_a_mailboxs_held_messages_and_filters_by_sender(
    running: ok.Runtime, store_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store = ("--store", str(store_path))
    held = _json(capsys, "message", "ls", BOB, "--json", *store)
    assert held["mailbox"] == {"kind": "agent", "id": "b/bob", "address": BOB}
    assert [m["from"]["id"] for m in held["messages"]] == ["a/alice", "b/carol"]
    only = _json(capsys, "message", "ls", BOB, "--from", "agent://b/carol", "--json", *store)
    assert [m["from"]["id"] for m in only["messages"]] == ["b/carol"]


def test_count_refuses_unavailable_and_partial_coverage(
    open_store: Opener, store_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store = ("--store", str(store_path))
    off = open_store(sent_history=False)
    off.stop()
    code, _, err = _run(capsys, "message", "sent", "agent://a/alice", "--count", *store)
    assert code == 1 and "unavailable" in err
    unavailable = _json(capsys, "message", "sent", "agent://a/alice", "--json", *store)
    assert unavailable["coverage"] == {"state": "unavailable", "since_ms": None, "pending": 0}
    assert unavailable["rows"] == []

    rt = open_store()
    desk = rt.hub.register_mailbox("agent://b/desk")
    request = rt.hub.bind("a", "alice").request("agent://b/desk", "q", timeout=30)
    with desk.reader() as reader:
        reader.receive()
    assert request.correlation_id is not None

    def fail(point: str) -> None:
        if point == "send.row_written":
            raise OSError("injected")

    faults.install(fail)
    try:
        with pytest.raises(OSError):
            rt.hub.bind("b", "bob").reply(request.correlation_id, "a")
    finally:
        faults.uninstall()
    partial = _json(capsys, "message", "sent", "agent://b/bob", "--json", *store)
    assert partial["coverage"]["state"] == "partial" and partial["coverage"]["pending"] == 1
    code, _, err = _run(capsys, "message", "sent", "agent://b/bob", "--count", *store)
    assert code == 1 and "partial" in err


def test_a_store_from_before_the_history_is_unavailable_never_empty_and_complete(
    open_store: Opener, store_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rt = open_store()
    rt.hub.register_mailbox(BOB)
    rt.hub.bind("a", "alice").post(BOB, "sent by a release that kept no history")
    rt.stop()
    conn = apsw.Connection(str(store_path))
    for table in ("sent_index", "sent_heads", "sent_rows", "sent_nodes", "sent_intents", "sent_abandoned"):
        conn.execute(f"DROP TABLE {table}")
    conn.close()
    store = ("--store", str(store_path))
    out = _json(capsys, "message", "sent", "agent://a/alice", "--json", *store)
    assert (out["coverage"], out["rows"]) == ({"state": "unavailable", "since_ms": None, "pending": 0}, [])
    code, _, err = _run(capsys, "message", "sent", "agent://a/alice", "--count", *store)
    assert code == 1 and "unavailable" in err
    code, _, err = _run(capsys, "message", "verify", *store)
    assert code == 1 and "no sent history" in err


def test_verify_reports_every_sender_and_fails_on_a_damaged_ledger(
    running: ok.Runtime, store_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store = ("--store", str(store_path))
    report = _json(capsys, "message", "verify", "--json", *store)
    assert {(r["sender"], r["ok"]) for r in report} == {("a/alice", True), ("b/carol", True)}
    running.stop()
    conn = apsw.Connection(str(store_path))
    conn.execute("DELETE FROM sent_nodes WHERE sender = 'a/alice' AND seq = 1")
    conn.close()
    code, out, _ = _run(capsys, "message", "verify", "agent://a/alice", *store)
    assert code == 1 and "BAD at position 1" in out


def test_the_sent_read_never_touches_a_mailbox(running: ok.Runtime, store_path: Path) -> None:
    conn = apsw.Connection(str(store_path), flags=apsw.SQLITE_OPEN_READONLY)
    touched: list[str] = []

    def authorizer(op: int, table: str | None, *_: object) -> int:
        if op == apsw.SQLITE_READ and table in ("mailboxes", "mailbox_registry"):
            touched.append(table)
            return apsw.SQLITE_DENY
        return apsw.SQLITE_OK

    conn.authorizer = authorizer
    history = read_history(conn, parse_sender("agent://a/alice"), include_body=True)
    conn.close()
    assert len(history.rows) == 2 and touched == []


def _edit(store_path: Path, sql: str, *params: object) -> None:
    conn = apsw.Connection(str(store_path))
    try:
        with conn:
            conn.execute(sql, params)
    finally:
        conn.close()


def test_an_edited_recipient_column_that_hides_a_row_from_to_fails_verify(
    running: ok.Runtime, store_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store = ("--store", str(store_path))
    _edit(store_path, "UPDATE sent_rows SET recipient = 'agent:b/eve' WHERE sender = 'a/alice' AND seq = 1")
    code, out, _ = _run(capsys, "message", "verify", "agent://a/alice", *store)
    assert code == 1
    assert "BAD at position 1" in out and "recipient column" in out
    code, out, _ = _run(capsys, "message", "verify", "--json", *store)
    assert code == 1 and json.loads(out)[0]["first_bad"] == 1


def test_an_edited_key_column_that_lets_a_retry_send_twice_fails_verify(
    running: ok.Runtime, store_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _edit(store_path, "UPDATE sent_rows SET idempotency_key = 'ui-other' WHERE sender = 'a/alice' AND seq = 2")
    code, out, _ = _run(capsys, "message", "verify", "agent://a/alice", "--store", str(store_path))
    assert (code, "BAD at position 2" in out, "idempotency_key column" in out) == (1, True, True)


def test_a_damaged_row_makes_sent_print_a_typed_error_not_a_traceback(
    running: ok.Runtime, store_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _edit(store_path, "UPDATE sent_rows SET record = x'ff00' WHERE sender = 'a/alice' AND seq = 2")
    code, out, err = _run(capsys, "message", "sent", "agent://a/alice", "--store", str(store_path))
    assert code == 1 and out == ""
    assert "Traceback" not in err
    assert "sent row 2 of a/alice is damaged" in err and "orkeon message verify" in err
    with pytest.raises(ok.errors.StoreCorruptError, match="sent row 2"):
        running.hub.bind("a", "alice").sent()


def test_the_table_shows_readable_utc_times_and_json_keeps_unix_ms(
    running: ok.Runtime, store_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store = ("--store", str(store_path))
    rows = _json(capsys, "message", "sent", "agent://a/alice", "--json", *store)["rows"]
    assert all(isinstance(row["sent_at"], int) for row in rows)
    code, out, _ = _run(capsys, "message", "sent", "agent://a/alice", *store)
    first = rows[0]["sent_at"]
    readable = datetime.fromtimestamp(first / 1000, tz=UTC).strftime("%Y-%m-%d %H:%M:%S.") + f"{first % 1000:03d}Z"
    assert code == 0 and readable in out
    assert str(first) not in out


def test_a_misspelled_sender_is_said_unknown_not_an_empty_complete_history(
    running: ok.Runtime, store_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = _run(capsys, "message", "sent", "agent://a/alcie", "--store", str(store_path))
    assert code == 0
    assert "unknown sender" in out and "did you mean: agent://a/alice" in out
    assert "0 sent" not in out


def test_verify_without_any_sender_says_there_is_nothing_to_verify(
    open_store: Opener, store_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    open_store().stop()
    code, out, _ = _run(capsys, "message", "verify", "--store", str(store_path))
    assert code == 0 and "no sender has a sent history" in out
    assert _json(capsys, "message", "verify", "--json", "--store", str(store_path)) == []
