"""The adapters on the SDKs' async clients: a crew's calls are in flight at once on the
runtime's I/O loop, one client per event loop, and only an async client is accepted."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import pytest

import orkeon_actors as ok
from orkeon_actors.crew import Agent, CrewActor, Model, start_crew
from orkeon_actors.errors import ModelConfigError
from orkeon_actors.models import AnthropicModel, OpenAIChatModel, RetryPolicy
from orkeon_actors.orchestration import Branch, Parallel, Sequential, Task
from tests.crew.conftest import run_crew

from .fake_provider import FakeProvider, Received, Reply, Sleeps, Step, anthropic_script, openai_script

ADAPTERS: dict[str, tuple[Callable[[FakeProvider], Model], Callable[..., Callable[[Received], Reply]]]] = {
    "openai": (
        lambda p: OpenAIChatModel("gpt-test", base_url=f"{p.url}/v1", retry=RetryPolicy(max_retries=0, sleep=Sleeps())),
        openai_script,
    ),
    "anthropic": (
        lambda p: AnthropicModel("claude-test", api_key="k", base_url=p.url, retry=RetryPolicy(max_retries=0)),
        anthropic_script,
    ),
}


@pytest.mark.parametrize("adapter", sorted(ADAPTERS))
def test_four_parallel_branches_have_their_requests_in_flight_at_once(
    rt: ok.Runtime, provider: FakeProvider, adapter: str
) -> None:
    build, script = ADAPTERS[adapter]
    answer = script(Step("done"))
    together = threading.Barrier(4, timeout=10)  # broken (an error reply) unless all four arrive

    def handler(received: Received) -> Reply:
        together.wait()
        return answer(received)

    provider.handler = handler
    model = build(provider)
    agents = [Agent(f"a{i}", model) for i in range(4)]
    result = run_crew(rt, agents, Parallel([Branch(f"b{i}", f"a{i}", "go") for i in range(4)]))
    assert result == "done\ndone\ndone\ndone"
    assert rt.agent_io.loop.started


def test_one_model_serves_two_runtimes_in_turn(provider: FakeProvider) -> None:
    provider.handler = openai_script(Step("hi"))
    model = ADAPTERS["openai"][0](provider)
    for _ in range(2):  # the second runtime's loop gets its own client
        with ok.Runtime.start() as rt:
            assert run_crew(rt, [Agent("a", model)], Sequential([Task("go", "a")])) == "hi"


def test_a_synchronous_sdk_client_is_refused() -> None:
    import openai

    with pytest.raises(ModelConfigError, match=r"openai\.AsyncOpenAI"):
        OpenAIChatModel("gpt-test", client=openai.OpenAI(api_key="k"))


def test_the_events_carry_the_provider_and_its_finish_reason(rt: ok.Runtime, provider: FakeProvider) -> None:
    provider.handler = openai_script(Step("hi", input_tokens=12, output_tokens=3))
    model: Any = ADAPTERS["openai"][0](provider)
    run_crew(rt, [Agent("a", model)], Sequential([Task("go", "a")]))
    finished = [e for e in rt.agent_events.recent() if type(e).__name__ == "ModelCallFinished"]
    assert [(e.provider, e.model, e.input_tokens, e.output_tokens, e.finish_reasons) for e in finished] == [
        ("openai", "gpt-test", 12, 3, ("stop",))
    ]


@pytest.mark.parametrize("adapter", sorted(ADAPTERS))
def test_stopping_a_crew_aborts_its_http_request(rt: ok.Runtime, provider: FakeProvider, adapter: str) -> None:
    provider.hang = True
    model = ADAPTERS[adapter][0](provider)
    ref = CrewActor.start(rt.hub, agents=[Agent("a", model)], orchestration=Sequential([Task("go", "a")]))
    start_crew(ref)
    assert provider.hanging.acquire(timeout=10)  # the request is in flight
    ref.stop()
    assert provider.aborted.acquire(timeout=10)  # the SDK closed the connection
