"""A task survives the serving process: ``orkeon a2a`` (a real child process) is
SIGKILLed while its crew waits on the caller (``input-required``), started again on the
same store, and answers ``tasks/get`` with the task's state; the caller's reply then
wakes the crew, which finishes the task."""

from __future__ import annotations

import asyncio
import os
import re
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from a2a.types import GetTaskRequest, Task, TaskState

from orkeon_actors.testing import wait_until
from tests.a2a.serving import CREW_YAML, TOKENS, client_for, final_task, request

ROOT = Path(__file__).resolve().parents[2]


class _Server:
    """One ``orkeon a2a`` child; :attr:`url` once it printed where it serves."""

    def __init__(self, store: Path, crew: Path) -> None:
        env = {**os.environ, "ORKEON_A2A_TOKEN": TOKENS["planner"], "PYTHONPATH": str(ROOT)}
        self.process = subprocess.Popen(
            [sys.executable, "-m", "tests.a2a.serve_child", str(store), str(crew)],
            cwd=ROOT,
            env=env,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.lines: list[str] = []
        assert self.process.stderr is not None
        for line in self.process.stderr:
            self.lines.append(line)
            found = re.search(r"crew echo at (\S+) ", line)
            if found:
                self.url = found.group(1)
                break
        else:
            raise AssertionError("orkeon a2a did not start:\n" + "".join(self.lines))

    def kill(self) -> None:
        self.process.send_signal(signal.SIGKILL)
        self.process.wait(timeout=10)

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.kill()


@pytest.fixture
def crew_file(tmp_path: Path) -> Iterator[Path]:
    path = tmp_path / "echo.yaml"
    path.write_text(CREW_YAML)
    yield path


def test_a_task_waiting_on_its_caller_survives_a_sigkill_of_the_server(tmp_path: Path, crew_file: Path) -> None:
    store = tmp_path / "state.db"
    first = _Server(store, crew_file)
    try:

        async def ask() -> Task:
            return await final_task((await client_for(first.url, "planner")).send_message(request("ask")))

        asked = asyncio.run(ask())
        assert asked.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
    finally:
        first.kill()
    second = _Server(store, crew_file)
    try:

        async def resume() -> tuple[Task, Task]:
            client = await client_for(second.url, "planner")
            got = await client.get_task(GetTaskRequest(id=asked.id))
            answer = request("Grace", task_id=asked.id, context_id=asked.context_id)
            return got, await final_task(client.send_message(answer))

        got, done = asyncio.run(resume())
        assert got.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
        assert [p.text for p in got.status.message.parts] == ["your name?"]
        assert done.status.state == TaskState.TASK_STATE_COMPLETED
        assert [p.text for a in done.artifacts for p in a.parts] == ["hello Grace"]
    finally:
        second.stop()
    wait_until(lambda: second.process.poll() is not None, what="orkeon a2a stopped by SIGTERM")
    assert second.process.returncode == 0, "".join(second.lines)
