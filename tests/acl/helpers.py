"""Helpers shared by the ACL tests: try one kind of message and report whether it went."""

from __future__ import annotations

import pytest

import orkeon_actors as ok
from tests.acl.conftest import Crew, World

KINDS = ("post", "send", "publish")


def attempt(world: World, kind: str, sender: Crew | ok.HubClient, target: Crew, topic: str = "orders.created") -> bool:
    """Send one ``kind`` message (post, send = the request half of a send, or a publish
    scoped to ``target``'s crew) and return whether it was delivered. A refusal must be
    an ``EventAclError`` and must deliver nothing; an acceptance must deliver exactly
    one message to the target."""
    client = sender.client if isinstance(sender, Crew) else sender
    sub = world.subscribe(target, topic)
    before = target.mailbox.depth()
    try:
        if kind == "post":
            client.post(target.address, {"kind": kind})
        elif kind == "send":
            client.request(target.address, {"kind": kind}, timeout=60)
        elif kind == "publish":
            client.publish(topic, {"kind": kind}, ok.PublishOptions(target_crew_id=target.id))
        else:
            raise AssertionError(f"unknown kind {kind}")
    except ok.errors.EventAclError:
        assert target.mailbox.depth() == before, "a refused message must not reach the mailbox"
        assert sub.drain() == [], "a refused publish must not reach a subscriber"
        sub.close()
        return False
    if kind == "publish":
        got = sub.drain()
        assert len(got) == 1 and got[0].target_crew_id == target.id
        assert target.mailbox.depth() == before
    else:
        assert target.mailbox.depth() == before + 1
        assert sub.drain() == []
    sub.close()
    return True


def refusal(
    world: World, kind: str, sender: Crew | ok.HubClient, target: Crew, topic: str = "orders.created"
) -> ok.errors.EventAclError:
    """The ``EventAclError`` a ``kind`` message from ``sender`` to ``target`` raises."""
    client = sender.client if isinstance(sender, Crew) else sender
    with pytest.raises(ok.errors.EventAclError) as info:
        if kind == "post":
            client.post(target.address, b"x")
        elif kind == "send":
            client.request(target.address, b"x", timeout=60)
        else:
            client.publish(topic, b"x", ok.PublishOptions(target_crew_id=target.id))
    return info.value
