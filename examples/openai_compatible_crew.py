"""A two-agent crew on a real LLM: any OpenAI-compatible endpoint, from the environment.

    export OPENAI_BASE_URL=http://127.0.0.1:11434/v1    # Ollama; or vLLM, llama.cpp, LM Studio
    export OPENAI_MODEL=qwen2.5:7b-instruct              # a model that can call tools
    export OPENAI_API_KEY=...                            # only if the server needs one
    python examples/openai_compatible_crew.py "the Rhine"

Needs ``pip install "orkeon-actors[openai]"``. Without OPENAI_BASE_URL it talks to
OpenAI itself (then OPENAI_API_KEY is required). The researcher publishes facts as a
retained event through the hub tools; the writer reads them back and summarises. Every
step (model turns, tool calls, results) is printed as the crew runs.
"""

from __future__ import annotations

import os
import sys

import orkeon_actors as ok
from orkeon_actors.crew import Agent, BudgetLimits, CrewActor, start_crew, wait_finished
from orkeon_actors.errors import CrewFailedError
from orkeon_actors.models import OpenAIChatModel, RetryPolicy
from orkeon_actors.orchestration import Sequential, Task


class Printer:
    """A crew observer: prints the trace as the crew runs."""

    def record(self, crew_id: str, agent_id: str | None, kind: str, detail: str) -> None:
        print(f"[{agent_id or crew_id}] {kind}: {detail}")


def main(topic: str) -> int:
    model = OpenAIChatModel(
        os.environ["OPENAI_MODEL"],
        base_url=os.environ.get("OPENAI_BASE_URL"),  # None: api.openai.com
        max_tokens=512,
        # OpenAI itself wants max_completion_tokens; most compatible servers max_tokens.
        max_tokens_parameter="max_tokens" if os.environ.get("OPENAI_BASE_URL") else "max_completion_tokens",
        timeout=120,
        retry=RetryPolicy(max_retries=3),
    )
    budget = BudgetLimits(max_tokens=50_000, max_tool_calls=10)  # a runaway model fails, it does not loop
    researcher = Agent(
        "researcher",
        model,
        instructions="You are a researcher. Use the tools you are given; be concise.",
        budget=budget,
    )
    writer = Agent("writer", model, instructions="You are a writer. Use the tools you are given.", budget=budget)
    tasks = Sequential(
        [
            Task(
                f"Write three short facts about {topic}. Publish them with publish_event on topic "
                "'notes.facts' with retain_as_last_value true and last_value_key 'facts', then answer 'published'.",
                researcher.agent_id,
            ),
            Task(
                "Call get_last_value with key 'facts' and crew_scope '_global', then answer with a two-sentence "
                "summary of the facts it holds.",
                writer.agent_id,
            ),
        ]
    )
    printer = Printer()
    with ok.Runtime.start() as rt:
        crew = {"agents": [researcher, writer], "orchestration": tasks, "crew_id": "notes", "observer": printer}
        ref = CrewActor.start(rt.hub, **crew)
        start_crew(ref)
        try:
            outcome = wait_finished(ref)  # the crew's outcome; its failure raised as CrewFailedError
        except CrewFailedError as failed:
            print(f"crew failed: {failed.failure}", file=sys.stderr)
            return 1
        finally:
            ref.stop()
    print(f"\n{outcome.result}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(" ".join(sys.argv[1:]) or "the Rhine"))
