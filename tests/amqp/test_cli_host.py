"""``orkeon host``: one command runs a fleet host; another host spawns a crew on it; SIGTERM
stops it cleanly (its crews put to sleep); bad --crews is refused with the reason."""

from __future__ import annotations

import signal
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from orkeon_actors.bench.lifecycle import FACTORIES, FOREVER_NAME
from orkeon_actors.cli.host_cmd import load_factories
from orkeon_actors.errors import InvalidArgumentError
from orkeon_actors.fleet.hub import AmqpEventHub
from orkeon_actors.testing import wait_until

from .conftest import url
from .fleet import fleet_keys, start_host, write_keys

pytestmark = pytest.mark.rabbitmq


def test_a_host_started_by_the_command_serves_spawns_and_stops_on_sigterm(vhost: str, tmp_path: Path) -> None:
    suffix = uuid.uuid4().hex[:6]
    here, there = f"a-{suffix}", f"cli-{suffix}"
    keys = fleet_keys([here, there])
    keys_file = write_keys(tmp_path / "keys.json", keys)
    command = [sys.executable, "-m", "orkeon_actors.cli", "host", "--broker", url(vhost), "--host-id", there]
    command += ["--store", str(tmp_path / "cli.db"), "--keys", str(keys_file)]
    command += ["--crews", "orkeon_actors.bench.lifecycle:FACTORIES"]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    runtime = None
    try:
        assert process.stdout is not None
        first = process.stdout.readline()
        assert first.startswith(f"orkeon host {there}: up on amqp://guest@127.0.0.1:5672/{vhost}"), first
        assert "kinds " + ", ".join(sorted(FACTORIES)) in first
        runtime = start_host(vhost, here, tmp_path / "a.db", keys)
        hub = runtime.hub
        assert isinstance(hub, AmqpEventHub) and runtime.fleet is not None
        wait_until(lambda: there in {p.host for p in hub.roster()}, timeout=30, what="the CLI host on the roster")
        crew = runtime.fleet.spawn(FOREVER_NAME, host=there, crew_id="from-cli", timeout=30)
        assert hub.where("agent://from-cli/a") == there
        process.send_signal(signal.SIGTERM)
        out, err = process.communicate(timeout=60)
        assert process.returncode == 0, err[-2000:]
        assert out.strip().endswith(f"orkeon host {there}: stopped")
        assert crew == "from-cli"
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        if runtime is not None:
            runtime.stop()


@pytest.mark.parametrize(
    ("spec", "says"),
    [
        ("nocolon", "write it MODULE:NAME"),
        ("no_such_module_xyz:F", "cannot import no_such_module_xyz"),
        ("orkeon_actors.errors:__all__", "is not a non-empty {kind: factory}"),
    ],
)
def test_bad_crews_are_refused_with_the_reason(spec: str, says: str) -> None:
    with pytest.raises(InvalidArgumentError, match=says.replace("{", r"\{").replace("}", r"\}")):
        load_factories(spec)


def test_a_vhost_that_does_not_exist_is_said_at_once_not_retried(tmp_path: Path) -> None:
    keys_file = write_keys(tmp_path / "keys.json", fleet_keys(["h1"]))
    missing = f"no-such-{uuid.uuid4().hex[:6]}"
    command = [sys.executable, "-m", "orkeon_actors.cli", "host", "--broker", url(missing), "--host-id", "h1"]
    command += ["--store", str(tmp_path / "h1.db"), "--keys", str(keys_file)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=120)
    said = done.stdout + done.stderr
    assert done.returncode == 1, said[-2000:]
    assert f"vhost {missing} not found" in said and "does not exist on the broker" in said, said[-2000:]
    assert "did not answer" not in said
