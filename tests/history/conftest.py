"""Fixtures of the sent-history tests: runtimes on one store file, reopened at will."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import orkeon_actors as ok

Opener = Callable[..., ok.Runtime]


@pytest.fixture
def store_path(tmp_path: Path) -> Path:
    return tmp_path / "state.db"


@pytest.fixture
def open_store(store_path: Path) -> Iterator[Opener]:
    """``open_store(**config)`` starts a runtime on ``store_path`` (``config`` goes to
    ``StoreConfig``); every runtime it started is stopped at teardown."""
    started: list[ok.Runtime] = []

    def open_(**config: Any) -> ok.Runtime:
        from orkeon_actors.store import StoreConfig

        rt = ok.Runtime.start(store=StoreConfig(str(store_path), **config))
        started.append(rt)
        return rt

    yield open_
    for rt in reversed(started):
        rt.stop()
