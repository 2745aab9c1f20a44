"""The Studio in a real browser: Debian's Chromium driven by Playwright (no browser
download). Each test saves a screenshot under its temp directory."""

from __future__ import annotations

import contextlib
import socket
import subprocess
import sys
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

import orkeon_actors as ok
from orkeon_actors.acl import AclMiddleware, AclRegistry, CrewLink
from orkeon_actors.crew import Agent, CrewActor, ScriptedModel, call, respond, start_crew
from orkeon_actors.lifecycle import CrewBlueprint, CrewSupervisor
from orkeon_actors.model.agent_events import (
    AgentAnswered,
    ModelCallFinished,
    ModelCallStarted,
    ToolCallFinished,
    ToolCallStarted,
)
from orkeon_actors.orchestration import Sequential, Task
from orkeon_actors.studio import StoreFileSource, StudioServer
from orkeon_actors.studio.feed import event
from orkeon_actors.testing import wait_until
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
    # The lifecycle watcher has read napper asleep (its baseline at attach, not drawn), so the
    # wake is a change it reports; a post before that read would make "Active" the baseline.
    watcher = rt._studio_watcher
    assert watcher is not None
    wait_until(watcher.baseline_taken.is_set, what="the watcher's baseline")
    assert page.locator("#flow g.event[data-kind='state']").count() == 0
    rt.hub.bind("tester", "t").post("agent://napper/a", {"wake": "up"})
    page.wait_for_selector("#crews tr[data-crew='napper'] .state-Active", timeout=DEADLINE_MS)
    page.wait_for_selector("#flow g.event[data-kind='post']", timeout=DEADLINE_MS)
    post = page.locator("#flow g.event[data-kind='post'] text").first
    assert post.text_content() == "post"  # the hub's own topic, _system.post, is not a label
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


def test_the_store_page_shows_mailboxes_outbox_ages_and_each_wait_once(chromium: Any, tmp_path: Path) -> None:
    db = tmp_path / "watched.db"
    with ok.Runtime.start(store=str(db)) as rt:
        sup = CrewSupervisor.start(rt, factories={"napper": napper})
        sup.spawn("napper", "napper")
        assert sup.sleep("napper") is True
        server = StudioServer(StoreFileSource(db))
        errors: list[str] = []
        context = chromium.new_context()
        try:
            tab = context.new_page()
            tab.on("pageerror", lambda e: errors.append(str(e)))
            tab.goto(server.url)
            tab.wait_for_selector("#conn[data-state=polling]", timeout=DEADLINE_MS)
            tab.wait_for_selector("#mailboxes tr[data-address='agent://napper/a']", timeout=DEADLINE_MS)
            rows = tab.locator("#mailboxes tbody tr").count()
            assert rows >= 1 and tab.locator("#mailbox-count").text_content() == f"({rows})"
            tab.wait_for_function(
                "() => document.querySelector(\"#crews tr[data-crew='napper'] td.as-of\").textContent.endsWith('ago')",
                timeout=DEADLINE_MS,
            )
            assert tab.locator(".metric[data-metric=waits] .value").text_content() == "1"  # one wait, once
            assert tab.locator("#post-form").count() == 0  # a read-only page has no form
            tab.screenshot(path=str(tmp_path / "store.png"), full_page=True)
        finally:
            context.close()
            server.stop()
            sup.stop()
    assert errors == []


def _lane_x(page: Any, lane: str) -> float:
    return float(page.locator(f"#flow g.lane-group[data-lane='{lane}'] line").get_attribute("x1"))


def test_the_flow_is_drawn_in_the_order_things_happened(page: Any, studio: tuple[ok.Runtime, CrewSupervisor]) -> None:
    rt, _ = studio
    assert rt.studio is not None and rt.studio.feed is not None
    feed = rt.studio.feed
    posted = datetime(2026, 1, 1, 12, 0, 0, tzinfo=UTC)
    parties = {"crew": "shop", "agent": "alice", "to_crew": "desk", "to": "agent://desk/clerk"}
    # the receipt reaches the page first, as when a consumer wins the race with the poster
    feed.emit(event("receive", posted + timedelta(milliseconds=3), topic="_system.post", latency_ms=3.0, **parties))
    feed.emit(event("post", posted, topic="_system.post", **parties))
    reply = {"crew": "desk", "agent": "clerk", "to_crew": "shop", "to_agent": "alice"}
    feed.emit(event("reply", posted + timedelta(milliseconds=5), topic="_system.reply", **reply))
    page.wait_for_function("() => document.querySelectorAll('#flow g.event').length >= 3", timeout=DEADLINE_MS)
    kinds = page.locator("#flow g.event").evaluate_all("gs => gs.map(g => g.dataset.kind)")
    assert [k for k in kinds if k in ("post", "receive", "reply")] == ["post", "receive", "reply"]
    labels = page.locator("#flow g.event > text:not(.muted)").all_text_contents()
    assert not any("_system" in label for label in labels), labels
    arrow = page.locator("#flow g.event[data-kind='reply'] line.arrow")
    assert float(arrow.get_attribute("x2")) == _lane_x(page, "shop/alice")  # on the requester's lane


def _model_call(rt: ok.Runtime, agent: str, turn: int, *, tokens: tuple[int, int], cost: float) -> None:
    journal = rt.agent_events
    call_id = journal.next_call_id()
    started_at = rt.clock.now()
    fields = {"call_id": call_id, "crew_id": "desk", "agent_id": agent, "turn": turn, "model": "gpt-test"}
    journal.record(ModelCallStarted(**fields, provider="openai", started_at=started_at))
    journal.record(
        ModelCallFinished(
            **fields,
            provider="openai",
            started_at=started_at,
            duration_s=1.5,
            input_tokens=tokens[0],
            output_tokens=tokens[1],
            cost=cost,
            finish_reasons=("tool_calls",),
        )
    )


def test_the_agent_view_draws_history_and_live_calls(chromium: Any, tmp_path: Path) -> None:
    with ok.Runtime.start(studio=0) as rt:
        assert rt.studio is not None
        journal = rt.agent_events
        # before any browser attached: one turn of clerk (a model call, a tool call, the answer)
        _model_call(rt, "clerk", 0, tokens=(120, 30), cost=0.0015)
        tool = {"call_id": journal.next_call_id(), "crew_id": "desk", "agent_id": "clerk", "tool_call_id": "t1"}
        at = rt.clock.now()
        journal.record(ToolCallStarted(**tool, name="lookup", started_at=at, arguments='{"sku": 42}'))
        journal.record(ToolCallFinished(**tool, name="lookup", started_at=at, duration_s=0.2, result='{"price": 9}'))
        journal.record(AgentAnswered(crew_id="desk", agent_id="clerk", at=rt.clock.now(), text="it costs 9"))
        with _open(chromium, rt.studio.url, tmp_path / "agents.png") as tab:
            lane = "#agents .agent-lane[data-agent='desk/clerk']"
            tab.wait_for_selector(f"{lane} .answer", timeout=DEADLINE_MS)
            bar = tab.locator(f"{lane} .call.model").first.text_content()
            assert "gpt-test" in bar and "1.50 s" in bar and "120 \u2192 30 tokens" in bar and "$0.0015" in bar
            details = tab.locator(f"{lane} details.call.tool[data-tool='lookup']")
            assert details.get_attribute("open") is None  # collapsed
            assert '{"sku": 42}' in details.locator("pre.arguments").text_content()
            assert '{"price": 9}' in details.locator("pre.result").text_content()
            assert tab.locator(f"{lane} .answer").text_content() == "answer: it costs 9"
            # live: a call in flight shows its elapsed time, then its figures when it ends
            call_id = journal.next_call_id()
            started = {"call_id": call_id, "crew_id": "desk", "agent_id": "boss", "turn": 0, "model": "gpt-test"}
            started_at = rt.clock.now()
            journal.record(ModelCallStarted(**started, provider="openai", started_at=started_at))
            inflight = f"#agents .call.model.inflight[data-call='{call_id}'] .elapsed"
            tab.wait_for_function(
                f"() => (document.querySelector(\"{inflight}\") || {{}}).textContent?.endsWith(' s')",
                timeout=DEADLINE_MS,
            )
            journal.record(
                ModelCallFinished(
                    **started,
                    provider="openai",
                    started_at=started_at,
                    duration_s=0.5,
                    input_tokens=10,
                    output_tokens=5,
                )
            )
            tab.wait_for_selector(f"#agents .call.model[data-call='{call_id}']:not(.inflight)", timeout=DEADLINE_MS)
            totals = tab.locator("#agent-totals tr[data-crew='desk'] td").all_text_contents()
            assert totals == ["desk", "2", "2", "130", "35", "$0.0015"]


@contextlib.contextmanager
def _fake_openai(latency: float) -> Iterator[str]:
    """The bench's fake OpenAI-compatible server, in its own process: its ``/v1`` URL."""
    server = subprocess.Popen(
        [sys.executable, "-m", "orkeon_actors.bench.fake_openai", "--latency", str(latency)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        assert server.stdout is not None
        yield f"http://127.0.0.1:{int(server.stdout.readline())}/v1"
    finally:
        assert server.stdin is not None
        server.stdin.close()
        server.wait(timeout=30)


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port


def test_orkeon_studio_store_shows_the_agents_calls_and_failure_of_a_finished_run(
    chromium: Any, tmp_path: Path
) -> None:
    pytest.importorskip("openai", reason="the openai extra is not installed")
    from orkeon_actors.models import OpenAIChatModel, RetryPolicy

    db = tmp_path / "run.db"
    with _fake_openai(0.05) as url, ok.Runtime.start(store=str(db)) as rt:
        answering = OpenAIChatModel("fake", api_key="test", base_url=url, timeout=30)
        refused = OpenAIChatModel(
            "fake", api_key="test", base_url=f"http://127.0.0.1:{_closed_port()}/v1", retry=RetryPolicy(max_retries=0)
        )
        refs = [
            CrewActor.start(
                rt.hub, agents=[Agent(agent, model)], orchestration=Sequential([Task("go", agent)]), crew_id=crew
            )
            for crew, agent, model in (("desk", "clerk", answering), ("floor", "boss", refused))
        ]
        try:
            for ref in refs:
                start_crew(ref)
            wait_until(
                lambda: len(StoreFileSource(db).agent_events(0)["events"]) == 6, what="both crews' events stored"
            )
        finally:
            for ref in refs:
                ref.stop()
    # the run is over: the browser attaches to its store only now (orkeon studio --store)
    server = StudioServer(StoreFileSource(db))
    try:
        with _open_polling(chromium, server.url, tmp_path / "store-agents.png") as tab:
            clerk, boss = "#agents .agent-lane[data-agent='desk/clerk']", "#agents .agent-lane[data-agent='floor/boss']"
            tab.wait_for_selector(f"{clerk} .answer", timeout=DEADLINE_MS)
            tab.wait_for_selector(f"{boss} .failure", timeout=DEADLINE_MS)
            bar = tab.locator(f"{clerk} .call.model").text_content()
            assert "fake" in bar and "10 \u2192 1 tokens" in bar and "stop" in bar
            assert tab.locator(f"{clerk} .answer").text_content() == "answer: (content capture off)"
            assert tab.locator(f"{boss} .call.model.failed").count() == 1
            failure = tab.locator(f"{boss} .failure")
            assert failure.get_attribute("data-reason") == "model_error"
            assert str(failure.text_content()).startswith("failed (model_error): ModelError: ")
    finally:
        server.stop()


@contextlib.contextmanager
def _open_polling(browser: Any, url: str, screenshot: Path) -> Iterator[Any]:
    """A Chromium tab on a store's page (it polls); fails if the page logged an error."""
    errors: list[str] = []
    context = browser.new_context(viewport={"width": 1300, "height": 1100})
    try:
        tab = context.new_page()
        tab.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
        tab.on("pageerror", lambda e: errors.append(str(e)))
        tab.goto(url)
        tab.wait_for_selector("#conn[data-state=polling]", timeout=DEADLINE_MS)
        try:
            yield tab
        finally:
            tab.screenshot(path=str(screenshot), full_page=True)
    finally:
        context.close()
    assert errors == [], f"the page logged errors: {errors}"
