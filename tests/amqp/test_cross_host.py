"""The hub's contract across host processes: the publisher, the subscriber, the poster and
the waiter each live in a different child process with its own store and host id, joined
only by the broker (spec §17: publish on one side and wait on the other)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from orkeon_actors.fleet.host_process import HostCallError, HostProcess, write_keys
from orkeon_actors.testing import wait_until

from .conftest import url

pytestmark = pytest.mark.rabbitmq

MAILBOX = "agent://billing/scorer"


class Hosts:
    """Three host processes: ``owner`` holds the mailbox and the subscription,
    ``sender`` posts and publishes, ``waiter`` waits and sends requests."""

    def __init__(self, vhost: str, tmp: Path) -> None:
        suffix = uuid.uuid4().hex[:6]
        names = [f"owner-{suffix}", f"sender-{suffix}", f"waiter-{suffix}"]
        keys_file = tmp / "keys.json"
        write_keys(keys_file, names)
        self.processes = [
            HostProcess(name, tmp / f"{name}.db", url=url(vhost), keys_file=keys_file, presence=(0.2, 3.0))
            for name in names
        ]
        for process in self.processes:
            process.start()
        self.owner, self.sender, self.waiter = self.processes

    def stop(self) -> None:
        for process in self.processes:
            process.stop()


@pytest.fixture(scope="module")
def hosts(vhost: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Hosts]:
    fleet = Hosts(vhost, tmp_path_factory.mktemp("hosts"))
    try:
        fleet.owner.call("register", address=MAILBOX)
        for other in (fleet.sender, fleet.waiter):
            wait_until(lambda o=other: o.call("where", address=MAILBOX) == fleet.owner.host_id, what="presence")
        yield fleet
    finally:
        fleet.stop()


def test_a_post_from_one_process_reaches_a_mailbox_in_another(hosts: Hosts) -> None:
    sent = hosts.sender.call("post", to=MAILBOX, payload='{"n": 1}', crew="front", agent="x")
    got = hosts.owner.call("receive", address=MAILBOX, timeout=30)
    assert (got["id"], got["payload"]) == (sent, '{"n": 1}')
    assert (got["source_crew_id"], got["source_agent_id"]) == ("front", "x")


def test_a_publish_reaches_a_subscriber_and_a_waiter_in_two_other_processes(hosts: Hosts) -> None:
    hosts.owner.call("subscribe", pattern="orders.*")
    waiting = hosts.waiter.call_async("wait_topic", pattern="orders.#", timeout=30)
    wait_until(lambda: hosts.waiter.call("pending_waits").get("on_topic", 0) == 1, what="the wait in place")
    published = hosts.sender.call("publish", topic="orders.created", payload='{"order": 42}')
    assert hosts.owner.call("next", pattern="orders.*", timeout=30)["id"] == published
    assert waiting.result(60)["id"] == published


def test_send_from_one_process_is_answered_from_another(hosts: Hosts) -> None:
    serving = hosts.owner.call_async("serve", address=MAILBOX, count=1, crew="billing", agent="scorer")
    assert hosts.waiter.call("send", to=MAILBOX, payload='"ping"', timeout=30) == '"ping"'
    assert serving.result(60) == 1


def test_a_retained_value_is_read_in_another_process(hosts: Hosts) -> None:
    retained = hosts.sender.call("retain", topic="prices.eur", key="eur", payload="7")

    def arrived() -> bool:
        value = hosts.waiter.call("last_value", key="eur")
        return value is not None and value["id"] == retained

    wait_until(arrived, what="the retained value on the waiter's host")


def test_posting_to_an_address_no_process_announces_fails_fast(hosts: Hosts) -> None:
    with pytest.raises(HostCallError) as raised:
        hosts.sender.call("post", to="agent://nobody/here", payload="1")
    assert raised.value.error == "MailboxNotFoundError"
