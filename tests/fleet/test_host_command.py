"""``orkeon host`` as an operator runs it, without a broker: the keys file must be
private, ``--crews`` imports from the current directory, the bounds are flags."""

from __future__ import annotations

import json
import secrets
import subprocess
import sys
from pathlib import Path

import pytest

from orkeon_actors.cli.host_cmd import load_factories
from orkeon_actors.errors import InvalidArgumentError
from orkeon_actors.fleet.config import load_keys


def _keys_file(path: Path, mode: int) -> Path:
    path.write_text(json.dumps({"host-a": secrets.token_hex(32)}))
    path.chmod(mode)
    return path


@pytest.mark.parametrize("mode", [0o644, 0o640, 0o604, 0o660])
def test_a_keys_file_others_can_read_is_refused(tmp_path: Path, mode: int) -> None:
    keys = _keys_file(tmp_path / "keys.json", mode)
    with pytest.raises(InvalidArgumentError, match=rf"open to its group or to others \(mode 0{mode:o}\).*chmod 600"):
        load_keys(keys)


def test_a_private_keys_file_is_read(tmp_path: Path) -> None:
    assert load_keys(_keys_file(tmp_path / "keys.json", 0o600)).key_of("host-a") is not None


def test_crews_are_imported_from_the_current_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "my_fleet_crews_h30.py").write_text("FACTORIES = {'billing': lambda *args: None}\n")
    monkeypatch.chdir(tmp_path)
    # as under the `orkeon` script: neither '' nor the current directory on the path
    monkeypatch.setattr(sys, "path", [entry for entry in sys.path if entry not in ("", str(tmp_path))])
    monkeypatch.delitem(sys.modules, "my_fleet_crews_h30", raising=False)
    assert list(load_factories("my_fleet_crews_h30:FACTORIES")) == ["billing"]


def test_the_bounds_are_flags_and_checked_before_connecting(tmp_path: Path) -> None:
    keys = _keys_file(tmp_path / "keys.json", 0o600)
    command = [sys.executable, "-m", "orkeon_actors.cli", "host", "--broker", "amqp://guest:guest@127.0.0.1:1/x"]
    command += ["--host-id", "host-a", "--store", str(tmp_path / "a.db"), "--keys", str(keys)]
    command += ["--presence-interval", "9", "--presence-ttl", "3", "--prefetch", "8", "--connect-timeout", "1"]
    done = subprocess.run(command, capture_output=True, text=True, timeout=120)
    said = done.stdout + done.stderr
    assert done.returncode == 1, said[-2000:]
    assert "need 0 < presence_interval < presence_ttl" in said and "got 9.0 and 3.0" in said, said[-2000:]
