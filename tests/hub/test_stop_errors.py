"""A runtime stop fails every pending wait and send with an exception of its own.

One shared exception object, re-raised by every waiter, gathers each raise's
traceback: at 10,000 waits it had 25,800 frames and stopping took seconds (issue 31).
"""

from __future__ import annotations

import asyncio
import threading
import traceback
from collections.abc import Callable

import orkeon_actors as ok
from orkeon_actors.errors import HubStoppedError
from orkeon_actors.testing import wait_until


def test_each_blocked_thread_and_pending_send_gets_its_own_stop_error() -> None:
    rt = ok.Runtime.start()
    rt.hub.register_mailbox("agent://r/a")
    errors: list[BaseException] = []
    lock = threading.Lock()

    def wait(call: Callable[[], object]) -> None:
        try:
            call()
        except HubStoppedError as error:
            with lock:
                errors.append(error)

    calls: list[Callable[[], object]] = [
        *(lambda i=i: rt.hub.bind("c", f"w{i}").wait_for(ok.WaitOnTopic(f"t.{i}"), ok.FOREVER) for i in range(4)),
        *(lambda i=i: rt.hub.bind("s", f"s{i}").send("agent://r/a", i, timeout=600) for i in range(3)),
    ]
    threads = [threading.Thread(target=wait, args=(call,)) for call in calls]
    for thread in threads:
        thread.start()
    wait_until(lambda: rt.hub.pending_waits()["on_topic"] == 4, what="four topic waits")
    wait_until(lambda: rt.hub.pending_waits()["on_reply"] == 3, what="three pending sends")
    rt.stop()
    for thread in threads:
        thread.join(10)
    assert len(errors) == 7
    assert len({id(error) for error in errors}) == 7, "waiters shared one exception object"
    for error in errors:
        assert len(traceback.extract_tb(error.__traceback__)) < 20


def test_each_awaiting_task_gets_its_own_stop_error_with_a_short_traceback() -> None:
    async def main() -> list[BaseException]:
        rt = await ok.aio.start()
        client = rt.bind("c", "a")
        tasks = [asyncio.create_task(client.wait_for(ok.WaitOnTopic(f"t.{i}"), ok.FOREVER)) for i in range(200)]
        while rt.hub.pending_waits()["on_topic"] < 200:
            await asyncio.sleep(0.001)
        await rt.stop()
        return list(await asyncio.gather(*tasks, return_exceptions=True))

    outcomes = asyncio.run(main())
    assert all(isinstance(outcome, HubStoppedError) for outcome in outcomes)
    assert len({id(outcome) for outcome in outcomes}) == 200, "tasks shared one exception object"
    longest = max(len(traceback.extract_tb(outcome.__traceback__)) for outcome in outcomes)
    assert longest < 20, f"a stop error's traceback has {longest} frames"
