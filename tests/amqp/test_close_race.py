"""Closing a mailbox whose posts come from another host hands back what the broker had
confirmed to their posters, as ``close()`` does on one host (the contract's
``test_unregister_while_posting_never_swallows_a_message`` runs split too): the recipient's
gateway unbinds the inbox, drains what it holds into its store, then closes the mailbox."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from orkeon_actors.errors import MailboxNotFoundError
from orkeon_actors.testing import wait_until
from tests.conftest import Background

from .test_hub import Fleet

pytestmark = pytest.mark.rabbitmq

BOX = "agent://billing/scorer"


@pytest.fixture
def fleet(vhost: str, tmp_path: Path) -> Iterator[Fleet]:
    pair = Fleet(vhost, tmp_path, prefetch=2)  # b holds 2 deliveries at most: the rest wait in its inbox queue
    try:
        yield pair
    finally:
        pair.stop()


def test_posts_confirmed_before_a_remote_close_are_handed_back_by_close(fleet: Fleet) -> None:
    registration = fleet.register_on_b(BOX)
    hub_b = fleet.hub_b
    release = threading.Event()
    take_posts = hub_b.take_posts

    def held(batch: list[Any]) -> list[BaseException | None]:
        release.wait(30)  # b's gateway has them, its store not yet
        return take_posts(batch)

    hub_b.take_posts = held  # type: ignore[method-assign]
    poster = fleet.a.hub.bind("front", "desk")
    sent = [poster.post(BOX, {"n": n}).id for n in range(6)]  # each confirmed by the broker
    closing = Background(registration.close)
    wait_until(lambda: hub_b.where(BOX) is None, what="b taking the mailbox off its roster")
    release.set()
    leftovers = closing.get(60)
    assert isinstance(leftovers, list)
    assert [message.id for message in leftovers] == sent
    with pytest.raises(MailboxNotFoundError):
        poster.post(BOX, {"n": 6})
    assert fleet.hub_b.gateway.rejected == 0  # nothing dead-lettered, so no DeliveryFailed to the poster
