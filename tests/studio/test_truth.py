"""What the Studio shows is what happened: stamps, lanes, counts, finished crews, the
attach-time baseline, a refused non-store file and a read-only page without a form."""

from __future__ import annotations

import http.client
import subprocess
import sys
import threading
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

import orkeon_actors as ok
from orkeon_actors.crew import Agent, ScriptedModel, call, respond
from orkeon_actors.errors import StoreError
from orkeon_actors.lifecycle import CrewBlueprint, CrewSupervisor, LifecycleState
from orkeon_actors.orchestration import Sequential, Task
from orkeon_actors.studio import LifecycleWatcher, StoreFileSource, StudioFeed, StudioServer, StudioTap
from orkeon_actors.studio.feed import FeedSubscriber, rfc3339
from orkeon_actors.testing import wait_until


def sleeper(_: ok.CrewId) -> CrewBlueprint:
    agent = Agent("a", ScriptedModel([call("receive_message", {"wait_forever": True}), respond("done")]))
    return CrewBlueprint(agents=[agent], orchestration=Sequential([Task("go", agent.agent_id)]))


def quick(_: ok.CrewId) -> CrewBlueprint:
    agent = Agent("solo", ScriptedModel([respond("finished")]))
    return CrewBlueprint(agents=[agent], orchestration=Sequential([Task("go", agent.agent_id)]))


def _tap(rt: ok.Runtime) -> StudioTap:
    assert rt.studio is not None
    tap = rt.studio.source.tap  # type: ignore[attr-defined]
    assert isinstance(tap, StudioTap)
    return tap


def _collect(subscriber: FeedSubscriber, count: int) -> list[dict[str, Any]]:
    got: list[dict[str, Any]] = []
    wait_until(lambda: len(got.__iadd__(subscriber.take(0.05))) >= count, what=f"{count} feed events")
    return got


class _StepClock:
    """The runtime's virtual clock, moved 1 s at every reading by the tap: an event stamped
    after the chain returned is visibly later than the message's own ``published_at``."""

    def __init__(self, clock: ok.VirtualClock) -> None:
        self.clock = clock

    def now(self) -> Any:
        self.clock.advance(timedelta(seconds=1))
        return self.clock.now()


def test_a_post_is_stamped_when_it_was_posted_and_precedes_its_receipt() -> None:
    clock = ok.VirtualClock()
    with ok.Runtime.start(studio=0, clock=clock) as rt:
        tap = _tap(rt)
        tap.clock = _StepClock(clock)  # type: ignore[assignment]
        subscriber = tap.feed.attach()
        box = rt.hub.register_mailbox("agent://b/bob")
        sent = rt.hub.bind("a", "alice").post("agent://b/bob", {"n": 1})
        rt.hub.bind("b", "bob").wait_for(ok.WaitOnMailbox(box.address), timeout=5)
        post, receive = _collect(subscriber, 2)
        assert (post["kind"], receive["kind"]) == ("post", "receive")
        assert post["at"] == rfc3339(sent.published_at)
        assert post["at"] <= receive["at"]


def test_a_reply_names_the_requesting_agent() -> None:
    with ok.Runtime.start(studio=0) as rt:
        subscriber = _tap(rt).feed.attach()
        box = rt.hub.register_mailbox("agent://desk/clerk")
        answered = threading.Thread(
            target=lambda: (
                request := rt.hub.bind("desk", "clerk").wait_for(ok.WaitOnMailbox(box.address), timeout=10),
                rt.hub.bind("desk", "clerk").reply(request.correlation_id, "ok"),
            )
        )
        answered.start()
        rt.hub.bind("shop", "alice").send("agent://desk/clerk", "price?", timeout=10)
        answered.join(10)
        events = _collect(subscriber, 3)
        (reply,) = [e for e in events if e["kind"] == "reply"]
        assert (reply["to_crew"], reply["to_agent"]) == ("shop", "alice")


def test_the_states_at_attach_are_a_baseline_not_transitions() -> None:
    states = {"old": LifecycleState.ASLEEP}
    feed = StudioFeed()
    watcher = LifecycleWatcher(feed, lambda: dict(states), ok.VirtualClock(), interval=0.01)
    try:
        subscriber = feed.attach()
        wait_until(watcher.baseline_taken.is_set, what="the baseline read")
        states["old"] = LifecycleState.ACTIVE
        states["new"] = LifecycleState.ACTIVE
        events = _collect(subscriber, 2)
        assert sorted((e["kind"], e["crew"], e.get("from_state")) for e in events) == [
            ("state", "new", None),
            ("wake", "old", "Asleep"),
        ]
    finally:
        watcher.stop()


@pytest.fixture
def asleep(tmp_path: Path) -> Iterator[tuple[ok.Runtime, CrewSupervisor, Path]]:
    db = tmp_path / "state.db"
    rt = ok.Runtime.start(store=str(db), studio=0)
    sup = CrewSupervisor.start(rt, factories={"sleeper": sleeper, "quick": quick})
    try:
        sup.spawn("sleeper", "napper")
        assert sup.sleep("napper") is True
        yield rt, sup, db
    finally:
        sup.stop()
        rt.stop()


def test_the_pending_waits_metric_counts_each_wait_once(asleep: tuple[ok.Runtime, CrewSupervisor, Path]) -> None:
    rt, _, db = asleep
    assert rt.studio is not None
    live = rt.studio.source.overview()
    stored = StoreFileSource(db).overview()
    for state in (live, stored):
        assert len(state["waits"]) == 1
        assert sum(state["metrics"]["pending_waits"].values()) == 1, state["metrics"]


def test_a_completed_crew_stays_listed_with_its_name_mode_and_agents(
    asleep: tuple[ok.Runtime, CrewSupervisor, Path],
) -> None:
    _, sup, db = asleep
    sup.spawn("quick", "q1")
    sup.wait_finished("q1", timeout=30)
    wait_until(lambda: any(c["id"] == "q1" for c in StoreFileSource(db).overview()["crews"]), what="q1 listed")
    (crew,) = [c for c in StoreFileSource(db).overview()["crews"] if c["id"] == "q1"]
    assert (crew["state"], crew["name"], crew["mode"], crew["agents"]) == ("Completed", "quick", "sequential", ["solo"])
    assert crew["as_of"] is not None and crew["as_of"].endswith("Z")


def test_a_file_that_is_not_a_store_is_refused_as_orkeon_store_refuses_it(tmp_path: Path) -> None:
    other = tmp_path / "notes.db"
    other.write_text("these are my notes, not a database\n")
    with pytest.raises(StoreError) as refused:
        StoreFileSource(other)
    cli = [sys.executable, "-m", "orkeon_actors.cli"]
    store = subprocess.run([*cli, "store", str(other), "crews"], capture_output=True, text=True, timeout=60)
    studio = subprocess.run([*cli, "studio", "--store", str(other)], capture_output=True, text=True, timeout=60)
    assert store.returncode == studio.returncode == 1
    assert store.stderr.removeprefix("orkeon store: ") == studio.stderr.removeprefix("orkeon studio: ")
    assert str(refused.value) in studio.stderr and "Traceback" not in studio.stderr


def _page(server: StudioServer) -> bytes:
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
    conn.request("GET", "/?token=" + server.token)
    body = conn.getresponse().read()
    conn.close()
    return body


def test_a_read_only_page_has_no_post_form(asleep: tuple[ok.Runtime, CrewSupervisor, Path]) -> None:
    rt, _, db = asleep
    assert rt.studio is not None
    assert b"<form" not in _page(rt.studio)  # started without studio_post
    store = StudioServer(StoreFileSource(db))
    try:
        assert b"<form" not in _page(store)
    finally:
        store.stop()
    with ok.Runtime.start(studio=0, studio_post=True) as posting:
        assert posting.studio is not None and b'<form id="post-form">' in _page(posting.studio)
