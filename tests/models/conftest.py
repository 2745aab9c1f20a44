from __future__ import annotations

from collections.abc import Iterator

import pytest

from .fake_provider import FakeProvider, Sleeps, serve


@pytest.fixture
def provider() -> Iterator[FakeProvider]:
    yield from serve()


@pytest.fixture
def sleeps() -> Sleeps:
    return Sleeps()
