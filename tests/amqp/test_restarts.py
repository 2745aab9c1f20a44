"""A host that restarts keeps what other hosts are owed: a request delivered to it before
a SIGKILL is still answerable after the restart, and the reply reaches the requester
while the requester's timeout runs (a real child process, killed and restarted)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

import orkeon_actors as ok
from orkeon_actors.errors import CancelledError, SendTimeoutError
from orkeon_actors.fleet.host_process import HostCallError, HostProcess, write_keys
from orkeon_actors.testing import wait_until
from tests.conftest import Background

from .conftest import url
from .fleet import start_host

pytestmark = pytest.mark.rabbitmq

BOOK = "agent://ledger/book"


class Pair:
    """Host ``a`` in this process (the requester), host ``b`` in a child process."""

    def __init__(self, vhost: str, tmp: Path) -> None:
        suffix = uuid.uuid4().hex[:6]
        self.a_id, self.b_id = f"a-{suffix}", f"b-{suffix}"
        keys_file = tmp / "keys.json"
        keys = write_keys(keys_file, [self.a_id, self.b_id])
        self.b = HostProcess(self.b_id, tmp / "b.db", url=url(vhost), keys_file=keys_file, presence=(0.2, 3.0))
        self.b.start()
        self.a = start_host(vhost, self.a_id, tmp / "a.db", keys)

    def asking(self, timeout: float) -> Background:
        """``b`` holds ``BOOK``; ``a`` sends it a request; returns once ``b`` kept it."""
        self.b.call("register", address=BOOK)
        wait_until(lambda: self.a.hub.where(BOOK) == self.b_id, what=f"{BOOK} announced to a")  # type: ignore[attr-defined]
        job = Background(lambda: self.a.hub.bind("front", "desk").send(BOOK, {"invoice": 7}, timeout=timeout))
        wait_until(lambda: self.b.call("depth", address=BOOK) == 1, what="the request kept on b")
        return job

    def stop(self) -> None:
        self.b.stop()
        self.a.stop()


@pytest.fixture
def pair(vhost: str, tmp_path: Path) -> Iterator[Pair]:
    hosts = Pair(vhost, tmp_path)
    try:
        yield hosts
    finally:
        hosts.stop()


def test_a_request_is_answered_after_the_receiving_host_was_killed_and_restarted(pair: Pair) -> None:
    job = pair.asking(timeout=60)
    pair.b.kill()
    pair.b.restart()
    pair.b.call("register", address=BOOK)  # the agent comes back and reads its mailbox
    assert pair.b.call("serve", address=BOOK, count=1, crew="ledger", agent="book", within=30) == 1
    reply = job.get(30)
    assert isinstance(reply, ok.Message)
    assert reply.json() == {"invoice": 7}  # serve answers with the request's own payload
    assert (reply.source_crew_id, reply.source_agent_id) == ("ledger", "book")
    assert reply.target_crew_id == "front"


def test_a_request_whose_deadline_passed_during_the_restart_is_not_answerable(pair: Pair) -> None:
    job = pair.asking(timeout=3)
    pair.b.kill()
    with pytest.raises(SendTimeoutError):
        job.get(30)
    pair.b.restart()
    pair.b.call("register", address=BOOK)
    with pytest.raises(HostCallError) as refused:
        pair.b.call("serve", address=BOOK, count=1, crew="ledger", agent="book", within=30)
    assert refused.value.error == "UnknownCorrelationError"


def test_a_request_cancelled_before_it_reached_its_host_stays_withdrawn_after_a_restart(pair: Pair) -> None:
    """The cancel reaches b while b's gateway holds the request, before b keeps it: b keeps
    the message without a reply route, so its boot after a SIGKILL has nothing to reopen."""
    pair.b.call("register", address=BOOK)
    wait_until(lambda: pair.a.hub.where(BOOK) == pair.b_id, what=f"{BOOK} announced to a")  # type: ignore[attr-defined]
    pair.b.call("load_ops", ops="tests.amqp.held_inbox:OPS")
    pair.b.call("hold_inbox")
    token = ok.CancelToken()
    job = Background(lambda: pair.a.hub.bind("front", "desk").send(BOOK, {"invoice": 7}, timeout=60, cancel=token))
    wait_until(lambda: pair.b.call("held") == 1, what="the request held by b's gateway")
    token.cancel()
    with pytest.raises(CancelledError):
        job.get(30)  # b answered the cancel: it remembers it for the request to come
    pair.b.call("release_inbox")
    wait_until(lambda: pair.b.call("depth", address=BOOK) == 1, what="the request kept on b")
    pair.b.kill()
    pair.b.restart()
    pair.b.call("register", address=BOOK)
    with pytest.raises(HostCallError) as refused:
        pair.b.call("serve", address=BOOK, count=1, crew="ledger", agent="book", within=30)
    assert refused.value.error == "UnknownCorrelationError"


def test_a_request_cancelled_after_its_host_kept_it_stays_withdrawn_after_a_restart(pair: Pair) -> None:
    """b answers the cancel once the withdrawal is durable: killed right after, it reopens
    the request still waiting (answered) but not the cancelled one (refused)."""
    job = pair.asking(timeout=60)
    token = ok.CancelToken()
    cancelled = Background(
        lambda: pair.a.hub.bind("front", "till").send(BOOK, {"invoice": 8}, timeout=60, cancel=token)
    )
    wait_until(lambda: pair.b.call("depth", address=BOOK) == 2, what="both requests kept on b")
    token.cancel()
    with pytest.raises(CancelledError):
        cancelled.get(30)  # b withdrew it: its reply route is deleted, committed
    pair.b.kill()  # at once: nothing more of b's runs after the answer to the cancel
    pair.b.restart()
    pair.b.call("register", address=BOOK)
    assert pair.b.call("serve", address=BOOK, count=1, crew="ledger", agent="book", within=30) == 1
    assert job.get(30).json() == {"invoice": 7}  # type: ignore[attr-defined]
    with pytest.raises(HostCallError) as refused:
        pair.b.call("serve", address=BOOK, count=1, crew="ledger", agent="book", within=30)
    assert refused.value.error == "UnknownCorrelationError"
