"""Routing keys: a mailbox's key is its canonical address, and a crew-scoped topic key can
only match a binding made for that crew (dots in crew ids cannot shift words)."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from orkeon_actors.errors import InvalidArgumentError
from orkeon_actors.hub.amqp.topology import (
    InboxCaps,
    inbox_arguments,
    inbox_policy,
    mailbox_key,
    policy_commands,
    scoped_topic_key,
    topic_key,
)
from orkeon_actors.model.address import MailboxAddress
from orkeon_actors.model.ids import CrewId

crew_ids = st.from_regex(r"[A-Za-z0-9][A-Za-z0-9._-]{0,20}", fullmatch=True).map(CrewId)
words = st.from_regex(r"[a-z0-9]{1,6}", fullmatch=True)
topics = st.lists(words, min_size=1, max_size=4).map(".".join)


@given(a=crew_ids, b=crew_ids, topic_a=topics, topic_b=topics)
def test_scoped_keys_of_different_crews_never_collide(a: CrewId, b: CrewId, topic_a: str, topic_b: str) -> None:
    if (a, topic_a) != (b, topic_b):
        assert scoped_topic_key(a, topic_a) != scoped_topic_key(b, topic_b)


@given(crew=crew_ids, other=crew_ids, topic=topics)
def test_a_scoped_binding_with_hash_matches_only_its_own_crew(crew: CrewId, other: CrewId, topic: str) -> None:
    binding = scoped_topic_key(crew, "#")
    assert _amqp_match(binding, scoped_topic_key(crew, topic))
    if other != crew:
        assert not _amqp_match(binding, scoped_topic_key(other, topic))


def test_keys_name_the_address_and_topic() -> None:
    assert mailbox_key(MailboxAddress.parse("agent://billing.eu/scorer")) == "mbox.agent://billing.eu/scorer"
    assert topic_key("orders.*") == "topic.orders.*"
    assert scoped_topic_key(CrewId("billing.eu"), "orders.created") == "scoped.billing%2Eeu.orders.created"


def test_caps_are_policies_that_dead_letter_overflow() -> None:
    (inboxes, dlq) = inbox_policy()
    assert inboxes[1] == r"^inbox\." and inboxes[2]["overflow"] == "reject-publish-dlx"
    assert re.fullmatch(dlq[1], "fleet.dlq") and re.fullmatch(dlq[1], "fleet.dlq.reports")
    assert not re.fullmatch(dlq[1], "fleet.dlq.other") and dlq[2]["max-length"] > 0
    assert policy_commands("v")[0][:5] == ["rabbitmqctl", "set_policy", "-p", "v", "orkeon-inboxes"]


def test_inbox_arguments_carry_the_caps_the_policy_sets() -> None:
    caps = InboxCaps(max_length=5, max_length_bytes=None, message_ttl_ms=1000, orphan_expiry_ms=60_000)
    assert inbox_arguments(caps) == {
        "x-queue-type": "classic",
        "x-dead-letter-exchange": "fleet.dlx",
        "x-max-length": 5,
        "x-overflow": "reject-publish-dlx",
        "x-message-ttl": 1000,
        "x-expires": 60_000,
    }
    (inboxes, _dlq) = inbox_policy(caps)
    assert {"x-" + name: value for name, value in inboxes[2].items()} == {
        key: value
        for key, value in inbox_arguments(caps).items()
        if key not in ("x-queue-type", "x-dead-letter-exchange")
    }
    with pytest.raises(InvalidArgumentError, match=r"InboxCaps.max_length must be an integer >= 0, got -1"):
        InboxCaps(max_length=-1)


def _amqp_match(binding: str, key: str) -> bool:
    """A topic exchange's match: ``*`` one word, ``#`` zero or more."""
    pattern = ""
    for i, word in enumerate(binding.split(".")):
        sep = "" if i == 0 else r"\."
        if word == "#":
            pattern += r"(?:\..*)?" if i else r".*"
        elif word == "*":
            pattern += sep + r"[^.]+"
        else:
            pattern += sep + re.escape(word)
    return re.fullmatch(pattern, key) is not None
