"""The host-process harness on a local host (no broker): a real child process with its own
store, driven over pipes, SIGKILLed and restarted on the same store."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from orkeon_actors.fleet.host_process import HostCallError, HostProcess, write_keys

MAILBOX = "agent://billing/scorer"


@pytest.fixture
def host(tmp_path: Path) -> Iterator[HostProcess]:
    process = HostProcess("host-a", tmp_path / "host-a.db").start()
    yield process
    process.stop()


def test_a_committed_post_survives_a_sigkill_and_is_received_after_restart(host: HostProcess) -> None:
    host.call("register", address=MAILBOX)
    posted = host.call("post", to=MAILBOX, payload='{"order": 42}')
    first_pid = host.pid
    host.kill()
    assert not host.alive
    host.restart()
    assert host.pid != first_pid
    host.call("register", address=MAILBOX)
    received = host.call("receive", address=MAILBOX, timeout=10)
    assert received["id"] == posted and received["payload"] == '{"order": 42}'


def test_a_remote_error_comes_back_with_its_type(host: HostProcess) -> None:
    with pytest.raises(HostCallError, match="no mailbox is registered at agent://nobody/x") as raised:
        host.call("post", to="agent://nobody/x", payload="1")
    assert raised.value.error == "MailboxNotFoundError"


def test_a_call_in_flight_fails_when_the_host_is_killed(host: HostProcess) -> None:
    host.call("register", address=MAILBOX)
    waiting = host.call_async("receive", address=MAILBOX, timeout=60)
    host.kill()
    with pytest.raises(HostCallError) as raised:
        waiting.result(10)
    assert raised.value.error == "died"
    with pytest.raises(HostCallError, match="is not running"):
        host.call("ping")


def test_restart_refuses_a_host_still_running(host: HostProcess) -> None:
    with pytest.raises(HostCallError, match="still runs"):
        host.restart()


def test_drain_reports_every_id_in_order(host: HostProcess) -> None:
    host.call("register", address=MAILBOX)
    ids = [host.call("post", to=MAILBOX, payload=str(i)) for i in range(5)]
    assert host.call("drain", address=MAILBOX, count=5, timeout=10)["ids"] == ids


def test_write_keys_writes_a_private_file_the_verifier_reads(tmp_path: Path) -> None:
    path = tmp_path / "keys.json"
    keys = write_keys(path, ["host-a", "host-b"])
    written = json.loads(path.read_text())
    assert {host: bytes.fromhex(key) for host, key in written.items()} == dict(keys.keys)
    assert len(set(written.values())) == 2 and len(keys.key_of("host-a") or b"") == 32
    assert path.stat().st_mode & 0o077 == 0
