"""The first hour with the ``orkeon`` command: ``orkeon bench`` runs every suite that needs
no extra on a plain install and names the extra a suite needs; it prints no loguru DEBUG
line into its output; ``orkeon simulate | head`` ends quietly; ``--until`` refuses a
negative time. Each runs a real child interpreter where an install is simulated."""

from __future__ import annotations

import re
import subprocess
import sys
import textwrap
import tomllib
from pathlib import Path

import pytest
from loguru import logger

import orkeon_actors as ok
from orkeon_actors.bench import context
from orkeon_actors.bench.registry import EXTRA_OF_MODULE, SUITE_MODULES, SUITE_NAMES
from orkeon_actors.cli.main import SIGPIPE_EXIT, main
from orkeon_actors.sim import Simulation

ROOT = Path(__file__).resolve().parents[1]

WITHOUT_EXTRAS = textwrap.dedent(
    """
    import sys
    for name in ("pika", "autogen_core", "langgraph", "mcp"):
        sys.modules[name] = None  # not installed: importing it raises ModuleNotFoundError
    from orkeon_actors.bench.registry import load_suite
    from orkeon_actors.cli.main import main
    if sys.argv[1] == "load":
        for suite in sys.argv[2:]:
            load_suite(suite)
        print("loaded", " ".join(sys.argv[2:]))
    else:
        raise SystemExit(main(sys.argv[1:]))
    """
)


def _without_extras(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", WITHOUT_EXTRAS, *args], capture_output=True, text=True, timeout=120, check=False
    )


def test_every_suite_but_amqp_imports_on_a_plain_install() -> None:
    """Before: every suite failed with ``No module named 'pika'`` (the registry imported
    them all, amqp's pika with them)."""
    plain = [name for name in SUITE_NAMES if name != "amqp"]
    result = _without_extras("load", *plain)
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.split() == ["loaded", *plain]


def test_a_suite_missing_its_extra_names_the_extra_to_install() -> None:
    result = _without_extras("bench", "amqp", "--quick")
    assert result.returncode == 1
    assert "Traceback" not in result.stderr
    assert "orkeon bench: the amqp suite needs pika, which is not installed" in result.stderr
    assert "pip install 'orkeon-actors[amqp]'" in result.stderr


def test_the_extras_name_what_each_suite_needs() -> None:
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    names = {extra: {re.split(r"[<>=\[ ]", req)[0] for req in reqs} for extra, reqs in extras.items()}
    assert {"pika", "autogen-core", "langgraph"} <= names["bench"]  # the documented [bench] runs every suite
    assert "pika" in names["amqp"]
    distribution = {"a2a": "a2a-sdk"}  # where the import name is not the distribution's
    for module, extra in EXTRA_OF_MODULE.items():
        assert distribution.get(module, module.replace("_", "-")) in names[extra], (module, extra)
    assert set(SUITE_MODULES) == set(SUITE_NAMES)


def _log_from_the_runtime(level: str, text: str) -> None:
    """A record as a module of the runtime logs it (loguru names it by the caller's module)."""
    exec(f"from loguru import logger\nlogger.log({level!r}, {text!r})", {"__name__": "orkeon_actors.probe"})


def test_a_suite_that_took_loguru_over_leaves_no_debug_handler_behind(capfd: pytest.CaptureFixture[str]) -> None:
    """Before: the middleware suite's stage set and the lifecycle suite's INFO run put
    loguru's default handler back (DEBUG on stderr), and the runtime's debug lines ran
    into the figures."""
    from orkeon_actors.bench.lifecycle import info_logging
    from orkeon_actors.bench.middleware import FiveStages

    ok.enable_logging("WARNING")  # as the command sets it
    try:
        with context.running(None, None, log_level="WARNING"):
            with FiveStages():
                pass
            _log_from_the_runtime("DEBUG", "runtime debug line")
            with info_logging():
                pass
            _log_from_the_runtime("DEBUG", "runtime debug line")
            _log_from_the_runtime("WARNING", "a warning still shows")
    finally:
        ok.disable_logging()
        logger.remove()
        logger.enable("orkeon_actors")  # as tests/conftest.py left it: later tests observe the records
    err = capfd.readouterr().err
    assert "runtime debug line" not in err
    assert "a warning still shows" in err


def test_simulate_into_a_closed_pipe_exits_quietly() -> None:
    """``orkeon simulate all --json | head -c0``: before, a ``BrokenPipeError`` traceback."""
    child = subprocess.Popen(
        [sys.executable, "-m", "orkeon_actors.cli", "simulate", "all", "--json"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert child.stdout is not None and child.stderr is not None
    child.stdout.close()  # the reader goes away before the first line
    err = child.stderr.read().decode()
    assert child.wait(timeout=120) == SIGPIPE_EXIT
    assert "Traceback" not in err and "BrokenPipeError" not in err and "Exception ignored" not in err


@pytest.mark.parametrize("until", ["-5", "nan", "inf", "soon"])
def test_simulate_refuses_an_until_that_is_not_a_time(until: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as refused:
        main(["simulate", "graph", "--until", until])
    assert refused.value.code == 2
    assert "--until" in capsys.readouterr().err


def test_simulation_run_refuses_a_negative_until() -> None:
    with Simulation(seed=0) as sim, pytest.raises(ok.errors.InvalidArgumentError, match="0 or more virtual seconds"):
        sim.run(until=-5)
