"""The agent event journal: ordered, bounded, and an observer attaching late sees the
history and then every new event exactly once."""

from __future__ import annotations

import json
import threading
from datetime import UTC, datetime

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from orkeon_actors.errors import InvalidArgumentError
from orkeon_actors.model.agent_events import (
    AgentAnswered,
    AgentEvent,
    AgentEventJournal,
    ModelCallFinished,
    ModelCallStarted,
)
from orkeon_actors.wire.agent_events import decode_agent_event, encode_agent_event

AT = datetime(2026, 1, 1, tzinfo=UTC)


def _answered(agent: str) -> AgentAnswered:
    return AgentAnswered(crew_id="c1", agent_id=agent, at=AT)


@given(st.integers(1, 50), st.integers(0, 120))
def test_the_journal_keeps_the_last_events_in_order(size: int, count: int) -> None:
    journal = AgentEventJournal(size)
    for i in range(count):
        journal.record(_answered(f"a{i}"))
    kept = journal.recent()
    assert [e.agent_id for e in kept] == [f"a{i}" for i in range(max(0, count - size), count)]
    assert [e.seq for e in kept] == list(range(max(0, count - size) + 1, count + 1))


def test_a_late_subscriber_gets_the_history_then_each_new_event_once() -> None:
    journal = AgentEventJournal()
    seen: list[AgentEvent] = []
    stop = threading.Event()

    def emit() -> None:
        i = 0
        while not stop.is_set() or i < 200:
            journal.record(_answered(f"a{i}"))
            i += 1

    emitter = threading.Thread(target=emit)
    emitter.start()
    while not journal.recent():
        pass
    history, unsubscribe = journal.subscribe(seen.append)
    stop.set()
    emitter.join(timeout=10)
    unsubscribe()
    seqs = [e.seq for e in history] + [e.seq for e in seen]
    assert seqs == list(range(1, len(seqs) + 1))


def test_a_failing_subscriber_is_dropped_and_never_fails_the_emitter() -> None:
    journal = AgentEventJournal()

    def broken(event: AgentEvent) -> None:
        raise RuntimeError("observer bug")

    journal.subscribe(broken)
    journal.record(
        ModelCallStarted(call_id="call-1", crew_id="c", agent_id="a", turn=0, model="m", provider="p", started_at=AT)
    )
    journal.record(_answered("a"))
    assert len(journal.recent()) == 2


def test_a_journal_keeps_at_least_one_event() -> None:
    with pytest.raises(ValueError, match="at least one"):
        AgentEventJournal(0)


@settings(deadline=None)  # a codec round trip: no timing asserted (a loaded machine missed 200 ms)
@given(
    st.builds(
        ModelCallFinished,
        seq=st.integers(0, 10**9),
        call_id=st.text(max_size=8),
        crew_id=st.text(max_size=8),
        agent_id=st.text(max_size=8),
        turn=st.integers(0, 100),
        model=st.text(max_size=8),
        provider=st.text(max_size=8),
        started_at=st.datetimes(min_value=datetime(1970, 1, 1), timezones=st.just(UTC)),
        duration_s=st.floats(0, 1e6),
        response_model=st.none() | st.text(max_size=8),
        input_tokens=st.integers(0, 10**9),
        output_tokens=st.integers(0, 10**9),
        cost=st.floats(0, 1e6),
        finish_reasons=st.lists(st.text(max_size=5), max_size=3).map(tuple),
        tool_calls=st.lists(st.text(max_size=5), max_size=3).map(tuple),
        error=st.none() | st.text(max_size=8),
        answer=st.none() | st.text(max_size=8),
    )
)
def test_an_event_reads_back_from_its_json(event: ModelCallFinished) -> None:
    text = json.dumps(encode_agent_event(event))
    assert decode_agent_event(json.loads(text)) == event


@pytest.mark.parametrize("value", [[], {"kind": "nope"}, {"kind": "agent_answered", "crew_id": "c"}])
def test_what_is_not_an_event_is_refused_with_a_typed_error(value: object) -> None:
    with pytest.raises(InvalidArgumentError):
        decode_agent_event(value)
