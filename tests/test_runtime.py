"""Runtime lifecycle: start, stop, and nothing left behind."""

from __future__ import annotations

import threading

import pykka
import pytest

import orkeon_actors as ok
from orkeon_actors.errors import HubStoppedError
from orkeon_actors.hub.mailbox import MailboxActor
from orkeon_actors.testing import wait_until
from tests.conftest import Background


def _threads() -> set[threading.Thread]:
    return set(threading.enumerate())


def test_stop_leaves_no_thread_behind() -> None:
    before = _threads()
    with ok.Runtime.start() as rt:
        hub = rt.hub
        regs = [hub.register_mailbox(f"agent://c/a{i}") for i in range(5)]
        for i in range(5):  # a mailbox has an actor once it has work
            hub.bind("c", "x").post(f"agent://c/a{i}", 1)
        hub.bind("c", "x").subscribe("t")
        hub.bind("c", "x").wait_for(ok.WaitOnTopic("t"), 0.01)
        live = [r for r in pykka.ActorRegistry.get_by_class(MailboxActor) if r.is_alive()]
        assert len(live) >= 5 and regs
        assert _threads() - before  # the scheduler runs on threads of its own
    wait_until(lambda: not (_threads() - before), what="every runtime thread to end")


def test_virtual_clock_runtime_stops_cleanly_too() -> None:
    before = _threads()
    rt = ok.Runtime.start(clock=ok.VirtualClock())
    rt.hub.register_mailbox("agent://c/a")
    rt.stop()
    rt.stop()  # idempotent
    wait_until(lambda: not (_threads() - before), what="every runtime thread to end")


def test_stop_releases_blocked_callers_with_a_typed_error() -> None:
    rt = ok.Runtime.start()
    rt.hub.register_mailbox("agent://b/b")
    waiting = Background(lambda: rt.hub.bind("a", "a").wait_for(ok.WaitOnTopic("t"), ok.FOREVER))
    sending = Background(lambda: rt.hub.bind("a", "a").send("agent://b/b", 1, timeout=60))
    wait_until(lambda: rt.hub.pending_waits() == {"on_topic": 1, "on_mailbox": 0, "on_reply": 1}, what="two waits")
    rt.stop()
    with pytest.raises(HubStoppedError):
        waiting.get()
    with pytest.raises(HubStoppedError):
        sending.get()
    with pytest.raises(HubStoppedError):
        rt.hub.bind("a", "a").publish("t", 1)


def test_runtimes_are_independent() -> None:
    with ok.Runtime.start() as one, ok.Runtime.start() as two:
        one.hub.register_mailbox("agent://c/a")
        two.hub.register_mailbox("agent://c/a")
        sub = two.hub.bind("c", "a").subscribe("t")
        one.hub.bind("c", "a").publish("t", 1)
        assert sub.drain() == []
