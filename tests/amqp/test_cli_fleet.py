"""``orkeon fleet``: the real command, as a subprocess, against a real ``orkeon host``
process on the real broker: the roster lists it, a post reaches a mailbox, a crew is
spawned and stopped, a refused message shows in ``dlq`` with its reason and
``--requeue`` redelivers it, ``caps`` shows an inbox's length and cap, ``--json``
parses; errors say what to do."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pika
import pytest

from .broker import rabbitmqctl
from .conftest import url
from .fleet import fleet_keys, write_keys

pytestmark = pytest.mark.rabbitmq

_CLI = [sys.executable, "-m", "orkeon_actors.cli"]


class Fleet:
    """``orkeon fleet`` against one vhost, as the operator ``operator``."""

    def __init__(self, vhost: str, keys_file: Path) -> None:
        self.vhost = vhost
        self.keys_file = keys_file

    def run(self, *args: str, ok: bool = True) -> subprocess.CompletedProcess[str]:
        command = [*_CLI, "fleet", "--broker", url(self.vhost), "--keys", str(self.keys_file), "--listen", "1.5"]
        done = subprocess.run([*command, *args], capture_output=True, text=True, timeout=120)
        if ok:
            assert done.returncode == 0, (args, done.stdout[-2000:], done.stderr[-3000:])
        return done

    def json(self, *args: str) -> Any:
        return json.loads(self.run(*args, "--json").stdout)

    def crews(self, host: str) -> dict[str, list[str]]:
        hosts = {view["host"]: view for view in self.json("roster")}
        return dict(hosts[host]["crews"]) if host in hosts else {}


@pytest.fixture
def fleet(vhost: str, tmp_path: Path) -> Iterator[tuple[Fleet, str]]:
    host = f"cli-{uuid.uuid4().hex[:6]}"
    keys_file = write_keys(tmp_path / "keys.json", fleet_keys([host, "operator"]))
    command = [*_CLI, "host", "--broker", url(vhost), "--host-id", host, "--store", str(tmp_path / "host.db")]
    command += ["--keys", str(keys_file), "--crews", "orkeon_actors.bench.lifecycle:FACTORIES"]
    command += ["--presence-interval", "0.2", "--presence-ttl", "3"]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert process.stdout is not None
        first = process.stdout.readline()
        assert first.startswith(f"orkeon host {host}: up"), first + (process.stderr.read() if process.stderr else "")
        yield Fleet(vhost, keys_file), host
    finally:
        process.terminate()
        try:
            process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def _until(check: Any, what: str, timeout: float = 60.0) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
    raise AssertionError(f"not within {timeout} s: {what}")


def test_roster_spawn_post_stop(fleet: tuple[Fleet, str]) -> None:
    cli, host = fleet
    spawned = cli.json("spawn", "forever", "--host", host, "--crew-id", "ops-1")
    assert spawned == {"crew_id": "ops-1", "kind": "forever", "host": host}
    roster = cli.json("roster")
    assert [view["host"] for view in roster] == [host]  # the operator leaves itself out
    (view,) = roster
    assert view["crews"] == {"ops-1": ["agent://ops-1/a", "crew://ops-1"]}
    assert "forever" in view["kinds"] and 0 <= view["age_s"] < 1 and 0 < view["expires_in_s"] <= 3
    table = cli.run("roster").stdout
    assert table.splitlines()[0].split()[:2] == ["HOST", "AGE"] and host in table and "agent://ops-1/a" in table

    posted = cli.json("post", "agent://ops-1/a", "hello", "--confirm")
    assert posted["host"] == host and posted["confirmed"] is True and posted["message_id"]
    # the crew's one agent waited for one message and ends with it: its mailbox closes
    _until(lambda: "ops-1" not in cli.crews(host), "ops-1 ending after the post reached it")

    cli.json("spawn", "forever", "--host", host, "--crew-id", "ops-2")
    assert cli.json("stop", "ops-2") == {"crew_id": "ops-2", "host": host, "stopped": True}
    assert "ops-2" not in cli.crews(host)


def test_a_refused_message_is_listed_with_its_reason_and_requeued(fleet: tuple[Fleet, str]) -> None:
    cli, host = fleet
    cli.json("spawn", "forever", "--host", host, "--crew-id", "dl-1")
    queue = "inbox.agent://dl-1/a"
    rabbitmqctl(
        "set_policy",
        "-p",
        cli.vhost,
        "full-dl-1",
        f"^{queue}$",
        '{"max-length":0,"overflow":"reject-publish-dlx"}',
        "--apply-to",
        "queues",
        "--priority",
        "10",
    )
    try:
        caps = {row["mailbox"]: row for row in cli.json("caps")}
        assert caps["agent://dl-1/a"]["policy"] == "full-dl-1" and caps["agent://dl-1/a"]["max_length"] == 0
        assert caps["agent://dl-1/a"]["consumers"] == 1 and caps["agent://dl-1/a"]["messages"] == 0
        refused = cli.run("post", "agent://dl-1/a", "again", ok=False)
        assert refused.returncode == 1 and "the broker refused message" in refused.stderr, refused.stderr[-2000:]
        listed = _until(
            lambda: [row for row in cli.json("dlq") if row["recipient"] == "mbox.agent://dl-1/a"],
            "the refused post in fleet.dlq",
        )
    finally:
        rabbitmqctl("clear_policy", "-p", cli.vhost, "full-dl-1")
    (dead,) = listed
    assert dead["reason"] == "maxlen" and dead["queue"] == queue and dead["signed_by"] == "operator"
    assert dead["sender"] == "agent://orkeon-fleet/operator"
    assert [row for row in cli.json("dlq") if row["recipient"] == "mbox.agent://dl-1/a"] == listed  # left in place
    table = cli.run("dlq").stdout
    assert dead["message_id"] in table and "maxlen" in table

    said = cli.run("dlq", "--requeue", dead["message_id"]).stdout
    assert f"requeued {dead['message_id']}" in said and "maxlen" in said
    assert dead["message_id"] not in {row["message_id"] for row in cli.json("dlq")}
    # the agent received it: its crew ends and leaves the roster
    _until(lambda: "dl-1" not in cli.crews(host), "dl-1 ending once the requeued post reached it")


def test_errors_say_what_to_do(fleet: tuple[Fleet, str], tmp_path: Path) -> None:
    cli, host = fleet
    unknown = cli.run("spawn", "forever", "--host", "no-such-host", ok=False)
    assert unknown.returncode == 1 and "'no-such-host' is not on the roster" in unknown.stderr, unknown.stderr
    assert host in unknown.stderr  # names the hosts it heard
    crew = cli.run("stop", "no-such-crew", ok=False)
    assert crew.returncode == 1 and "no host announces crew 'no-such-crew'" in crew.stderr, crew.stderr
    missing = cli.run("dlq", "--requeue", "no-such-id", ok=False)
    assert missing.returncode == 1 and "no dead letter 'no-such-id'" in missing.stderr, missing.stderr

    no_operator = write_keys(tmp_path / "hosts-only.json", fleet_keys([host]))
    command = [*_CLI, "fleet", "--broker", url(cli.vhost), "--keys", str(no_operator), "roster"]
    done = subprocess.run(command, capture_output=True, text=True, timeout=120)
    assert done.returncode == 1 and "no key for the operator 'operator'" in done.stderr, done.stderr

    command = [*_CLI, "fleet", "--broker", "amqp://guest:guest@127.0.0.1:1/x", "--keys", str(cli.keys_file)]
    done = subprocess.run([*command, "--connect-timeout", "1", "roster"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 1 and "Connection refused" in done.stderr and "Traceback" not in done.stderr, done.stderr

    command = [*_CLI, "fleet", "--broker", url(cli.vhost).replace("guest:guest", "guest:wrong")]
    done = subprocess.run([*command, "--keys", str(cli.keys_file), "dlq"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 1 and "refused the login" in done.stderr, done.stderr


def test_caps_are_applied_with_rabbitmqctl_and_said_unreadable_without(fleet: tuple[Fleet, str]) -> None:
    cli, host = fleet
    cli.json("spawn", "forever", "--host", host, "--crew-id", "caps-1")
    applied = cli.json("caps", "--apply", "--max-length", "5000")
    assert applied["vhost"] == cli.vhost and applied["applied"]["max_length"] == 5000
    # the host consumes its inbox (declared with its own caps): capped by the policy, left in place
    assert "inbox.agent://caps-1/a" in applied["in_use"] and "inbox.agent://caps-1/a" not in applied["redeclared"]
    (row,) = [row for row in cli.json("caps") if row["mailbox"] == "agent://caps-1/a"]
    assert row == {
        "mailbox": "agent://caps-1/a",
        "host": host,
        "queue": "inbox.agent://caps-1/a",
        "messages": 0,
        "consumers": 1,
        "policy": "orkeon-inboxes",
        "declared_max_length": 100_000,  # the host's default caps
        "max_length": 5000,  # the lower one is in force
        "capped": True,
    }

    # on a machine without rabbitmqctl: length and consumers over AMQP, the cap said unknown
    dirs = os.environ["PATH"].split(os.pathsep)
    path = os.pathsep.join(d for d in dirs if shutil.which("rabbitmqctl", path=d) is None)
    env = {**os.environ, "PATH": path}
    command = [*_CLI, "fleet", "--broker", url(cli.vhost), "--keys", str(cli.keys_file), "--listen", "1.5", "caps"]
    done = subprocess.run(command, capture_output=True, text=True, timeout=120, env=env)
    assert done.returncode == 0, done.stderr[-2000:]
    line = next(line for line in done.stdout.splitlines() if line.startswith("agent://caps-1/a"))
    assert line.split()[2:] == ["0", "1", "-", "-", "-", "-"]
    assert "AMQP cannot read or set a policy" in done.stderr
    done = subprocess.run([*command, "--apply"], capture_output=True, text=True, timeout=120, env=env)
    assert done.returncode == 1 and "rabbitmqctl is not on PATH" in done.stderr, done.stderr
    assert f"set_policy -p {cli.vhost} orkeon-inboxes" in done.stderr


def test_a_message_a_gateway_refused_is_listed_with_why(fleet: tuple[Fleet, str]) -> None:
    cli, host = fleet
    cli.json("spawn", "forever", "--host", host, "--crew-id", "forged-1")
    headers = {
        "message_id": "forged-0001",
        "from": "agent://forged-1/a",
        "to": "mbox.agent://forged-1/a",
        "host": host,
        "expires_at": str(int(time.time() * 1000) + 60_000),
        "signature": "0" * 64,
    }
    connection = pika.BlockingConnection(pika.URLParameters(url(cli.vhost)))
    try:
        connection.channel().basic_publish(
            "fleet.msg", headers["to"], b"{}", pika.BasicProperties(message_id="forged-0001", headers=headers)
        )
    finally:
        connection.close()
    (dead,) = _until(
        lambda: [row for row in cli.json("dlq") if row["message_id"] == "forged-0001"], "the forgery in fleet.dlq"
    )
    assert dead["reason"] == "rejected" and dead["refused_by"] == host and dead["queue"] == "inbox.agent://forged-1/a"
    assert dead["detail"].startswith("SignatureError") and dead["signed_by"] == ""
    assert "signature" in dead["signature"]
    line = next(line for line in cli.run("dlq").stdout.splitlines() if line.startswith("forged-0001"))
    assert "rejected" in line and "(invalid)" in line and "SignatureError" in line
