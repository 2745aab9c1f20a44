"""Fixtures of the hostile-input suite (issue 15, ``docs/security.md``).

Every test here plays an attacker: a prompt-injected agent calling its tools, or Python
code holding a client bound to its own crew. ``hub_runtime`` runs on both hubs.

The fuzz tests take their size from a hypothesis profile: ``fuzz`` (the default, 40-60
examples a test, what CI runs) or ``fuzz-long`` for a local soak::

    ORKEON_FUZZ_PROFILE=fuzz-long python -m pytest tests/security -q -p no:randomly
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

import orkeon_actors as ok

settings.register_profile(
    "fuzz",
    max_examples=50,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture, HealthCheck.data_too_large],
)
settings.register_profile(
    "fuzz-long",
    max_examples=5_000,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture, HealthCheck.data_too_large],
)
FUZZ = settings.get_profile(os.environ.get("ORKEON_FUZZ_PROFILE", "fuzz"))
"""Apply with ``@settings(FUZZ)`` (or ``settings(FUZZ, max_examples=...)`` to scale)."""

HUBS = ("memory", "sqlite")


def start(kind: str, tmp: Path, **options: object) -> ok.Runtime:
    """A runtime on the hub ``kind`` (``memory`` or ``sqlite``)."""
    if kind == "sqlite":
        return ok.Runtime.start(store=str(tmp / "state.db"), **options)  # type: ignore[arg-type]
    return ok.Runtime.start(**options)  # type: ignore[arg-type]


@pytest.fixture(params=HUBS)
def hub_kind(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def rt(hub_kind: str, tmp_path: Path) -> Iterator[ok.Runtime]:
    runtime = start(hub_kind, tmp_path)
    try:
        yield runtime
    finally:
        runtime.stop()
