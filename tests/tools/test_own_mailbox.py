"""``EventHubTools(own_mailbox=...)``: an external peer's tools read its client:// mailbox."""

from __future__ import annotations

import pytest

import orkeon_actors as ok
from orkeon_actors.errors import InvalidArgumentError


def test_a_client_peer_reads_its_own_client_mailbox_and_no_other() -> None:
    with ok.Runtime.start() as rt:
        tools = ok.tools.EventHubTools(rt.hub.bind("gateway-crew", "gw"), own_mailbox="client://studio")
        assert tools.own_mailbox == ok.MailboxAddress.parse("client://studio")
        sent = rt.hub.bind("report", "a").post("client://studio", {"ready": True})
        got = tools.invoke("receive_message", {"timeout_ms": 5000})
        assert got["message"]["id"] == sent.id
        rt.hub.register_mailbox("client://other")
        refused = tools.invoke("receive_message", {"mailbox": "client://other", "timeout_ms": 10}, errors="result")
        assert refused["error"]["field"] == "mailbox"
        tools.close()
        assert not rt.hub.mailbox_registered("client://studio")  # registered by the tools, closed by them


def test_a_topic_cannot_be_the_own_mailbox() -> None:
    with ok.Runtime.start() as rt, pytest.raises(InvalidArgumentError, match="not the topic address"):
        ok.tools.EventHubTools(rt.hub.bind("c", "a"), own_mailbox="topic://news")
