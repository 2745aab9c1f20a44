"""The contract suite runs on every adapter of ``tests.conftest.ADAPTERS`` and on
``amqp-xhost``: the same tests with their clients spread over three hosts of a fleet
(``tests/amqp/split.py``), so that every publisher and poster lives on another host than
the subscribers, waiters and mailboxes it reaches.

``NOT_SPLIT`` lists the few contract tests that do not run split, each with its reason;
they still run on every other adapter, ``amqp`` (one host) included."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import orkeon_actors as ok
from tests.conftest import ADAPTERS

CROSS_HOST = "amqp-xhost"


def _split(tmp: Path, clock: ok.Clock | None) -> Any:
    from tests.amqp.split import split_runtime

    return split_runtime(tmp, clock)


CONTRACT_ADAPTERS: dict[str, Callable[[Path, ok.Clock | None], Any]] = {**ADAPTERS, CROSS_HOST: _split}

NOT_SPLIT: dict[str, str] = {}
"""Contract tests left out of the cross-host variant (by function name), and why."""


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "adapter" not in metafunc.fixturenames:
        return
    names = sorted(CONTRACT_ADAPTERS)
    if metafunc.function.__name__ in NOT_SPLIT:
        names.remove(CROSS_HOST)
    metafunc.parametrize("adapter", names, indirect=True)


@pytest.fixture
def adapter(request: pytest.FixtureRequest) -> str:
    """The adapter's name (parametrised by ``pytest_generate_tests``)."""
    return str(request.param)


@pytest.fixture
def adapters() -> dict[str, Callable[[Path, ok.Clock | None], Any]]:
    """The runtime fixtures of ``tests/conftest.py`` build from this table here."""
    return CONTRACT_ADAPTERS
