"""The ACL stage: where it checks (§10.3, §12.1), what it exempts, how it refuses."""

from __future__ import annotations

from collections.abc import Callable

import attrs
import pytest

import orkeon_actors as ok
from orkeon_actors.acl import (
    AclDecision,
    AclMiddleware,
    AclRegistry,
    AclRule,
    CrewLink,
    PermissiveCrewLinkPolicy,
    RestrictiveCrewLinkPolicy,
)
from orkeon_actors.middleware.pipeline import EventHubMiddleware
from tests.acl.conftest import World, inbound, outbound
from tests.acl.helpers import KINDS, attempt, refusal

# -- the stage itself -----------------------------------------------------------------


def _message(source: str, target_crew: str | None, mailbox: str | None, topic: str = "orders.created") -> ok.Message:
    return ok.Message(
        ok.MessageId.new(),
        topic,
        ok.CrewId(source),
        ok.SystemClock().now(),
        target_crew_id=None if target_crew is None else ok.CrewId(target_crew),
        target_mailbox=None if mailbox is None else ok.MailboxAddress.parse(mailbox),
    )


def _passed(message: ok.Message) -> ok.Message:
    return message


def test_is_an_event_hub_middleware() -> None:
    assert isinstance(AclMiddleware(), EventHubMiddleware)
    assert isinstance(AclMiddleware().policy, PermissiveCrewLinkPolicy)
    registry = AclRegistry()
    assert AclMiddleware(registry).registry is registry
    restrictive = RestrictiveCrewLinkPolicy(registry)
    stage = AclMiddleware(restrictive)
    assert stage.policy is restrictive and stage.registry is registry
    assert "RestrictiveCrewLinkPolicy" in repr(stage)
    with pytest.raises(TypeError, match="AclRegistry or a policy"):
        AclMiddleware("permissive")  # type: ignore[arg-type]


def test_a_custom_policy_is_consulted() -> None:
    seen: list[tuple[ok.Message, str]] = []

    class DenyAll:
        def decide(self, message: ok.Message, operation: str = "publish") -> AclDecision:
            seen.append((message, operation))
            return AclDecision(False, AclRule.DECLARED_EMPTY, str(message.source_crew_id), "", "closed for tests")

    with ok.Runtime.start(middleware=[AclMiddleware(DenyAll())]) as rt:
        with pytest.raises(ok.errors.EventAclError, match="closed for tests"):
            rt.hub.bind("a").publish("t", b"")
    assert seen[0][1] == "publish"


@pytest.mark.parametrize(
    ("target_crew", "mailbox"),
    [
        ("b", "agent://c/x"),  # the mailbox is crew c's
        (None, "agent://c/x"),  # the mailbox has a crew, the message none
        ("c", "client://studio"),  # a client mailbox has no crew
        ("c", "topic://orders.created"),  # a topic alias has no crew
        ("c", "crew://b"),
    ],
)
def test_target_crew_disagreeing_with_target_mailbox_is_rejected(target_crew: str | None, mailbox: str) -> None:
    stage = AclMiddleware()  # permissive, nobody registered: only the mismatch can refuse
    message = _message("a", target_crew, mailbox)
    with pytest.raises(ok.errors.EventAclError) as info:
        stage.on_publish(message, _passed)
    error = info.value
    assert error.rule == "target-mismatch"
    assert error.target == mailbox and error.source == "a"
    assert "derived from the mailbox" in str(error)
    for operation in ("publish", "post", "send", "reply"):
        decision = stage.policy.decide(message, operation)
        assert not decision.allowed and decision.rule is AclRule.TARGET_MISMATCH, operation
    system = attrs.evolve(message, source_crew_id=ok.CrewId.SYSTEM)
    with pytest.raises(ok.errors.EventAclError, match="target-mismatch"):
        stage.on_publish(system, _passed)


@pytest.mark.parametrize(
    ("target_crew", "mailbox"),
    [("c", "agent://c/x"), ("c", "crew://c"), (None, "client://studio"), (None, "topic://orders.created")],
)
def test_consistent_targets_pass(target_crew: str | None, mailbox: str) -> None:
    message = _message("a", target_crew, mailbox)
    assert AclMiddleware().on_publish(message, _passed) is message


def test_receive_path_is_never_checked() -> None:
    registry = AclRegistry()
    registry.register_crew("a", "a", links=[])
    stage = AclMiddleware(RestrictiveCrewLinkPolicy(registry))
    message = _message("a", "b", "agent://b/x")
    with pytest.raises(ok.errors.EventAclError):
        stage.on_publish(message, _passed)
    assert stage.on_receive(message, _passed) is message


def test_refusal_calls_nothing_downstream() -> None:
    registry = AclRegistry()
    registry.register_crew("a", "a", links=[])
    calls: list[ok.Message] = []
    with pytest.raises(ok.errors.EventAclError):
        AclMiddleware(registry).on_publish(_message("a", "b", "agent://b/x"), calls.append)  # type: ignore[arg-type]
    assert calls == []


def test_decide_is_available_without_a_hub() -> None:
    registry = AclRegistry()
    registry.register_crew("a", "a", links=[outbound("b", "fraud.check")])
    registry.register_crew("b", "b")
    policy = PermissiveCrewLinkPolicy(registry)
    ok_decision = policy.decide(_message("a", "b", None, "fraud.check"))
    assert ok_decision.allowed and ok_decision.rule is AclRule.DECLARED_LINK
    assert ok_decision.link == outbound("b", "fraud.check")
    ok_decision.raise_if_denied()
    denied = policy.decide(_message("a", "b", None, "fraud.other"))
    assert not denied.allowed and denied.rule is AclRule.TOPIC_NOT_ALLOWED
    with pytest.raises(ok.errors.EventAclError):
        denied.raise_if_denied()
    assert policy.decide(_message("a", "b", "agent://b/x"), "post").allowed
    # Allowed decisions are shared constants: letting a message through allocates nothing.
    assert policy.decide(_message("a", "b", None, "fraud.check")) is ok_decision
    assert policy.decide(_message("b", None, None)) is policy.decide(_message("a", None, None))


# -- refusals name sender, target and rule --------------------------------------------


@pytest.mark.parametrize("kind", KINDS)
def test_refusal_names_sender_target_and_rule(world: World, kind: str) -> None:
    a = world.crew("order-crew", [outbound("audit-crew")])
    b = world.crew("billing-crew")
    error = refusal(world, kind, a, b)
    text = str(error)
    assert error.rule == "declared-no-link"
    assert error.source == str(a.id)
    assert error.target == (str(b.id) if kind == "publish" else b.address)
    assert "'order-crew'" in text and str(a.id) in text
    assert "'billing-crew'" in text and str(b.id) in text
    assert "rule declared-no-link" in text
    assert "add {to: billing-crew, direction: outbound" in text and "to the links: of 'order-crew'" in text
    if kind == "publish":
        assert "allowed_topics: [orders.created]" in text and "'orders.created'" in text


# -- checked on the sending side, for publish scoped to a crew, post and send ---------


def test_blocking_send_is_checked_before_anything_is_sent(world: World) -> None:
    a = world.crew("a", [])
    b = world.crew("b")
    with pytest.raises(ok.errors.EventAclError):
        a.client.send(b.address, b"x", timeout=60)
    assert b.mailbox.depth() == 0
    assert world.hub.pending_waits()["on_reply"] == 0


def test_crew_mailbox_traffic_is_checked(world: World) -> None:
    a = world.crew("a", [outbound("c")])
    b = world.crew("b")
    crew_box = world.hub.register_mailbox(f"crew://{b.id}")
    try:
        with pytest.raises(ok.errors.EventAclError, match="declared-no-link"):
            a.client.post(crew_box.address, b"x")
        assert crew_box.depth() == 0
    finally:
        crew_box.close()


def test_retained_scoped_publish_is_checked_and_not_retained(world: World) -> None:
    a = world.crew("a", [])
    b = world.crew("b")
    options = ok.PublishOptions(target_crew_id=b.id, retain_as_last_value=True, last_value_key="k")
    with pytest.raises(ok.errors.EventAclError):
        a.client.publish("orders.created", b"x", options)
    assert b.client.get_last_value("k", crew_scope=b.id) is None


# -- exemptions -----------------------------------------------------------------------


def test_replies_are_exempt(world: World, background: Callable[[Callable[[], object]], object]) -> None:
    """b may not write to a, but answers a's request: the correlation id is the capability."""
    a = world.crew("a", [outbound("b")])
    b = world.crew("b", [])
    with pytest.raises(ok.errors.EventAclError):
        b.client.post(a.address, b"unsolicited")
    task = background(lambda: a.client.send(b.address, {"q": 1}, timeout=30))
    request = b.client.wait_for(ok.WaitOnMailbox(b.address), 30)
    assert request.correlation_id is not None
    b.client.reply(request.correlation_id, {"a": 2})
    reply = task.get()  # type: ignore[attr-defined]
    assert reply.json() == {"a": 2} and reply.source_crew_id == b.id


def test_reply_from_a_deferred_request_is_exempt(restrictive: World) -> None:
    a = restrictive.crew("a", [outbound("b")])
    b = restrictive.crew("b")
    request = a.client.request(b.address, b"q", timeout=30)
    assert request.correlation_id is not None
    assert not attempt(restrictive, "post", b, a)
    b.client.reply(request.correlation_id, b"r")
    reply = a.client.wait_for(ok.WaitOnReply(request.correlation_id), 30)
    assert reply.payload == b"r"


@pytest.mark.parametrize("kind", KINDS)
def test_system_traffic_is_exempt(restrictive: World, kind: str) -> None:
    b = restrictive.crew("b", [])
    assert attempt(restrictive, kind, restrictive.hub.system, b)


# -- client:// peers (§10.2.1) --------------------------------------------------------


@pytest.mark.parametrize("kind", ["post", "send"])
def test_client_link_authorizes_the_client_mailbox(world: World, kind: str) -> None:
    _, studio_box = world.client("studio")
    a = world.crew("a", [CrewLink("client:studio", "bidirectional"), outbound("b")])
    if kind == "post":
        a.client.post("client://studio", b"x")
    else:
        a.client.request("client://studio", b"x", timeout=60)
    assert studio_box.depth() == 1


@pytest.mark.parametrize("kind", ["post", "send"])
def test_client_mailbox_is_refused_without_a_client_link(world: World, kind: str) -> None:
    _, studio_box = world.client("studio")
    _, other_box = world.client("other")
    a = world.crew("a", [CrewLink("client:other", "outbound")])
    with pytest.raises(ok.errors.EventAclError) as info:
        if kind == "post":
            a.client.post("client://studio", b"x")
        else:
            a.client.request("client://studio", b"x", timeout=60)
    assert info.value.rule == "declared-no-link"
    assert info.value.target == "client://studio"
    assert "add {to: client:studio, direction: outbound}" in str(info.value)
    assert studio_box.depth() == 0
    a.client.post("client://other", b"x")
    assert other_box.depth() == 1


def test_undeclared_crew_to_client(permissive: World, restrictive: World) -> None:
    for w, expected in ((permissive, True), (restrictive, False)):
        _, box = w.client("studio")
        a = w.crew("a")
        try:
            a.client.post("client://studio", b"x")
            delivered = True
        except ok.errors.EventAclError as exc:
            assert exc.rule == "undeclared-refused"
            assert "a client cannot grant links" in str(exc)
            delivered = False
        assert delivered is expected
        assert box.depth() == int(expected)


@pytest.mark.parametrize("kind", KINDS)
def test_client_as_sender(permissive: World, restrictive: World, kind: str) -> None:
    for w in (permissive, restrictive):
        studio, _ = w.client("studio")
        granting = w.crew("granting", [inbound("client:studio")])
        silent = w.crew("silent")
        assert attempt(w, kind, studio, granting)
        assert attempt(w, kind, studio, silent) is (w is permissive)


def test_client_mailboxes_are_not_link_targets_by_crew_name(world: World) -> None:
    """to: studio (a crew name) does not authorize client://studio."""
    _, studio_box = world.client("studio")
    a = world.crew("a", [outbound("studio")])
    with pytest.raises(ok.errors.EventAclError):
        a.client.post("client://studio", b"x")
    assert studio_box.depth() == 0
