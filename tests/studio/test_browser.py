"""The Studio in a real browser: Debian's Chromium driven by Playwright (no browser
download). Each test saves a screenshot under its temp directory."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import orkeon_actors as ok
from orkeon_actors.acl import AclMiddleware, AclRegistry, CrewLink
from orkeon_actors.crew import Agent, ScriptedModel, call, respond
from orkeon_actors.lifecycle import CrewBlueprint, CrewSupervisor
from orkeon_actors.orchestration import Sequential, Task
from tests.browser import ARGS, CHROMIUM, sync_playwright_or_skip

DEADLINE_MS = 15_000


def napper(_: ok.CrewId) -> CrewBlueprint:
    """Asleep on its mailbox; once woken it waits again, so it stays Active."""
    agent = Agent(
        "a",
        ScriptedModel(
            [
                call("receive_message", {"wait_forever": True}),
                call("receive_message", {"wait_forever": True}),
                respond("done"),
            ]
        ),
    )
    return CrewBlueprint(agents=[agent], orchestration=Sequential([Task("go", agent.agent_id)]))


def waiter(_: ok.CrewId) -> CrewBlueprint:
    """Parked on a topic that never comes, for 2.5 s: the countdown reaches zero."""
    agent = Agent(
        "w",
        ScriptedModel(
            [
                call("wait_for_event", {"topic": "never.happens", "timeout_ms": 2500}),
                call("receive_message", {"wait_forever": True}),
                respond("ok"),
            ]
        ),
    )
    return CrewBlueprint(agents=[agent], orchestration=Sequential([Task("go", agent.agent_id)]))


@pytest.fixture
def studio(tmp_path: Path) -> Iterator[tuple[ok.Runtime, CrewSupervisor]]:
    rt = ok.Runtime.start(store=str(tmp_path / "studio.db"), studio=0, studio_post=True)
    sup = CrewSupervisor.start(rt, factories={"napper": napper, "waiter": waiter})
    try:
        sup.spawn("napper", "napper")
        assert sup.sleep("napper") is True
        yield rt, sup
    finally:
        sup.stop()
        rt.stop()


@pytest.fixture(scope="module")
def chromium() -> Iterator[Any]:
    """One Chromium for the module (its launch takes seconds); each test opens its tab in
    a fresh browser context (no cookie, storage or cache of another test)."""
    sync_playwright = sync_playwright_or_skip()
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        try:
            yield browser
        finally:
            browser.close()


@contextlib.contextmanager
def _open(browser: Any, url: str, screenshot: Path) -> Iterator[Any]:
    """A Chromium tab on ``url`` once its feed is live; fails if the page logged an error."""
    errors: list[str] = []
    context = browser.new_context(viewport={"width": 1300, "height": 1100})
    try:
        tab = context.new_page()
        tab.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
        tab.on("pageerror", lambda e: errors.append(str(e)))
        tab.goto(url)
        tab.wait_for_selector("#conn[data-state=live]", timeout=DEADLINE_MS)
        try:
            yield tab
        finally:
            tab.screenshot(path=str(screenshot), full_page=True)
    finally:
        context.close()
    assert errors == [], f"the page logged errors: {errors}"


@pytest.fixture
def page(chromium: Any, studio: tuple[ok.Runtime, CrewSupervisor], tmp_path: Path) -> Iterator[Any]:
    rt, _ = studio
    assert rt.studio is not None
    with _open(chromium, rt.studio.url, tmp_path / "studio.png") as tab:
        yield tab


def _crew_state(page: Any, crew: str) -> str:
    return str(page.locator(f"#crews tr[data-crew='{crew}'] .state").text_content())


def test_the_page_shows_an_asleep_crew_asleep(page: Any) -> None:
    page.wait_for_selector("#crews tr[data-crew='napper'] .state-Asleep", timeout=DEADLINE_MS)
    assert _crew_state(page, "napper") == "Asleep"
    assert page.locator("#crews tr[data-crew='napper'] td").nth(3).text_content() == "sequential"
    page.wait_for_selector("#waits tr[data-crew='napper']", timeout=DEADLINE_MS)
    assert "agent://napper/a" in page.locator("#waits tr[data-crew='napper']").text_content()


def test_a_post_wakes_the_crew_and_appears_in_the_flow(page: Any, studio: tuple[ok.Runtime, CrewSupervisor]) -> None:
    rt, _ = studio
    page.wait_for_selector("#crews tr[data-crew='napper'] .state-Asleep", timeout=DEADLINE_MS)
    # The lifecycle watcher has seen napper asleep (its first sighting), so the wake is a
    # change it reports; a post before that sighting would make "Active" its first state.
    page.wait_for_selector("#flow g.event[data-kind='state'][data-crew='napper']", timeout=DEADLINE_MS)
    rt.hub.bind("tester", "t").post("agent://napper/a", {"wake": "up"})
    page.wait_for_selector("#crews tr[data-crew='napper'] .state-Active", timeout=DEADLINE_MS)
    page.wait_for_selector("#flow g.event[data-kind='post']", timeout=DEADLINE_MS)
    post = page.locator("#flow g.event[data-kind='post']").first
    assert "_system.post" in post.text_content()
    page.wait_for_selector("#flow g.event[data-kind='wake'][data-crew='napper']", timeout=DEADLINE_MS)
    lanes = page.locator("#flow .lane-label").all_text_contents()
    assert "tester/t" in lanes and "napper/a" in lanes


def test_a_countdown_reaches_zero_and_the_timeout_appears(page: Any, studio: tuple[ok.Runtime, CrewSupervisor]) -> None:
    _, sup = studio
    sup.spawn("waiter", "waiter")
    page.wait_for_selector("#waits tr[data-crew='waiter'] td.countdown[data-expires^='2']", timeout=DEADLINE_MS)
    page.wait_for_function(
        """() => [...document.querySelectorAll("#waits tr[data-crew='waiter'] td.countdown[data-expires^='2']")]
                 .some(c => c.classList.contains("expired") || parseFloat(c.textContent) <= 0.5)""",
        timeout=DEADLINE_MS,
    )
    page.wait_for_selector("#flow g.event[data-kind='timeout'][data-crew='waiter']", timeout=DEADLINE_MS)
    assert "never.happens" in page.locator("#flow g.event[data-kind='timeout']").first.text_content()


def test_filters_and_pause(page: Any, studio: tuple[ok.Runtime, CrewSupervisor]) -> None:
    rt, _ = studio
    alice = rt.hub.bind("alpha", "alice")
    alice.publish("orders.created", 1)
    alice.publish("billing.due", 2)
    rt.hub.bind("beta", "bob").publish("orders.created", 3)
    page.wait_for_function(
        "() => document.querySelectorAll('#flow g.event[data-kind=publish]').length === 3", timeout=DEADLINE_MS
    )
    page.fill("#filter-crew", "alpha")
    assert page.locator("#flow g.event[data-kind=publish]").count() == 2
    page.fill("#filter-topic", "orders")
    assert page.locator("#flow g.event[data-kind=publish]").count() == 1
    page.fill("#filter-crew", "")
    page.fill("#filter-topic", "")
    assert page.locator("#flow g.event[data-kind=publish]").count() == 3
    page.click("#pause")
    alice.publish("orders.created", 4)
    page.wait_for_function(
        "() => document.querySelector('#flow-count').textContent.includes('1 new')", timeout=DEADLINE_MS
    )
    assert page.locator("#flow g.event[data-kind=publish]").count() == 3
    page.click("#pause")
    assert page.locator("#flow g.event[data-kind=publish]").count() == 4


def test_the_snapshot_tree_and_posting_from_the_page(page: Any, studio: tuple[ok.Runtime, CrewSupervisor]) -> None:
    rt, _ = studio
    page.click("#crews tr[data-crew='napper']")
    page.wait_for_selector("#snapshot details", timeout=DEADLINE_MS)
    assert 'agent_id: "a"' in page.locator("#snapshot").text_content()
    rt.hub.register_mailbox("agent://inbox/reader")
    page.fill("#post-to", "agent://inbox/reader")
    page.fill("#post-payload", '{"from": "the page"}')
    page.click("#post-send")
    page.wait_for_function(
        "() => document.querySelector('#post-result').textContent.startsWith('posted')", timeout=DEADLINE_MS
    )
    got = rt.hub.bind("inbox", "reader").wait_for(ok.WaitOnMailbox("agent://inbox/reader"), timeout=5)
    assert got.json() == {"from": "the page"} and str(got.source_crew_id) == "studio"


def test_the_acl_graph_draws_each_link_with_its_direction(chromium: Any, tmp_path: Path) -> None:
    registry = AclRegistry()
    registry.register_crew("billing", "billing", links=[CrewLink("fraud", "bidirectional", ["fraud.check"])])
    registry.register_crew("fraud", "fraud", links=[CrewLink("audit", "outbound")])
    with ok.Runtime.start(studio=0, middleware=[AclMiddleware(registry)]) as rt:
        assert rt.studio is not None
        with _open(chromium, rt.studio.url, tmp_path / "acl.png") as tab:
            tab.wait_for_selector("#acl g.node[data-node='audit']", timeout=DEADLINE_MS)
            assert sorted(tab.locator("#acl g.node").evaluate_all("ns => ns.map(n => n.dataset.node)")) == [
                "audit",
                "billing",
                "fraud",
            ]
            edges = tab.locator("#acl line.edge").evaluate_all(
                "es => es.map(e => [e.dataset.from, e.dataset.to, e.dataset.direction, "
                "e.hasAttribute('marker-start'), e.hasAttribute('marker-end')])"
            )
            assert sorted(edges) == [
                ["billing", "fraud", "bidirectional", True, True],
                ["fraud", "audit", "outbound", False, True],
            ]
