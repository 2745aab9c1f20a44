"""A post that wakes a sleeping crew (its mailbox held live by nobody) takes the writer's
urgent lane: it commits ahead of bulk posts queued before it to other mailboxes, while
each mailbox and each sender keeps its order (orkeon_actors.store.write_queue)."""

from __future__ import annotations

import threading
from concurrent.futures import Future

from orkeon_actors.model.message import Message
from orkeon_actors.store.writer import StoreWriter
from tests.store.conftest import Opener, drain, durable

BOX = "agent://sleeper/a"
SINK = "agent://busy/sink"


def _block(writer: StoreWriter) -> threading.Event:
    entered, release = threading.Event(), threading.Event()

    def hold(_conn: object) -> None:
        entered.set()
        release.wait()

    writer.submit(hold)
    assert entered.wait(10)
    return release


def _committed_in(order: list[object], future: Future[Message]) -> Future[Message]:
    """Record ``future``'s payload when it completes (on the writer thread, at its commit)."""
    future.add_done_callback(lambda f: order.append(f.result().json()))
    return future


def test_a_wake_post_overtakes_queued_bulk_posts_and_its_mailbox_keeps_its_order(open_store: Opener) -> None:
    hub = durable(open_store())
    sink = hub.register_mailbox(SINK)
    hub.park_mailbox(hub.register_mailbox(BOX))  # registered, held by nobody: a sleeping crew's
    hub.writer.execute(lambda _conn: None)  # the park's own request ran (the writer keeps its order)
    load, poster = hub.bind("load", "l"), hub.bind("poster", "p")
    order: list[object] = []
    release = _block(hub.writer)
    bulk = [_committed_in(order, load.post_nowait(SINK, n)) for n in range(20)]
    wake = _committed_in(order, poster.post_nowait(BOX, "wake"))
    box = hub.register_mailbox(BOX)  # live again (no write): the next post is bulk, keyed BOX
    after = _committed_in(order, poster.post_nowait(BOX, "after"))
    release.set()
    for future in [*bulk, wake, after]:
        future.result(timeout=30)
    assert order == ["wake", *range(20), "after"], "the wake first, the rest in order"
    assert hub.writer.stats.urgent_requests == 1
    assert drain(box) == ["wake", "after"]
    assert drain(sink) == list(range(20))


def test_a_wake_post_stays_behind_its_senders_earlier_posts(open_store: Opener) -> None:
    hub = durable(open_store())
    sink = hub.register_mailbox(SINK)
    hub.park_mailbox(hub.register_mailbox(BOX))
    hub.writer.execute(lambda _conn: None)
    poster = hub.bind("poster", "p")
    order: list[object] = []
    release = _block(hub.writer)
    earlier = [_committed_in(order, poster.post_nowait(SINK, n)) for n in range(5)]
    wake = _committed_in(order, poster.post_nowait(BOX, "wake"))
    release.set()
    for future in [*earlier, wake]:
        future.result(timeout=30)
    assert order == [*range(5), "wake"], "one sender's posts commit in its order (its sent history)"
    assert hub.writer.stats.urgent_requests == 0
    assert drain(sink) == list(range(5))
