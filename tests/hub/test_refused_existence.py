"""A caller the crew links refuse learns nothing about another crew's mailboxes.

A crew declaring ``links: []`` used to tell a live mailbox of another crew
(``EventAclError``) from a missing one (``MailboxNotFoundError``, checked before the
ACL stage), which maps the other crew's agents (issue 34). A refused caller now gets
the same ``EventAclError`` either way; a caller the links allow still learns that a
mailbox is missing (docs/acl.md, docs/security.md).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import orkeon_actors as ok
from orkeon_actors.acl import AclMiddleware, AclRegistry, CrewLink, RestrictiveCrewLinkPolicy
from orkeon_actors.errors import EventAclError, MailboxNotFoundError
from orkeon_actors.hub.memory import note_crew_finished

STORES: dict[str, Callable[[Path], str | None]] = {
    "memory": lambda tmp: None,
    "sqlite": lambda tmp: str(tmp / "state.db"),
}


@pytest.fixture(params=sorted(STORES))
def world(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[ok.Runtime, AclRegistry]]:
    registry = AclRegistry()
    policy = RestrictiveCrewLinkPolicy(registry)
    rt = ok.Runtime.start(store=STORES[str(request.param)](tmp_path), middleware=[AclMiddleware(policy)])
    try:
        yield rt, registry
    finally:
        rt.stop()


def _outcome(call: Callable[[], object]) -> tuple[type[BaseException], str] | None:
    try:
        call()
    except (EventAclError, MailboxNotFoundError) as error:
        return type(error), str(error)
    return None


def _answers(rt: ok.Runtime, caller: ok.CrewId, address: str) -> list[tuple[type[BaseException], str] | None]:
    client = rt.hub.bind(caller, "agent")
    return [
        _outcome(lambda: client.post(address, {"probe": 1})),
        _outcome(lambda: client.send(address, {"probe": 1}, timeout=5)),
    ]


def test_a_refused_caller_gets_the_same_answer_for_a_live_and_a_missing_mailbox(
    world: tuple[ok.Runtime, AclRegistry],
) -> None:
    rt, registry = world
    closed = registry.register_crew("closed", links=[])
    target = registry.register_crew("target", links=[])
    gone = registry.register_crew("gone", links=[])
    rt.hub.register_mailbox(f"agent://{target}/inbox")
    rt.hub.register_mailbox(f"agent://{gone}/inbox").close()
    note_crew_finished(rt.hub, gone, "completed")

    def scrub(address: str, crew: ok.CrewId, name: str) -> list[tuple[type[BaseException], str] | None]:
        """The answers with what the caller itself gave (the address, the crew) masked."""
        answers = _answers(rt, closed, address)
        masked = [(address, "ADDRESS"), (str(crew), "ID"), (f"'{name}'", "NAME"), (f"to: {name},", "to: NAME,")]
        scrubbed: list[tuple[type[BaseException], str] | None] = []
        for answer in answers:
            if answer is None:
                scrubbed.append(None)
                continue
            text = answer[1]
            for value, mask in masked:
                text = text.replace(value, mask)
            scrubbed.append((answer[0], text))
        return scrubbed

    live = scrub(f"agent://{target}/inbox", target, "target")
    assert all(answer is not None and answer[0] is EventAclError for answer in live), live
    assert scrub(f"agent://{target}/nobody", target, "target") == live
    assert scrub(f"crew://{target}", target, "target") == live
    assert scrub(f"agent://{gone}/inbox", gone, "gone") == live


def test_a_caller_the_links_allow_still_hears_that_a_mailbox_is_missing(
    world: tuple[ok.Runtime, AclRegistry],
) -> None:
    rt, registry = world
    target = registry.register_crew("target", links=[CrewLink("caller", "inbound", ())])
    caller = registry.register_crew("caller", links=[CrewLink("target", "outbound", ())])
    rt.hub.register_mailbox(f"agent://{target}/inbox")
    answers = _answers(rt, caller, f"agent://{target}/nobody")
    assert [answer and answer[0] for answer in answers] == [MailboxNotFoundError, MailboxNotFoundError]


def test_a_unit_of_work_of_a_refused_crew_gets_the_same_answer_too(tmp_path: Path) -> None:
    registry = AclRegistry()
    rt = ok.Runtime.start(
        store=str(tmp_path / "uow.db"), middleware=[AclMiddleware(RestrictiveCrewLinkPolicy(registry))]
    )
    try:
        closed = registry.register_crew("closed", links=[])
        target = registry.register_crew("target", links=[])
        rt.hub.register_mailbox(f"agent://{target}/inbox")
        answers: list[tuple[type[BaseException], str] | None] = []
        for address in (f"agent://{target}/inbox", f"agent://{target}/nobody"):
            with rt.hub.unit_of_work(closed, "agent") as uow:  # type: ignore[attr-defined]

                def probe(uow: Any = uow, address: str = address) -> object:
                    return uow.post(address, {"probe": 1})

                answers.append(_outcome(probe))
        assert [answer and answer[0] for answer in answers] == [EventAclError, EventAclError]
    finally:
        rt.stop()
