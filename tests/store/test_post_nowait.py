"""Pipelined posts (``HubClient.post_nowait`` / ``post_many``): one thread's burst shares
group commits; each future completes once its message is kept and handed over; order,
durability and errors are those of ``post``."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import orkeon_actors as ok
from orkeon_actors.errors import MailboxNotFoundError
from tests.store.conftest import Opener, durable

BOX = "agent://crew/box"


def test_a_burst_from_one_thread_is_received_in_order_and_shares_transactions(open_store: Opener) -> None:
    rt = open_store()
    reader = rt.hub.register_mailbox(BOX).reader()
    client = rt.hub.bind("poster", "p")
    transactions_before = durable(rt).writer.stats.transactions
    futures = [client.post_nowait(BOX, {"n": i}) for i in range(300)]
    messages = [future.result(timeout=30) for future in futures]
    assert [m.json()["n"] for m in messages] == list(range(300))
    assert durable(rt).writer.stats.transactions - transactions_before < 300  # not one commit per post
    assert [reader.receive().json()["n"] for _ in range(300)] == list(range(300))


def test_an_agents_pipelined_posts_are_each_in_its_sent_history_once(open_store: Opener) -> None:
    rt = open_store()
    rt.hub.register_mailbox(BOX)
    client = rt.hub.bind("poster", "p")
    transactions_before = durable(rt).writer.stats.transactions
    messages = [future.result(timeout=30) for future in [client.post_nowait(BOX, i) for i in range(100)]]
    assert durable(rt).writer.stats.transactions - transactions_before < 100  # still group-committed
    history = client.sent()
    assert history.coverage.state.value == "complete"
    assert [str(row.message_id) for row in history.rows] == [str(m.id) for m in messages]
    assert rt.hub.verify_sent(history.sender.address).ok


def test_post_many_returns_every_message_once_committed_and_they_survive_a_restart(open_store: Opener) -> None:
    rt = open_store()
    rt.hub.register_mailbox(BOX)
    messages = rt.hub.bind("poster", "p").post_many([(BOX, {"n": i}) for i in range(50)] + [(BOX, "x", {"k": "v"})])
    assert [m.json() for m in messages[:50]] == [{"n": i} for i in range(50)]
    assert messages[50].metadata == {"k": "v"}
    rt.stop()
    rt = open_store()
    reader = rt.hub.register_mailbox(BOX).reader()
    assert [reader.receive().id for _ in range(51)] == [m.id for m in messages]


def test_what_post_refuses_before_writing_is_raised_at_once(open_store: Opener) -> None:
    rt = open_store()
    client = rt.hub.bind("poster", "p")
    with pytest.raises(MailboxNotFoundError):
        client.post_nowait("agent://nobody/here", 1)
    with pytest.raises(ok.errors.ReservedTopicError):
        client.post_nowait("topic://_system.x", 1)


def test_in_memory_the_future_is_complete_when_post_nowait_returns() -> None:
    with ok.Runtime.start() as rt:
        reader = rt.hub.register_mailbox(BOX).reader()
        future = rt.hub.bind("poster", "p").post_nowait(BOX, {"n": 1})
        assert future.done() and future.result().json() == {"n": 1}
        assert reader.receive().id == future.result().id


def test_a_post_nowait_to_a_topic_publishes() -> None:
    with ok.Runtime.start() as rt:
        subscription = rt.hub.bind("c", "a").subscribe("news")
        future = rt.hub.bind("poster", "p").post_nowait("topic://news", {"n": 1})
        assert next(subscription).id == future.result().id


_CHILD = textwrap.dedent(
    """
    import sys
    import orkeon_actors as ok
    rt = ok.Runtime.start(store=sys.argv[1])
    rt.hub.register_mailbox("agent://crew/box")
    client = rt.hub.bind("poster", "p")
    def report(future):
        print("KEPT", future.result().json()["n"], flush=True)
    for i in range(100_000):
        client.post_nowait("agent://crew/box", {"n": i}).add_done_callback(report)
    """
)


def test_every_post_whose_future_completed_survives_a_sigkill(store_path: Path, open_store: Opener) -> None:
    """A child posts pipelined and prints each post whose future completed; SIGKILLed
    mid-burst, the restarted store holds every one of them, in order."""
    child = subprocess.Popen(
        [sys.executable, "-c", _CHILD, str(store_path)], stdout=subprocess.PIPE, text=True, env=dict(os.environ)
    )
    kept: list[int] = []
    assert child.stdout is not None
    for line in child.stdout:
        kept.append(int(line.split()[1]))
        if len(kept) >= 500:
            break
    child.send_signal(signal.SIGKILL)
    child.wait()
    assert kept == list(range(len(kept)))
    rt = open_store()
    registration = rt.hub.register_mailbox(BOX)
    stored = registration.depth()
    assert stored >= len(kept)
    reader = registration.reader()
    assert [json.loads(reader.receive().payload)["n"] for _ in range(stored)] == list(range(stored))
