"""Property: over random crews, random links (malformed entries included) and random
messages, a message is delivered exactly when a small independent reference model of
the written rules (spec §10.2-§10.3, §12.1) allows it, and a subscriber in crew C never
receives a message scoped to another crew (§10.1).

The crews are declared as YAML text (rendered with ruamel.yaml from random Python
values) and read by the real loader; the reference model reads the same Python values
with its own few lines, so the two implementations share nothing but the spec.
"""

from __future__ import annotations

import io
import re
from collections.abc import Iterator
from typing import Any

import attrs
import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st
from ruamel.yaml import YAML

import orkeon_actors as ok
from orkeon_actors.acl import (
    AclDecision,
    AclMiddleware,
    AclRegistry,
    CrewLinkPolicy,
    PermissiveCrewLinkPolicy,
    RestrictiveCrewLinkPolicy,
)

NAMES = ("alpha", "beta", "gamma")
TOPICS = ("t.a", "t.b")
CLIENT = "studio"
ABSENT = object()  # a key left out of a generated mapping

# -- the reference model: the written rules, nothing else -----------------------------

_CLIENT_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}\Z")
_TOPIC = re.compile(r"[A-Za-z0-9_-]+(\.[A-Za-z0-9_-]+)*\Z")


def ref_link(entry: object) -> tuple[str, str, tuple[str, ...]] | None:
    """An entry the author wrote readably, as (to, direction, topics); else None."""
    if not isinstance(entry, dict) or set(entry) - {"to", "direction", "allowed_topics"}:
        return None
    to, direction = entry.get("to"), entry.get("direction")
    if not isinstance(to, str) or not to or to != to.strip():
        return None
    if to.startswith("client:") and not _CLIENT_NAME.match(to[len("client:") :]):
        return None
    if direction not in ("outbound", "inbound", "bidirectional"):
        return None
    topics = entry.get("allowed_topics")
    if topics is None:
        return (to, direction, ())
    if not isinstance(topics, list) or not all(isinstance(t, str) and _TOPIC.match(t) for t in topics):
        return None
    return (to, direction, tuple(topics))


_FLOWS = {"outbound": {"send"}, "inbound": {"receive"}, "bidirectional": {"send", "receive"}}


def ref_one_link_per_peer(
    links: tuple[tuple[str, str, tuple[str, ...]], ...],
) -> tuple[tuple[tuple[str, str, tuple[str, ...]], ...], int]:
    """Issue 15: entries naming one peer read as what all of them allow (the flows and
    the topics every entry allows; no topics means all), dropped if that is nothing.
    Returns the links and how many peers were named more than once."""
    peers: dict[str, list[tuple[str, tuple[str, ...]]]] = {}
    for to, direction, topics in links:
        peers.setdefault(to, []).append((direction, topics))
    out = []
    for to, written in peers.items():
        flows = set.intersection(*(_FLOWS[d] for d, _ in written))
        lists = [ts for _, ts in written if ts]
        topics = tuple(t for t in lists[0] if all(t in other for other in lists)) if lists else ()
        if not flows or (lists and not topics):
            continue
        direction = next(d for d, f in _FLOWS.items() if f == flows)
        out.append((to, direction, tuple(dict.fromkeys(topics))))
    return tuple(out), sum(1 for written in peers.values() if len(written) > 1)


@attrs.frozen
class RefCrew:
    name: str | None  # None: never registered with the ACL
    declared: bool
    links: tuple[tuple[str, str, tuple[str, ...]], ...]


def ref_allows(
    restrictive: bool,
    sender: RefCrew | None,
    sender_id: object,
    target: RefCrew | None,
    target_id: object,
    topic: str | None,
) -> bool:
    """``sender`` None is the system; ``target`` None is a broadcast. ``topic`` is None
    for mailbox traffic (the link itself authorizes it)."""
    if sender is None or target is None:
        return True
    if sender_id is not None and sender_id == target_id:
        return True

    def topic_ok(topics: tuple[str, ...]) -> bool:
        return topic is None or not topics or topic in topics

    if sender.declared:
        return target.name is not None and any(
            to == target.name and d in ("outbound", "bidirectional") and topic_ok(ts) for to, d, ts in sender.links
        )
    if not restrictive:
        return True
    return (
        sender.name is not None
        and target.declared
        and any(to == sender.name and d in ("inbound", "bidirectional") and topic_ok(ts) for to, d, ts in target.links)
    )


# -- generation -----------------------------------------------------------------------

good_to = st.sampled_from((*NAMES, *NAMES, f"client:{CLIENT}", "omega"))
bad_to = st.sampled_from(("", " alpha", "client:", "client:bad name", 42, None))
good_direction = st.sampled_from(("outbound", "inbound", "bidirectional"))
bad_direction = st.sampled_from(("Outbound", "both", "", 7, None))
good_topics = st.sampled_from((ABSENT, None, [], ["t.a"], ["t.b"], ["t.a", "t.b"], ["t.a"], ["t.b"]))
bad_topics = st.sampled_from(("t.a", ["bad topic"], {"t": 1}, [3]))
# What goes wrong with an entry, if anything: mostly nothing, so that links do authorize.
FLAWS = ("none",) * 12 + ("bad to", "no to", "bad direction", "no direction", "bad topics", "extra key")


@st.composite
def entries(draw: st.DrawFn) -> object:
    if draw(st.integers(0, 24)) == 0:
        return draw(st.sampled_from(("junk", 5, ["outbound"])))
    flaw = draw(st.sampled_from(FLAWS))
    entry: dict[str, Any] = {}
    if flaw != "no to":
        entry["to"] = draw(bad_to if flaw == "bad to" else good_to)
    if flaw != "no direction":
        entry["direction"] = draw(bad_direction if flaw == "bad direction" else good_direction)
    topics = draw(bad_topics if flaw == "bad topics" else good_topics)
    if topics is not ABSENT:
        entry["allowed_topics"] = topics
    if flaw == "extra key":
        entry["allowed_topic"] = ["t.a"]  # misspelt: must not widen to every topic
    return entry


declarations = st.sampled_from(("absent", "bare", "scalar", "list", "list", "list", "list")).flatmap(
    lambda shape: {
        "absent": st.just(ABSENT),  # never declared
        "bare": st.just(None),  # a bare links:
        "scalar": st.just("not-a-list"),
        "list": st.lists(entries(), max_size=5),  # [] included: a closed door
    }[shape]
)


@attrs.frozen
class CrewPlan:
    name: str
    registered: bool
    links: object  # ABSENT, None, a scalar, or a list of raw entries


crew_plans = st.lists(
    st.builds(CrewPlan, st.sampled_from(NAMES), st.sampled_from((True,) * 9 + (False,)), declarations),
    min_size=2,
    max_size=3,
    unique_by=lambda plan: plan.name,
)

KINDS = ("publish_scoped",) * 3 + (
    "post",
    "post",
    "send",
    "send",
    "publish_global",
    "post_topic",
    "post_client",
    "send_client",
)
messages = st.lists(
    st.tuples(st.integers(0, 4), st.sampled_from(KINDS), st.integers(0, 2), st.sampled_from(TOPICS)),
    min_size=1,
    max_size=12,
)


def render(plan: CrewPlan) -> str:
    document: dict[str, object] = {"name": plan.name, "agents": [{"id": "agent"}]}
    if plan.links is not ABSENT:
        document["links"] = plan.links
    out = io.StringIO()
    YAML().dump(document, out)
    return out.getvalue()


# -- the system under test ------------------------------------------------------------


class SwitchPolicy:
    """Lets one runtime serve many examples: each example installs a fresh registry."""

    def __init__(self) -> None:
        self.policy: CrewLinkPolicy = PermissiveCrewLinkPolicy(AclRegistry())

    def decide(self, message: ok.Message, operation: str = "publish") -> AclDecision:
        return self.policy.decide(message, operation)


@pytest.fixture(scope="module")
def switched() -> Iterator[tuple[ok.Runtime, SwitchPolicy]]:
    switch = SwitchPolicy()
    rt = ok.Runtime.start(middleware=[AclMiddleware(switch)])
    try:
        yield rt, switch
    finally:
        rt.stop()


@attrs.define
class Party:
    """A sender/recipient of the hub-level property: a crew, the client, or the system."""

    crew_id: ok.CrewId | None  # None: the system
    client: ok.HubClient
    ref: RefCrew | None  # None: the system
    address: str = ""  # its mailbox ("" for the system)


@settings(max_examples=150, deadline=None)
@given(restrictive=st.booleans(), plans=crew_plans, sent=messages)
def test_delivered_exactly_when_the_written_rules_allow(
    switched: tuple[ok.Runtime, SwitchPolicy],
    restrictive: bool,
    plans: list[CrewPlan],
    sent: list[tuple[int, str, int, str]],
) -> None:
    rt, switch = switched
    hub = rt.hub
    registry = AclRegistry()
    switch.policy = (RestrictiveCrewLinkPolicy if restrictive else PermissiveCrewLinkPolicy)(registry)
    mailboxes: dict[str, ok.MailboxRegistration] = {}
    subscriptions: dict[ok.CrewId, ok.Subscription] = {}
    try:
        crews: list[Party] = []
        for plan in plans:
            raw = plan.links
            readable = tuple(link for link in map(ref_link, raw) if link is not None) if isinstance(raw, list) else ()
            merged, duplicated = ref_one_link_per_peer(readable)
            declared = plan.registered and raw is not ABSENT and raw is not None
            if plan.registered:
                crew_id = registry.register_crew_yaml(render(plan))
                block = registry.declaration(plan.name)
                assert block is not None and block.declared is declared
                if isinstance(raw, list):  # one warning per discarded entry and per peer named twice
                    assert len(block.warnings) == len(raw) - len(readable) + duplicated
            else:
                crew_id = ok.CrewId.new()
            ref = RefCrew(plan.name if plan.registered else None, declared, merged if declared else ())
            address = f"agent://{crew_id}/inbox"
            mailboxes[address] = hub.register_mailbox(address)
            subscriptions[crew_id] = hub.bind(crew_id, "listener").subscribe("#")
            crews.append(Party(crew_id, hub.bind(crew_id, "agent"), ref, address))
        client_id = registry.register_client(CLIENT)
        mailboxes[f"client://{CLIENT}"] = hub.register_mailbox(f"client://{CLIENT}")
        client = Party(
            client_id, hub.bind(client_id, "gateway"), RefCrew(f"client:{CLIENT}", False, ()), f"client://{CLIENT}"
        )
        senders = [*crews, client, Party(None, hub.system, None)]

        expected_mail: dict[str, list[ok.MessageId]] = {address: [] for address in mailboxes}
        for sender_index, kind, target_index, topic in sent:
            sender = senders[sender_index % len(senders)]
            target = client if kind.endswith("_client") else crews[target_index % len(crews)]
            scoped = kind == "publish_scoped"
            broadcast = kind in ("publish_global", "post_topic")
            allowed = broadcast or ref_allows(
                restrictive,
                sender.ref,
                sender.crew_id,
                target.ref,
                None if target is client else target.crew_id,
                topic if scoped else None,
            )
            event(f"{'restrictive' if restrictive else 'permissive'} {kind}: {'allowed' if allowed else 'refused'}")
            message: ok.Message | None
            try:
                if scoped:
                    message = sender.client.publish(topic, b"p", ok.PublishOptions(target_crew_id=target.crew_id))
                elif kind == "publish_global":
                    message = sender.client.publish(topic, b"g")
                elif kind == "post_topic":
                    message = sender.client.post(f"topic://{topic}", b"t")
                elif kind.startswith("post"):
                    message = sender.client.post(target.address, b"m")
                else:
                    message = sender.client.request(target.address, b"s", timeout=600)
            except ok.errors.EventAclError as refused:
                assert not allowed, f"{kind} refused by rule {refused.rule} but the written rules allow it"
                message = None
            else:
                assert allowed, f"{kind} delivered but the written rules refuse it"
                if kind.startswith("send"):  # a reply is always exempt, whoever answers whom
                    assert message.correlation_id is not None
                    target.client.reply(message.correlation_id, b"r")
                if not (broadcast or scoped):
                    expected_mail[target.address].append(message.id)

            # Subscriptions: a scoped publish reaches the target crew only, a broadcast
            # every crew, mailbox traffic nobody; and §10.1 holds for whatever arrived.
            for crew in crews:
                assert crew.crew_id is not None
                got = subscriptions[crew.crew_id].drain()
                assert all(seen.target_crew_id in (None, crew.crew_id) for seen in got)
                reaches = message is not None and (broadcast or (scoped and crew.crew_id == target.crew_id))
                assert [m.id for m in got] == ([message.id] if reaches and message is not None else [])

        for address, ids in expected_mail.items():  # each mailbox holds exactly what was allowed to it, in order
            assert [m.id for m in mailboxes.pop(address).close()] == ids
    finally:
        for registration in mailboxes.values():
            registration.close()
        for subscription in subscriptions.values():
            subscription.close()


def _hand_built(sender: ok.CrewId, kind: str, target: ok.CrewId | None, topic: str) -> tuple[ok.Message, str]:
    """The message the hub would stamp for ``kind``, and the operation it runs under."""
    mailbox: ok.MailboxAddress | None = None
    target_crew: ok.CrewId | None = None
    operation = "publish"
    if kind == "publish_scoped":
        target_crew = target
    elif kind in ("post", "send", "reply"):
        assert target is not None
        mailbox, target_crew, operation, topic = ok.MailboxAddress.agent(target, "inbox"), target, kind, "_system.x"
        if kind == "reply":
            mailbox = None
    elif kind in ("post_client", "send_client"):
        mailbox, operation, topic = ok.MailboxAddress.client(CLIENT), kind.split("_")[0], "_system.x"
    elif kind == "post_topic":
        mailbox, operation = ok.MailboxAddress.topic(topic), "post"
    message = ok.Message(
        ok.MessageId.new(), topic, sender, ok.SystemClock().now(), target_crew_id=target_crew, target_mailbox=mailbox
    )
    return message, operation


@settings(max_examples=300, deadline=None)
@given(
    restrictive=st.booleans(),
    plans=crew_plans,
    sent=st.lists(
        st.tuples(st.integers(0, 4), st.sampled_from((*KINDS, "reply")), st.integers(0, 2), st.sampled_from(TOPICS)),
        min_size=1,
        max_size=12,
    ),
)
def test_policy_decides_exactly_what_the_written_rules_say(
    restrictive: bool, plans: list[CrewPlan], sent: list[tuple[int, str, int, str]]
) -> None:
    """The same model against ``decide`` alone, without a hub: cheap enough to explore
    the rule space densely (the hub-level property above checks delivery)."""
    registry = AclRegistry()
    policy = (RestrictiveCrewLinkPolicy if restrictive else PermissiveCrewLinkPolicy)(registry)
    crews: list[tuple[ok.CrewId, RefCrew]] = []
    for plan in plans:
        raw = plan.links
        declared = plan.registered and raw is not ABSENT and raw is not None
        readable = tuple(link for link in map(ref_link, raw) if link is not None) if isinstance(raw, list) else ()
        crew_id = registry.register_crew_yaml(render(plan)) if plan.registered else ok.CrewId.new()
        merged = ref_one_link_per_peer(readable)[0]
        crews.append((crew_id, RefCrew(plan.name if plan.registered else None, declared, merged if declared else ())))
    client = (registry.register_client(CLIENT), RefCrew(f"client:{CLIENT}", False, ()))
    senders: list[tuple[ok.CrewId, RefCrew | None]] = [*crews, client, (ok.CrewId.SYSTEM, None)]
    for sender_index, kind, target_index, topic in sent:
        sender_id, sender_ref = senders[sender_index % len(senders)]
        target_id, target_ref = crews[target_index % len(crews)]
        message, operation = _hand_built(sender_id, kind, target_id, topic)
        if kind in ("publish_global", "post_topic", "reply"):
            allowed = True
        elif kind.endswith("_client"):
            allowed = ref_allows(restrictive, sender_ref, sender_id, client[1], None, None)
        else:
            scoped = kind == "publish_scoped"
            allowed = ref_allows(restrictive, sender_ref, sender_id, target_ref, target_id, topic if scoped else None)
        decision = policy.decide(message, operation)
        assert decision.allowed is allowed, (kind, decision)
        if not decision.allowed:
            assert decision.error().rule == decision.rule.value
