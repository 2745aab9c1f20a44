"""Every row of the §10.2 table, every row of the §10.3 direction table, and every
sentence around them, checked end to end through a runtime with the ACL stage."""

from __future__ import annotations

import pytest

import orkeon_actors as ok
from orkeon_actors.acl import CrewLink
from tests.acl.conftest import World, bidirectional, inbound, outbound
from tests.acl.helpers import KINDS, attempt, refusal

# -- §10.2 rule 1: a message with no target passes ------------------------------------


def test_rule1_global_publish_passes_even_from_a_closed_crew(world: World) -> None:
    closed = world.crew("closed", [])
    other = world.crew("other", [])
    sub = world.subscribe(other, "news.#")
    message = closed.client.publish("news.daily", {"n": 1})
    assert message.target_crew_id is None
    assert sub.drain() == [message]


def test_rule1_topic_mailbox_post_passes_even_from_a_closed_crew(world: World) -> None:
    closed = world.crew("closed", [])
    other = world.crew("other")
    sub = world.subscribe(other, "news.daily")
    closed.client.post("topic://news.daily", {"n": 1})
    [got] = sub.drain()
    assert got.target_crew_id is None and got.source_crew_id == closed.id


# -- §10.2 rule 2: a crew that never declared links: ----------------------------------


@pytest.mark.parametrize("kind", KINDS)
def test_rule2_undeclared_crew_passes_by_default(permissive: World, kind: str) -> None:
    a = permissive.crew("a")
    b = permissive.crew("b", [])  # the target's declaration is not consulted
    assert attempt(permissive, kind, a, b)


@pytest.mark.parametrize("kind", KINDS)
def test_rule2_restrictive_policy_refuses_undeclared_senders(restrictive: World, kind: str) -> None:
    a = restrictive.crew("a")
    b = restrictive.crew("b")
    error = refusal(restrictive, kind, a, b)
    assert error.rule == "undeclared-refused"
    assert "add {to: a, direction: inbound" in str(error)
    assert "add {to: b, direction: outbound" in str(error)


@pytest.mark.parametrize("kind", KINDS)
def test_rule2_restrictive_lets_an_undeclared_sender_in_when_the_target_grants_inbound(
    restrictive: World, kind: str
) -> None:
    a = restrictive.crew("a")
    b = restrictive.crew("b", [inbound("a")])
    c = restrictive.crew("c")
    assert attempt(restrictive, kind, a, b)
    assert not attempt(restrictive, kind, a, c), "the grant is b's, not everybody's"


# -- §10.2 rule 3: a crew that declared links is held to them -------------------------


@pytest.mark.parametrize("kind", KINDS)
def test_rule3_declared_but_empty_block_refuses_everything(world: World, kind: str) -> None:
    a = world.crew("a", [])
    b = world.crew("b")
    error = refusal(world, kind, a, b)
    assert error.rule == "declared-empty"


@pytest.mark.parametrize("kind", KINDS)
def test_rule3_declared_crew_is_held_to_its_links(world: World, kind: str) -> None:
    a = world.crew("a", [outbound("b")])
    b = world.crew("b")
    c = world.crew("c")
    assert attempt(world, kind, a, b)
    error = refusal(world, kind, a, c)
    assert error.rule == "declared-no-link"
    assert "add {to: c, direction: outbound" in str(error)


@pytest.mark.parametrize("kind", KINDS)
def test_rule3_a_block_whose_entries_all_failed_to_parse_closes_the_door(world: World, kind: str) -> None:
    a = world.crew(
        None,
        yaml="name: a\nlinks:\n  - direction: outbound\n  - to: b\n    direction: both-ways\n  - to: b\n",
    )
    b = world.crew("b")
    block = world.registry.declaration("a")
    assert block is not None and block.declared and block.links == () and len(block.warnings) == 3
    error = refusal(world, kind, a, b)
    assert error.rule == "declared-empty"
    assert "3 entries were discarded" in str(error)


# -- §10.2 rule 4: a declared link that matches ---------------------------------------


def test_rule4_scoped_publish_needs_the_link_to_name_the_target_and_authorize_the_topic(world: World) -> None:
    a = world.crew("a", [outbound("b", "fraud.check"), outbound("c")])
    b = world.crew("b")
    c = world.crew("c")
    d = world.crew("d")
    assert attempt(world, "publish", a, b, "fraud.check")
    error = refusal(world, "publish", a, b, "fraud.result")
    assert error.rule == "topic-not-allowed"
    assert "allowed_topics" in str(error)
    assert attempt(world, "publish", a, c, "fraud.result"), "empty allowed_topics authorizes every topic"
    assert refusal(world, "publish", a, d, "fraud.check").rule == "declared-no-link"


@pytest.mark.parametrize("kind", ["post", "send"])
def test_rule4_point_to_point_mail_is_authorized_by_the_link_itself(world: World, kind: str) -> None:
    a = world.crew("a", [outbound("b", "fraud.check")])
    b = world.crew("b")
    assert attempt(world, kind, a, b), "allowed_topics never constrains post/send"


def test_rule4_links_to_different_peers_each_authorize(world: World) -> None:
    a = world.crew("a", [outbound("b", "x.one"), bidirectional("c", "x.two")])
    b = world.crew("b")
    c = world.crew("c")
    assert attempt(world, "publish", a, b, "x.one")
    assert attempt(world, "publish", a, c, "x.two")
    assert not attempt(world, "publish", a, b, "x.two")


def test_rule4_a_peer_named_twice_gets_the_narrowest_reading(world: World) -> None:
    """Issue 15: two entries for one peer no longer add up (one with no allowed_topics
    opened every topic); the peer gets what every entry allows."""
    a = world.crew("a", [outbound("b", "x.one"), bidirectional("b", "x.one", "x.two")])
    b = world.crew("b")
    assert attempt(world, "publish", a, b, "x.one")
    assert not attempt(world, "publish", a, b, "x.two")
    widening = world.crew("w", [outbound("b", "x.one"), outbound("b")])
    assert attempt(world, "publish", widening, b, "x.one")
    assert not attempt(world, "publish", widening, b, "x.three")
    disjoint = world.crew("d", [outbound("b", "x.one"), outbound("b", "x.two")])
    assert not attempt(world, "publish", disjoint, b, "x.one")


def test_allowed_topics_accept_subscription_wildcards(world: World) -> None:
    a = world.crew("a", [outbound("b", "fraud.*")])
    b = world.crew("b")
    assert attempt(world, "publish", a, b, "fraud.check")
    assert not attempt(world, "publish", a, b, "fraud.check.deep")


# -- §10.3 direction table ------------------------------------------------------------


@pytest.mark.parametrize(
    ("direction", "a_to_b", "b_to_a"),
    [
        ("outbound", True, False),  # A can send to B, but not the other way around
        ("inbound", False, True),  # B can send to A, but not the other way around
        ("bidirectional", True, True),  # both directions
    ],
)
@pytest.mark.parametrize("kind", KINDS)
def test_direction_table_under_the_restrictive_policy(
    restrictive: World, direction: str, a_to_b: bool, b_to_a: bool, kind: str
) -> None:
    a = restrictive.crew("a", [CrewLink("b", direction)])
    b = restrictive.crew("b")  # never declared: the link of A is the only authority
    assert attempt(restrictive, kind, a, b) is a_to_b
    assert attempt(restrictive, kind, b, a) is b_to_a


@pytest.mark.parametrize(
    ("direction", "a_to_b", "b_to_a"),
    [("outbound", True, False), ("inbound", False, True), ("bidirectional", True, True)],
)
@pytest.mark.parametrize("kind", KINDS)
def test_direction_table_with_both_crews_declared(
    world: World, direction: str, a_to_b: bool, b_to_a: bool, kind: str
) -> None:
    """Both crews declared matching views of one relation: the outcome is the table's
    whatever the policy."""
    mirror = {"outbound": "inbound", "inbound": "outbound", "bidirectional": "bidirectional"}[direction]
    a = world.crew("a", [CrewLink("b", direction)])
    b = world.crew("b", [CrewLink("a", mirror)])
    assert attempt(world, kind, a, b) is a_to_b
    assert attempt(world, kind, b, a) is b_to_a


@pytest.mark.parametrize("kind", KINDS)
def test_under_permissive_outbound_grants_nothing_back_but_an_undeclared_peer_passes_anyway(
    permissive: World, kind: str
) -> None:
    """ "Not the other way around" means the link does not grant it: an undeclared B
    still passes by rule 2 under the permissive default, a declared B does not."""
    a = permissive.crew("a", [outbound("b")])
    undeclared_b = permissive.crew("b")
    declared_c = permissive.crew("c", [outbound("z")])
    a2 = permissive.crew("a2", [outbound("c")])
    assert attempt(permissive, kind, undeclared_b, a)
    assert attempt(permissive, kind, a2, declared_c)
    assert not attempt(permissive, kind, declared_c, a2)


@pytest.mark.parametrize("kind", KINDS)
def test_the_senders_inbound_link_does_not_let_it_send(world: World, kind: str) -> None:
    a = world.crew("a", [inbound("b")])
    b = world.crew("b")
    error = refusal(world, kind, a, b)
    assert error.rule == "declared-empty"  # an inbound link is not an outbound grant


@pytest.mark.parametrize("kind", KINDS)
def test_inbound_never_reopens_a_door_the_sender_closed(world: World, kind: str) -> None:
    closed = world.crew("closed", [])
    elsewhere = world.crew("elsewhere", [outbound("x")])
    b = world.crew("b", [inbound("closed"), inbound("elsewhere"), bidirectional("closed")])
    assert refusal(world, kind, closed, b).rule == "declared-empty"
    error = refusal(world, kind, elsewhere, b)
    assert error.rule == "declared-no-link"
    assert "a grant never reopens a door the sender closed" in str(error)


def test_inbound_grant_constrains_scoped_publish_topics(restrictive: World) -> None:
    a = restrictive.crew("a")
    b = restrictive.crew("b", [inbound("a", "audit.event")])
    assert attempt(restrictive, "publish", a, b, "audit.event")
    assert refusal(restrictive, "publish", a, b, "audit.other").rule == "topic-not-allowed"
    assert attempt(restrictive, "post", a, b, "audit.other")


def test_outbound_on_the_target_is_not_a_grant(restrictive: World) -> None:
    a = restrictive.crew("a")
    b = restrictive.crew("b", [outbound("a")])
    assert refusal(restrictive, "post", a, b).rule == "undeclared-refused"


# -- bare links: and links: [] --------------------------------------------------------


@pytest.mark.parametrize("kind", KINDS)
def test_bare_links_reads_as_never_declared(permissive: World, restrictive: World, kind: str) -> None:
    for w, expected in ((permissive, True), (restrictive, False)):
        a = w.crew(None, yaml="name: a\nlinks:\n")
        b = w.crew("b")
        block = w.registry.declaration("a")
        assert block is not None and not block.declared and len(block.warnings) == 1
        assert attempt(w, kind, a, b) is expected


@pytest.mark.parametrize("kind", KINDS)
def test_empty_list_closes_the_door(world: World, kind: str) -> None:
    a = world.crew(None, yaml="name: a\nlinks: []\n")
    b = world.crew("b")
    assert refusal(world, kind, a, b).rule == "declared-empty"


# -- names, ids and unregistered crews ------------------------------------------------


def test_links_name_crews_by_name_not_by_id(world: World) -> None:
    b = world.crew("billing-crew")
    a_by_name = world.crew("a", [outbound("billing-crew")])
    a_by_id = world.crew("a-id", [outbound(str(b.id))])
    assert attempt(world, "post", a_by_name, b)
    assert refusal(world, "post", a_by_id, b).rule == "declared-no-link"


def test_instances_of_one_name_are_distinct_crews(world: World) -> None:
    w1 = world.crew("worker", [outbound("hub-crew")])
    w2 = world.crew("worker", [outbound("hub-crew")])
    assert refusal(world, "post", w1, w2).rule == "declared-no-link"
    h = world.crew("hub-crew", [outbound("worker")])
    assert attempt(world, "post", h, w1) and attempt(world, "post", h, w2)


def test_unregistered_sender_counts_as_undeclared(permissive: World, restrictive: World) -> None:
    for w, expected in ((permissive, True), (restrictive, False)):
        ghost = w.crew(None)
        b = w.crew("b", [inbound("ghost")])
        assert attempt(w, "post", ghost, b) is expected
    error = refusal(restrictive, "post", restrictive.crew(None), restrictive.crew("c"))
    assert "not registered" in str(error)


def test_declared_sender_cannot_reach_an_unregistered_crew(world: World) -> None:
    a = world.crew("a", [outbound("ghost")])
    ghost = world.crew(None)
    error = refusal(world, "post", a, ghost)
    assert error.rule == "declared-no-link"
    assert "not registered" in str(error)


def test_traffic_inside_one_crew_is_not_inter_crew(world: World) -> None:
    a = world.crew("a", [])
    own = world.hub.register_mailbox(f"agent://{a.id}/other")
    try:
        a.client.post(own.address, b"x")
        assert own.depth() == 1
        assert attempt(world, "publish", a, a)
        assert attempt(world, "post", a, a)
    finally:
        own.close()


def test_unregistering_a_crew_removes_its_name_from_links(world: World) -> None:
    a = world.crew("a", [outbound("b")])
    b = world.crew("b")
    assert attempt(world, "post", a, b)
    world.registry.unregister_crew(b.id)
    assert refusal(world, "post", a, b).rule == "declared-no-link"


def test_registration_is_seen_by_the_next_message(world: World) -> None:
    a = world.crew("a", [outbound("late")])
    late_id = ok.CrewId.new()
    late_box = world.hub.register_mailbox(f"agent://{late_id}/inbox")
    try:
        with pytest.raises(ok.errors.EventAclError):
            a.client.post(late_box.address, b"x")
        world.registry.register_crew("late", late_id)
        a.client.post(late_box.address, b"x")
        assert late_box.depth() == 1
    finally:
        late_box.close()
