"""examples/openai_compatible_crew.py, run as a user would, against the local server."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from .fake_provider import FakeProvider, Received, Reply, Step, openai_script

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "openai_compatible_crew.py"

RESEARCHER = openai_script(
    Step(
        "",
        (
            (
                "publish_event",
                {
                    "topic": "notes.facts",
                    "payload": ["It is 1,230 km long.", "It rises in the Alps.", "It ends in the North Sea."],
                    "retain_as_last_value": True,
                    "last_value_key": "facts",
                },
            ),
        ),
    ),
    Step("published"),
)
WRITER = openai_script(
    Step("", (("get_last_value", {"key": "facts", "crew_scope": "_global"}),)),
    Step("The Rhine rises in the Alps. It runs 1,230 km to the North Sea."),
)


def _by_agent(received: Received) -> Reply:
    system = received.body["messages"][0]["content"]
    return (RESEARCHER if "researcher" in system else WRITER)(received)


def test_the_example_runs_a_crew_on_an_openai_compatible_server(provider: FakeProvider) -> None:
    provider.handler = _by_agent
    environment: dict[str, Any] = {
        **os.environ,
        "OPENAI_BASE_URL": f"{provider.url}/v1",
        "OPENAI_MODEL": "local-model",
        "OPENAI_API_KEY": "",
    }
    done = subprocess.run(
        [sys.executable, str(EXAMPLE), "the Rhine"], env=environment, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().endswith("It runs 1,230 km to the North Sea.")
    assert "[writer] tool_call: get_last_value" in done.stdout
    writer_last = [r for r in provider.requests if "writer" in r.body["messages"][0]["content"]][-1]
    tool_result = writer_last.body["messages"][-1]
    assert tool_result["role"] == "tool" and "It rises in the Alps." in tool_result["content"]
    first = provider.requests[0].body
    assert (
        first["model"] == "local-model"
        and first["max_tokens"] == 512
        and "the Rhine" in first["messages"][1]["content"]
    )
