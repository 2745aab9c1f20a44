"""Per-host broker logins: a host connects with its own user, limited to the fleet's names
on its vhost; a wrong password or a user without access to the vhost is reported within the
bound, and the error says which."""

from __future__ import annotations

import secrets
import socket
import threading
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

import orkeon_actors as ok
from orkeon_actors.errors import BrokerAccessError, BrokerUnavailableError
from orkeon_actors.fleet.broker_admin import rabbitmqctl
from orkeon_actors.fleet.config import FleetConfig
from orkeon_actors.hub.amqp.link import BrokerLink, Delivery, Outgoing
from orkeon_actors.hub.amqp.topology import MSG_EXCHANGE, Declarer, inbox_queue, mailbox_key
from orkeon_actors.model.address import MailboxAddress
from orkeon_actors.testing import wait_until

from .conftest import BROKER
from .fleet import FAST_PRESENCE, documented_names, fleet_keys

pytestmark = pytest.mark.rabbitmq

FLEET_NAMES = r"^(fleet\.|inbox\.|control\.|roster\.|topics\.|replies\.|amq\.gen)"


@pytest.fixture
def login(vhost: str) -> Iterator[tuple[str, str]]:
    user, password = f"host-{uuid.uuid4().hex[:8]}", secrets.token_urlsafe(16)
    rabbitmqctl("add_user", user, password)
    try:
        rabbitmqctl("set_permissions", "-p", vhost, user, FLEET_NAMES, FLEET_NAMES, FLEET_NAMES)
        yield user, password
    finally:
        rabbitmqctl("delete_user", user)


def _uri(user: str, password: str, vhost: str) -> str:
    return f"amqp://{user}:{password}@{BROKER[0]}:{BROKER[1]}/{vhost}"


def test_a_host_works_with_its_own_login(vhost: str, login: tuple[str, str]) -> None:
    box = MailboxAddress.parse(f"agent://crew-{uuid.uuid4().hex[:6]}/a")
    link = BrokerLink(_uri(*login, vhost), on_connected=Declarer().shared().inbox(box).run).start()
    try:
        received: list[Delivery] = []
        link.consume(inbox_queue(box), received.append, prefetch=4)
        link.publish(Outgoing(MSG_EXCHANGE, mailbox_key(box), b"{}", uuid.uuid4().hex)).result(10)
        wait_until(lambda: len(received) == 1, what="the delivery")
    finally:
        link.stop()


def test_a_wrong_password_is_reported_as_a_refused_login(vhost: str, login: tuple[str, str]) -> None:
    user, _ = login
    link = BrokerLink(_uri(user, "wrong", vhost))
    try:
        with pytest.raises(BrokerUnavailableError, match="the broker refused the login"):
            link.start(timeout=3)
    finally:
        link.stop()


def test_a_login_without_access_to_the_vhost_is_reported(login: tuple[str, str]) -> None:
    link = BrokerLink(_uri(*login, "%2F"))
    try:
        with pytest.raises(BrokerUnavailableError, match="may not open this vhost"):
            link.start(timeout=3)
    finally:
        link.stop()


def test_a_vhost_that_does_not_exist_is_reported_at_once_as_such(login: tuple[str, str]) -> None:
    link = BrokerLink(_uri(*login, f"no-such-{uuid.uuid4().hex[:6]}"))
    try:  # a definitive refusal: said now, not retried until a 30 s bound reads "did not answer"
        with pytest.raises(BrokerAccessError, match=r"the URI.s vhost does not exist on the broker .*530"):
            link.start(timeout=30)
    finally:
        link.stop()


def test_an_unreachable_broker_says_why(vhost: str) -> None:
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    link = BrokerLink(f"amqp://guest:guest@127.0.0.1:{port}/{vhost}")
    try:
        with pytest.raises(BrokerUnavailableError, match=r"last attempt: ConnectionRefusedError: \[Errno 111\]"):
            link.start(timeout=1)
    finally:
        link.stop()


@pytest.fixture
def documented(vhost: str) -> Iterator[Callable[[str], str]]:
    """Make a login for a host with exactly the documented permissions; its URI."""
    users: list[str] = []

    def make(names: str) -> str:
        user, password = f"host-{uuid.uuid4().hex[:8]}", secrets.token_urlsafe(16)
        rabbitmqctl("add_user", user, password)
        users.append(user)
        rabbitmqctl("set_permissions", "-p", vhost, user, names, names, names)
        return _uri(user, password, vhost)

    yield make
    for user in users:
        rabbitmqctl("delete_user", user)


def test_permissions_missing_a_fleet_name_are_a_typed_error_naming_the_resource(
    vhost: str, documented: Callable[[str], str], tmp_path: Path
) -> None:
    without_receipts = documented_names().replace(r"receipts\.|", "")
    host = f"h-{uuid.uuid4().hex[:6]}"
    config = FleetConfig(documented(without_receipts), host, fleet_keys([host]), **FAST_PRESENCE)  # type: ignore[arg-type]
    with pytest.raises(BrokerAccessError, match=rf"ACCESS_REFUSED - .*receipts\.{host}"):
        ok.Runtime.start(store=str(tmp_path / "h.db"), fleet=config)


def test_hosts_with_exactly_the_documented_permissions_work_across_the_fleet(
    vhost: str, documented: Callable[[str], str], tmp_path: Path
) -> None:
    suffix = uuid.uuid4().hex[:6]
    a_id, b_id = f"a-{suffix}", f"b-{suffix}"
    keys = fleet_keys([a_id, b_id])
    names = documented_names()
    a = ok.Runtime.start(
        store=str(tmp_path / "a.db"), fleet=FleetConfig(documented(names), a_id, keys, **FAST_PRESENCE)
    )  # type: ignore[arg-type]
    b = ok.Runtime.start(
        store=str(tmp_path / "b.db"), fleet=FleetConfig(documented(names), b_id, keys, **FAST_PRESENCE)
    )  # type: ignore[arg-type]
    try:
        box = b.hub.register_mailbox("agent://billing/scorer")
        alerts = b.hub.bind("watch", "w").subscribe("alerts.*")
        wait_until(lambda: a.hub.where("agent://billing/scorer") == b_id, what="a seeing b's mailbox")  # type: ignore[attr-defined]
        client = a.hub.bind("c1", "x")
        posted = client.post("agent://billing/scorer", {"n": 1}, confirm_delivery=True)  # a receipt back
        published = client.publish("alerts.fire", 1)

        def answer() -> None:
            with box.reader() as reader:
                request = reader.receive()
                b.hub.bind("billing", "scorer").reply(request.correlation_id, "pong")

        with box.reader() as reader:
            assert reader.receive().id == posted.id
        responder = threading.Thread(target=answer)
        responder.start()
        assert client.send("agent://billing/scorer", "ping", timeout=30).json() == "pong"
        responder.join(30)
        assert alerts.receive(30).id == published.id
        assert a.fleet is not None and b.fleet is not None
        assert a.fleet.dead_letters.stats.by_reason == {} and b.fleet.dead_letters.stats.by_reason == {}
    finally:
        a.stop()
        b.stop()
