"""A new crew's mailboxes: registered durably without its first turn waiting for the
commit (docs/lifecycle.md, "A parked crew under 8 KB, a start without a commit wait"),
in order with what follows, and a registration the store refuses ends the crew."""

from __future__ import annotations

from typing import Any

import apsw
import pytest

from orkeon_actors.crew import CrewStatus, call, respond
from orkeon_actors.lifecycle import LifecycleState
from orkeon_actors.store import mailboxes
from orkeon_actors.testing import wait_until

from .conftest import Env
from .test_sleep_wake import _crew


def _parked() -> Any:
    return _crew(call("receive_message", {"wait_forever": True}), respond("done"))


def test_a_post_right_after_the_crew_parked_is_delivered_and_a_sleep_keeps_its_mailboxes(env: Env) -> None:
    env.factories["c"] = lambda _: _parked()
    sup = env.boot()
    sup.spawn("c", "c1")
    assert env.settle("c1") is CrewStatus.WAITING
    assert sup.sleep("c1") is True  # its snapshot committed after the registration it follows
    env.hub.bind("other", "x").post("agent://c1/a", {"n": 1})
    assert env.settle("c1", CrewStatus.COMPLETED) is CrewStatus.COMPLETED


def test_a_crew_whose_mailboxes_the_store_refuses_fails_with_that_cause(
    env: Env, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = mailboxes.register_many

    def refuse(conn: apsw.Connection, keys: list[str], now: str) -> None:
        if any("doomed" in key for key in keys):
            raise apsw.ConstraintError("refused by the test")
        real(conn, keys, now)

    monkeypatch.setattr(mailboxes, "register_many", refuse)
    env.factories["c"] = lambda _: _parked()
    sup = env.boot()
    sup.spawn("c", "doomed")
    status, _, failure = env.summary("doomed")
    assert status is CrewStatus.FAILED
    assert "ConstraintError" in str(failure) and "refused by the test" in str(failure)
    assert sup.state("doomed") is LifecycleState.FAILED
    sup.spawn("c", "fine")  # other crews are unaffected
    assert env.settle("fine") is CrewStatus.WAITING
    wait_until(lambda: sup.sleep("fine"), what="fine asleep")
