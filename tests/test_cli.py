"""The `orkeon` command a new user meets first."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

import orkeon_actors as ok
from orkeon_actors.bench import context
from orkeon_actors.bench.registry import SUITES, BenchResult, load_suite
from orkeon_actors.cli.bench_cmd import _TerminalProgress
from orkeon_actors.cli.main import main


def test_demo_runs_the_hub_on_the_durable_store_then_a_simulation(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store = tmp_path / "demo.db"
    assert main(["demo", "--no-color", "--store", str(store)]) == 0
    out = capsys.readouterr().out
    assert store.exists()
    assert f"the store is kept at {store}" in out
    assert "saw orders.created from orders/planner" in out
    assert "reply: {'order': 42, 'score': 0.12, 'verdict': 'ok'}" in out
    assert "_system.wait_timed_out" in out
    assert "SendTimeoutError" in out
    assert "after the restart, took" in out and "order 42 approved" in out
    for crew in ("newsroom-1", "research-2", "scoring-3"):
        assert f"{crew}" in out
    assert out.count("completed:") == 3
    assert "\\u" not in out, "no escaped characters in what the demo prints"
    assert "+00:00" not in out, "one timestamp format: RFC 3339 with Z"


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as done:
        main(["--version"])
    assert done.value.code == 0
    assert capsys.readouterr().out.startswith(f"orkeon {ok.__version__}")


@pytest.mark.parametrize(
    ("argv", "choices"),
    [
        (["bench", "nonsense"], "'hub', 'store', 'sim', 'lifecycle', 'wakecost', 'history'"),
        (["simulate", "nonsense"], "'all', 'sequential', 'hierarchical'"),
        (["store", "x.db", "nonsense"], "'crews', 'waits', 'mailboxes', 'outbox', 'last-values', 'show', 'purge'"),
        (["nonsense"], "'demo', 'simulate', 'mcp', 'crew', 'bench', 'store', 'message', 'studio'"),
    ],
)
def test_an_unknown_choice_prints_the_choices_with_exit_status_2(
    argv: list[str], choices: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as done:
        main(argv)
    assert done.value.code == 2
    err = capsys.readouterr().err
    assert "invalid choice: 'nonsense'" in err and choices in err


@pytest.mark.parametrize("argv", [["-v", "store"], ["store", "-v"]])
def test_verbose_is_accepted_before_and_after_the_subcommand(
    argv: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "s.db"
    with ok.Runtime.start(store=db) as rt:
        rt.hub.register_mailbox("agent://c/a")
    args = [*argv[:-1], argv[-1], str(db), "mailboxes"] if argv[0] == "-v" else ["store", str(db), "mailboxes", "-v"]
    assert main(args) == 0
    assert "agent://c/a" in capsys.readouterr().out


def _fake_hub(figure: float) -> BenchResult:
    return BenchResult("hub", {"post_receive_vs_tell": figure, "raw_tell_per_s": 1e6}, {"raw_tell_per_s": "msg/s"})


@pytest.mark.parametrize(("figure", "met"), [(0.65, True), (0.10, False)])
def test_bench_marks_targets_and_check_fails_on_a_miss(
    figure: float, met: bool, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    load_suite("hub")  # the real suite registers itself first; then it is replaced
    monkeypatch.setitem(SUITES, "hub", lambda quick: _fake_hub(figure))
    assert main(["bench", "hub", "--json", "--check"]) == (0 if met else 1)
    data = json.loads(capsys.readouterr().out)
    assert data["targets"]["hub"]["post_receive_vs_tell"] == {"target": "≥ 0.6", "met": met}
    assert "raw_tell_per_s" not in data["targets"]["hub"]
    assert main(["bench", "hub"]) == 0  # without --check a miss is reported, not an error
    table = capsys.readouterr().out
    assert ("✓ target ≥ 0.6" if met else "✗ target ≥ 0.6") in table
    assert ("missed their target: hub.post_receive_vs_tell" in table) is not met


def test_bench_progress_is_one_rewritten_status_line() -> None:
    stream = io.StringIO()
    show = _TerminalProgress(stream)
    with context.running(None, show):
        context.progress("suite hub (1/2)")
        context.progress("round 3/7")
    show.done()
    assert stream.getvalue() == (
        "\r\033[Korkeon bench: suite hub (1/2)\r\033[Korkeon bench: suite hub (1/2): round 3/7\r\033[K"
    )
    context.progress("nobody listens")  # outside a run: a no-op


def test_bench_scratch_stores_go_to_the_temp_directory_or_dir(tmp_path: Path) -> None:
    default = context.scratch_directory("orkeon-test-")
    try:
        assert Path(default).parent == Path(tempfile.gettempdir())
        assert not Path(default).is_relative_to(Path.cwd()) or Path.cwd() == Path(tempfile.gettempdir())
    finally:
        os.rmdir(default)
    with context.running(tmp_path, None):
        chosen = context.scratch_directory("orkeon-test-")
    assert Path(chosen).parent == tmp_path
    with pytest.raises(ok.errors.InvalidArgumentError, match="not a directory"):
        with context.running(tmp_path / "missing", None):
            pass


def test_bench_dir_must_exist(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bench", "hub", "--dir", str(tmp_path / "missing")]) == 1
    assert "is not a directory" in capsys.readouterr().err


def test_the_cli_names_every_simulated_example() -> None:
    from orkeon_actors.cli.main import SIMULATED_MODES
    from orkeon_actors.sim.examples import EXAMPLES

    assert SIMULATED_MODES == tuple(EXAMPLES)


def test_building_the_cli_loads_neither_the_simulator_nor_the_durable_hub() -> None:
    # Every command pays for what the parser imports: `orkeon message sent` must not
    # load the simulator, the crews or the durable hub before it reads one table.
    probe = (
        "import sys; from orkeon_actors.cli.main import _build_parser; _build_parser(); "
        "import orkeon_actors.cli.message_cmd; "
        "print(sorted(m for m in ('orkeon_actors.sim', 'orkeon_actors.crew', 'orkeon_actors.store.durable_hub') "
        "if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
