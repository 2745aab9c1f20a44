"""`orkeon simulate` runs the packaged mode examples (examples/ are run by tests/test_examples.py)."""

from __future__ import annotations

import pytest


def test_orkeon_simulate_prints_a_timeline(capsys: pytest.CaptureFixture[str]) -> None:
    from orkeon_actors.cli.main import main

    assert main(["simulate", "graph"]) == 0
    out = capsys.readouterr().out
    assert "== graph" in out and "transition" in out and "-> completed" in out
    with pytest.raises(SystemExit) as usage:
        main(["simulate", "nope"])
    assert usage.value.code == 2
