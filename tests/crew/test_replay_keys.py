"""The keys a crew gives its agents' hub side-effect tool calls on a runtime with a sent
history (:mod:`orkeon_actors.crew.replay_keys`): derived from where the call stands in
the agent's conversation, so a replay from the same conversation reuses them."""

from __future__ import annotations

import json
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

import orkeon_actors as ok
from orkeon_actors.crew import Agent, ScriptedModel, ToolCall, call, respond
from orkeon_actors.crew.replay_keys import MAX_KEY, keyed, replay_key
from orkeon_actors.crew.state import AgentState, TaskAssignment
from orkeon_actors.model.ids import AgentId
from orkeon_actors.orchestration import Sequential, Task

from .conftest import run_crew

SINK = "agent://sink/s"


def _state(task: str = "t1", turns: int = 1) -> AgentState:
    return AgentState(AgentId("a"), "worker", task=TaskAssignment(task, "go"), turns=turns)


def _post(call_id: str = "c1", **extra: object) -> ToolCall:
    return ToolCall(call_id, "post_message", {"target_mailbox": SINK, "payload": {"n": 1}, **extra})


def test_the_key_is_the_task_the_turn_and_the_call_id() -> None:
    assert replay_key(_state(), _post()) == "call:t1:1:c1"
    keys = {replay_key(_state(), _post()), replay_key(_state(turns=2), _post())}
    keys |= {replay_key(_state(task="t2"), _post()), replay_key(_state(), _post("c2"))}
    assert len(keys) == 4


@given(st.text(min_size=1, max_size=400), st.text(min_size=1, max_size=400), st.integers(0, 10**9))
def test_a_key_is_deterministic_and_never_longer_than_the_tools_accept(task: str, call_id: str, turns: int) -> None:
    key = replay_key(_state(task, turns), _post(call_id))
    assert key == replay_key(_state(task, turns), _post(call_id)) and 0 < len(key) <= MAX_KEY


def test_only_unkeyed_posts_and_requests_get_a_key() -> None:
    state = _state()
    assert json.loads(keyed(state, _post()).arguments)["idempotency_key"] == "call:t1:1:c1"
    request = ToolCall("c2", "send_request", {"target_mailbox": SINK, "payload": 1, "timeout_ms": 10})
    assert json.loads(keyed(state, request).arguments)["idempotency_key"] == "call:t1:1:c2"
    own = _post(idempotency_key="mine")
    assert keyed(state, own) is own  # the model's own key wins
    for untouched in (
        ToolCall("c3", "publish_event", {"topic": "x", "payload": 1}),
        ToolCall("c4", "reply_to", {"correlation_id": "r", "payload": 1}),
        ToolCall("c6", "post_message", "[1, 2]"),
    ):
        assert keyed(state, untouched) is untouched


def _poster() -> Agent:
    script = [call("post_message", {"target_mailbox": SINK, "payload": {"n": 1}}), respond("posted")]
    return Agent("a", ScriptedModel(script))


def test_an_agent_post_on_a_durable_runtime_is_keyed_in_its_sent_history(tmp_path: Path) -> None:
    with ok.Runtime.start(store=tmp_path / "keys.db") as rt:
        sink = rt.hub.register_mailbox(SINK)
        assert run_crew(rt, [_poster()], Sequential([Task("go", "a")])) == "posted"
        [message] = sink.close()
        [row] = rt.hub.bind(message.source_crew_id, "a").sent().rows
        assert str(row.message_id) == str(message.id) and row.idempotency_key == "call:task-0:1:call-0-0"


def test_an_agent_post_on_an_in_memory_runtime_takes_no_key(rt: ok.Runtime) -> None:
    sink = rt.hub.register_mailbox(SINK)
    assert run_crew(rt, [_poster()], Sequential([Task("go", "a")])) == "posted"
    assert [m.json() for m in sink.close()] == [{"n": 1}]


def test_an_agent_send_request_on_a_durable_runtime_is_keyed_in_its_sent_history(tmp_path: Path) -> None:
    ask = call("send_request", {"target_mailbox": SINK, "payload": {"q": 1}, "timeout_ms": 1})
    with ok.Runtime.start(store=tmp_path / "keys.db") as rt:
        sink = rt.hub.register_mailbox(SINK)
        agent = Agent("a", ScriptedModel([ask, respond("asked")]))
        assert run_crew(rt, [agent], Sequential([Task("go", "a")])) == "asked"  # its wait timed out
        [request] = sink.close()
        [row] = rt.hub.bind(request.source_crew_id, "a").sent().rows
        assert str(row.message_id) == str(request.id) and row.idempotency_key == "call:task-0:1:call-0-0"
