"""A sent-history intent of a post to another host, left pending by a crash of the
sending host, is resumed when that host boots again (MESSAGE-R05, R06): host A is a
real child process SIGKILLed at a named point of its third post
(``ORKEON_TEST_SEND_FAIL_AFTER``), then restarted on the same store. The coverage reads
``partial`` in the file as the crash left it and ``complete`` after the boot, the ledger
verifies, and the recipient on host B kept each post exactly once."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import apsw
import pytest

from orkeon_actors.fleet.host_process import HostCallError, HostProcess, write_keys
from orkeon_actors.history.endpoint import parse_sender
from orkeon_actors.hub.amqp.topology import inbox_queue
from orkeon_actors.model.address import MailboxAddress
from orkeon_actors.store.sent_reads import read_history
from orkeon_actors.testing import wait_until

from .conftest import ready_count, url

pytestmark = pytest.mark.rabbitmq

PRESENCE = (0.3, 6.0)
BOX = "agent://ledger/book"
SENDER = ("billing", "scorer")


@pytest.fixture
def hosts(vhost: str, tmp_path: Path) -> Iterator[tuple[HostProcess, HostProcess]]:
    suffix = uuid.uuid4().hex[:6]
    names = [f"a-{suffix}", f"b-{suffix}"]
    keys = tmp_path / "keys.json"
    write_keys(keys, names)
    a, b = (
        HostProcess(name, tmp_path / f"{name}.db", url=url(vhost), keys_file=keys, presence=PRESENCE) for name in names
    )
    try:
        yield a, b
    finally:
        a.stop()
        b.stop()


def _as_left(store: Path) -> tuple[str, int, list[str]]:
    """The sender's coverage, pending count and rows in the file as the crash left it."""
    conn = apsw.Connection(str(store), flags=apsw.SQLITE_OPEN_READONLY)
    try:
        history = read_history(conn, parse_sender(f"agent://{SENDER[0]}/{SENDER[1]}"))
    finally:
        conn.close()
    return history.coverage.state.value, history.coverage.pending, [row.message_id for row in history.rows]


@pytest.mark.parametrize("point", ["intent_reserved", "recipient_materialised"])
def test_a_remote_post_interrupted_by_a_crash_is_resumed_at_boot_exactly_once(
    hosts: tuple[HostProcess, HostProcess], vhost: str, monkeypatch: pytest.MonkeyPatch, point: str
) -> None:
    a, b = hosts
    b.start()
    b.call("register", address=BOX)
    monkeypatch.setenv("ORKEON_TEST_HOOKS", "1")
    monkeypatch.setenv("ORKEON_TEST_SEND_FAIL_AFTER", point)
    monkeypatch.setenv("ORKEON_TEST_SEND_FAIL_NTH", "3")
    a.start()  # armed: SIGKILLs itself at the third post's crash point
    for variable in ("ORKEON_TEST_HOOKS", "ORKEON_TEST_SEND_FAIL_AFTER", "ORKEON_TEST_SEND_FAIL_NTH"):
        monkeypatch.delenv(variable)
    wait_until(lambda: [b.host_id, BOX] in a.call("roster"), timeout=30, what=f"{BOX} on A's roster")
    accepted = [a.call("post", to=BOX, payload=f'{{"n": {n}}}', crew=SENDER[0], agent=SENDER[1]) for n in (1, 2)]
    with pytest.raises(HostCallError, match=r"died|exited"):
        a.call("post", to=BOX, payload='{"n": 3}', crew=SENDER[0], agent=SENDER[1])
    a.kill()

    state, pending, rows = _as_left(a.store)
    assert (state, pending, rows) == ("partial", 1, accepted)  # the third post's intent, not its row

    a.restart()  # the boot publishes the pending intent again and completes it
    sent = a.call("sent", crew=SENDER[0], agent=SENDER[1])
    assert sent["state"] == "complete" and sent["pending"] == 0
    assert sent["verified"] is True
    assert sent["rows"][:2] == accepted and len(sent["rows"]) == 3

    kept = b.call("drain", within=60, address=BOX, count=3, timeout=30)["ids"]
    assert kept == sent["rows"]  # every post once, in order, the resumed one included
    queue = inbox_queue(MailboxAddress.parse(BOX))
    wait_until(lambda: ready_count(vhost, queue) == 0, timeout=30, what="B's inbox drained")
    with pytest.raises(HostCallError, match="CancelledError"):
        b.call("receive", address=BOX, timeout=1)  # no second copy of the resumed post


def test_a_remote_request_interrupted_by_a_crash_is_abandoned_at_boot(
    hosts: tuple[HostProcess, HostProcess], monkeypatch: pytest.MonkeyPatch
) -> None:
    a, b = hosts
    b.start()
    b.call("register", address=BOX)
    monkeypatch.setenv("ORKEON_TEST_HOOKS", "1")
    monkeypatch.setenv("ORKEON_TEST_SEND_FAIL_AFTER", "intent_reserved")
    a.start()  # armed: SIGKILLs itself once its first send's intent committed
    for variable in ("ORKEON_TEST_HOOKS", "ORKEON_TEST_SEND_FAIL_AFTER"):
        monkeypatch.delenv(variable)
    wait_until(lambda: [b.host_id, BOX] in a.call("roster"), timeout=30, what=f"{BOX} on A's roster")
    with pytest.raises(HostCallError, match=r"died|exited"):
        a.call("send", to=BOX, payload="{}", timeout=5, crew=SENDER[0], agent=SENDER[1])
    a.kill()
    assert _as_left(a.store)[:2] == ("partial", 1)

    a.restart()  # its requester died with the process: kept for audit, never a row
    sent = a.call("sent", crew=SENDER[0], agent=SENDER[1])
    assert (sent["state"], sent["pending"], sent["rows"], sent["verified"]) == ("complete", 0, [], True)
