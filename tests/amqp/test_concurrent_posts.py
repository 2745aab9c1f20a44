"""Many agents posting at once to a mailbox on another host (their intents and rows
written in shared batches, ``orkeon_actors.store.sent_staged_group``): the recipient
keeps every post exactly once, and every sender's history is complete, holds exactly its
own posts and verifies."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from orkeon_actors.fleet.host_process import HostProcess, write_keys
from orkeon_actors.testing import wait_until

from .conftest import url

pytestmark = pytest.mark.rabbitmq

BOX = "agent://ledger/book"
THREADS = 8
POSTS = 240


@pytest.fixture
def hosts(vhost: str, tmp_path: Path) -> Iterator[tuple[HostProcess, HostProcess]]:
    suffix = uuid.uuid4().hex[:6]
    names = [f"a-{suffix}", f"b-{suffix}"]
    keys = tmp_path / "keys.json"
    write_keys(keys, names)
    a, b = (HostProcess(name, tmp_path / f"{name}.db", url=url(vhost), keys_file=keys) for name in names)
    try:
        yield a.start(), b.start()
    finally:
        a.stop()
        b.stop()


def test_concurrent_posts_to_another_host_are_kept_once_and_each_history_is_complete(
    hosts: tuple[HostProcess, HostProcess],
) -> None:
    a, b = hosts
    b.call("register", address=BOX)
    wait_until(lambda: [b.host_id, BOX] in a.call("roster"), timeout=30, what=f"{BOX} on A's roster")
    drained = b.call_async("drain", address=BOX, count=POSTS, timeout=120)
    a.call("post_many", within=120, to=BOX, count=POSTS, threads=THREADS, crew="billing")
    received = drained.result(120)["ids"]
    assert len(received) == len(set(received)) == POSTS

    sent: list[str] = []
    for index in range(THREADS):
        history = a.call("sent", crew="billing", agent=f"poster-{index}")
        assert (history["state"], history["pending"], history["verified"]) == ("complete", 0, True)
        assert len(history["rows"]) == POSTS // THREADS
        sent += history["rows"]
    assert sorted(sent) == sorted(received)
