from __future__ import annotations

from collections.abc import Iterator

import pytest

import orkeon_actors as ok

from .fake_provider import FakeProvider, Sleeps, serve


@pytest.fixture
def provider() -> Iterator[FakeProvider]:
    yield from serve()


@pytest.fixture
def sleeps() -> Sleeps:
    return Sleeps()


@pytest.fixture
def rt() -> Iterator[ok.Runtime]:
    """A runtime on the system clock (its I/O loop makes the adapters' calls)."""
    with ok.Runtime.start() as runtime:
        yield runtime
