"""Per-host broker logins: a host connects with its own user, limited to the fleet's names
on its vhost; a wrong password or a user without access to the vhost is reported within the
bound, and the error says which."""

from __future__ import annotations

import secrets
import uuid
from collections.abc import Iterator

import pytest

from orkeon_actors.errors import BrokerUnavailableError
from orkeon_actors.fleet.broker_admin import rabbitmqctl
from orkeon_actors.hub.amqp.link import BrokerLink, Delivery, Outgoing
from orkeon_actors.hub.amqp.topology import MSG_EXCHANGE, Declarer, inbox_queue, mailbox_key
from orkeon_actors.model.address import MailboxAddress
from orkeon_actors.testing import wait_until

from .conftest import BROKER

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
