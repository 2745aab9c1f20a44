"""A crew served as an A2A agent (docs/a2a.md), driven by the SDK's own client over
loopback HTTP: the card, send, stream, get, cancel, the input-required round trip, the
v0.3 method names, refusals by the crew's links and of calls without a token.

One server for the module: ``Runtime.start(store=..., a2a=A2AConfig(...))`` with the
test crew exposed (``serving.py``)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from a2a.client.client import Client
from a2a.types import CancelTaskRequest, GetTaskRequest, StreamResponse, Task, TaskState

import orkeon_actors as ok
from orkeon_actors.a2a.server import A2AConfig, A2AServer
from orkeon_actors.a2a.server.parts import input_problem
from orkeon_actors.crew.state import CrewStatus
from orkeon_actors.testing import wait_until
from tests.a2a.serving import CREW_YAML, TOKENS, client_for, final_task, request


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ok.Runtime, str]]:
    store = Path(tmp_path_factory.mktemp("a2a")) / "state.db"
    with ok.Runtime.start(store=store, a2a=A2AConfig(callers=TOKENS)) as rt:
        assert rt.a2a is not None
        url = rt.a2a.expose(ok.CrewBlueprint.from_yaml(CREW_YAML))
        yield rt, url


def _run(coro: Any) -> Any:
    return asyncio.run(coro)


async def _send(client: Client, text: str, **options: Any) -> Task:
    return await final_task(client.send_message(request(text, **options)))


def _answer(task: Task) -> str:
    return "".join(part.text for artifact in task.artifacts for part in artifact.parts)


def test_the_agent_card_names_the_crew_its_skills_its_url_and_the_bearer_scheme(served: tuple[ok.Runtime, str]) -> None:
    _, url = served
    headers = {"Authorization": f"Bearer {TOKENS['planner']}"}
    root = httpx.get(url.rsplit("/echo/", 1)[0] + "/.well-known/agent-card.json", headers=headers)
    card = httpx.get(url + ".well-known/agent-card.json", headers=headers)
    assert root.status_code == card.status_code == 200
    assert root.json() == card.json()
    body = card.json()
    assert body["name"] == "echo"
    assert body["description"] == "Echoes what it is told, or asks the caller's name first."
    assert body["supportedInterfaces"] == [{"url": url, "protocolBinding": "JSONRPC", "protocolVersion": "1.0"}]
    assert body["skills"] == [
        {
            "id": "echo",
            "name": "Echo",
            "description": "Says back what it is told",
            "tags": ["test"],
            "examples": ["hello"],
        }
    ]
    assert body["securitySchemes"] == {"bearer": {"httpAuthSecurityScheme": {"scheme": "Bearer", "description": ANY}}}
    assert body["securityRequirements"] == [{"schemes": {"bearer": {}}}]
    assert body["capabilities"] == {"streaming": True, "pushNotifications": True}
    assert body["version"] and body["defaultInputModes"] and body["defaultOutputModes"]


class _Any:
    def __eq__(self, other: object) -> bool:
        return True


ANY = _Any()


def test_a_message_starts_a_crew_run_whose_answer_is_the_artifact(served: tuple[ok.Runtime, str]) -> None:
    rt, url = served

    async def main() -> tuple[Task, Task]:
        client = await client_for(url, "planner")
        task = await _send(client, "hi")
        got = await client.get_task(GetTaskRequest(id=task.id))
        return task, got

    task, got = _run(main())
    assert task.status.state == TaskState.TASK_STATE_COMPLETED
    assert _answer(task) == "echo: hi"
    assert got.status.state == TaskState.TASK_STATE_COMPLETED and _answer(got) == "echo: hi"
    assert rt.a2a is not None
    outcome = rt.a2a.supervisor.outcome(f"a2a-{task.id}")
    assert outcome is not None and outcome.result == "echo: hi"


def test_streaming_reports_the_task_its_status_and_the_artifact_as_the_crew_works(
    served: tuple[ok.Runtime, str],
) -> None:
    _, url = served

    async def main() -> list[StreamResponse]:
        client = await client_for(url, "planner", streaming=True)
        return [event async for event in client.send_message(request("streamed"))]

    events = _run(main())
    kinds = [event.WhichOneof("payload") for event in events]
    assert kinds[0] == "task" and "artifact_update" in kinds and kinds[-1] == "status_update", kinds
    states = [e.status_update.status.state for e in events if e.HasField("status_update")]
    assert states[0] == TaskState.TASK_STATE_WORKING and states[-1] == TaskState.TASK_STATE_COMPLETED
    artifact = next(e.artifact_update.artifact for e in events if e.HasField("artifact_update"))
    assert [p.text for p in artifact.parts] == ["echo: streamed"]


@pytest.mark.parametrize("how", ["ask", "ask-send"])
def test_a_crew_asking_its_caller_puts_the_task_in_input_required_and_the_reply_answers_it(
    served: tuple[ok.Runtime, str], how: str
) -> None:
    _, url = served

    async def main() -> tuple[Task, Task]:
        client = await client_for(url, "planner")
        asked = await _send(client, how)
        done = await _send(client, "Ada", task_id=asked.id, context_id=asked.context_id)
        return asked, done

    asked, done = _run(main())
    assert asked.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
    assert [p.text for p in asked.status.message.parts] == ["your name?"]
    assert done.status.state == TaskState.TASK_STATE_COMPLETED and _answer(done) == "hello Ada"


def test_a_crew_waiting_on_its_caller_sleeps_in_the_store(served: tuple[ok.Runtime, str]) -> None:
    rt, url = served

    async def main() -> Task:
        return await _send(await client_for(url, "planner"), "ask")

    asked = _run(main())
    assert rt.a2a is not None
    supervisor = rt.a2a.supervisor
    assert supervisor.ref(f"a2a-{asked.id}") is None  # asleep: no actor
    assert supervisor.status(f"a2a-{asked.id}") is None


def test_cancel_stops_the_crew(served: tuple[ok.Runtime, str]) -> None:
    rt, url = served
    assert rt.a2a is not None
    supervisor = rt.a2a.supervisor

    async def start() -> Task:
        return await _send(await client_for(url, "planner"), "wait", immediately=True)

    task = _run(start())
    crew = f"a2a-{task.id}"
    wait_until(lambda: supervisor.status(crew) is CrewStatus.WAITING, what="the crew waiting for more mail")

    async def cancel() -> tuple[Task, Task]:
        client = await client_for(url, "planner")
        cancelled = await client.cancel_task(CancelTaskRequest(id=task.id))
        return cancelled, await client.get_task(GetTaskRequest(id=task.id))

    cancelled, got = _run(cancel())
    assert cancelled.status.state == got.status.state == TaskState.TASK_STATE_CANCELED
    wait_until(lambda: supervisor.outcome(crew) is not None, what="the cancelled crew's outcome")
    outcome = supervisor.outcome(crew)
    assert outcome is not None and outcome.failure is not None
    assert outcome.failure.error_type == "A2ATaskCanceled"


def test_a_caller_the_crews_links_do_not_name_is_rejected_and_starts_no_crew(served: tuple[ok.Runtime, str]) -> None:
    rt, url = served

    async def main() -> Task:
        return await _send(await client_for(url, "stranger"), "hi")

    task = _run(main())
    assert task.status.state == TaskState.TASK_STATE_REJECTED
    reason = task.status.message.parts[0].text
    assert "client:stranger" in reason and "echo" in reason
    assert rt.a2a is not None
    assert rt.a2a.supervisor.status(f"a2a-{task.id}") is None
    assert rt.a2a.supervisor.outcome(f"a2a-{task.id}") is None


def test_a_caller_sees_only_its_own_tasks(served: tuple[ok.Runtime, str]) -> None:
    _, url = served

    async def main() -> None:
        task = await _send(await client_for(url, "planner"), "mine")
        with pytest.raises(Exception, match="not found"):
            await (await client_for(url, "stranger")).get_task(GetTaskRequest(id=task.id))

    _run(main())


@pytest.mark.parametrize("authorization", [None, "Bearer not-a-token-of-this-server", f"Basic {TOKENS['planner']}"])
def test_calls_without_a_callers_token_are_refused(served: tuple[ok.Runtime, str], authorization: str | None) -> None:
    _, url = served
    headers = {} if authorization is None else {"Authorization": authorization}
    body = {"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": "x"}}
    posted = httpx.post(url, json=body, headers={**headers, "A2A-Version": "1.0"})
    card = httpx.get(url + ".well-known/agent-card.json", headers=headers)
    assert posted.status_code == card.status_code == 401
    assert posted.headers["www-authenticate"] == "Bearer"


def test_v0_3_clients_are_served_the_same_crew(served: tuple[ok.Runtime, str]) -> None:
    _, url = served
    headers = {"Authorization": f"Bearer {TOKENS['planner']}"}
    message = {"role": "user", "parts": [{"kind": "text", "text": "old"}], "messageId": "v03-1", "kind": "message"}
    sent = httpx.post(
        url,
        json={"jsonrpc": "2.0", "id": 1, "method": "message/send", "params": {"message": message}},
        headers=headers,
        timeout=30,
    ).json()
    assert sent["result"]["status"]["state"] == "completed", sent
    assert sent["result"]["artifacts"][0]["parts"][0]["text"] == "echo: old"
    got = httpx.post(
        url,
        json={"jsonrpc": "2.0", "id": 2, "method": "tasks/get", "params": {"id": sent["result"]["id"]}},
        headers=headers,
    ).json()
    assert got["result"]["status"]["state"] == "completed"


def test_input_that_does_not_match_the_declared_schema_is_named() -> None:
    schema = {"type": "object", "required": ["city"], "properties": {"city": {"type": "string"}}}
    assert input_problem({"city": "Oslo"}, schema) is None
    problem = input_problem({"town": "Oslo"}, schema)
    assert problem is not None and "'city' is a required property" in problem
    assert input_problem("any text", None) is None


@pytest.mark.parametrize(("host", "flag"), [("192.0.2.7", "--allow-remote"), ("0.0.0.0", "--allow-remote")])
def test_a_non_loopback_address_needs_the_explicit_flag(served: tuple[ok.Runtime, str], host: str, flag: str) -> None:
    rt, _ = served
    with pytest.raises(ok.errors.InvalidArgumentError, match=flag):
        A2AServer(rt, A2AConfig(host=host, callers=TOKENS))
    with pytest.raises(ok.errors.InvalidArgumentError, match="--allow-host"):
        A2AServer(rt, A2AConfig(host="0.0.0.0", allow_remote=True, callers=TOKENS))
