"""The asyncio facade: waits awaited without threads, cancellation, timeouts, budgets,
send/reply, subscriptions, and awaiting a crew's outcome."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TypeVar

import pytest

import orkeon_actors as ok
from orkeon_actors.crew import Agent, CrewStatus, ScriptedModel, call, respond
from orkeon_actors.errors import (
    BudgetExhaustedError,
    CancelledError,
    CrewFailedError,
    CrewNotFoundError,
    CrewWaitTimeoutError,
    HubStoppedError,
    InvalidArgumentError,
    MailboxNotFoundError,
    SendTimeoutError,
)
from orkeon_actors.lifecycle import CrewBlueprint, LifecycleState
from orkeon_actors.orchestration import Sequential, Task

T = TypeVar("T")


def run(main: Callable[[], Awaitable[T]]) -> T:
    async def wrapped() -> T:
        return await main()

    return asyncio.run(wrapped())


async def eventually(predicate: Callable[[], object], what: str, timeout: float = 10.0) -> None:
    """Await ``predicate()`` holding, re-checked every millisecond, for at most ``timeout``."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        await asyncio.sleep(0.001)


def test_ten_thousand_concurrent_awaited_waits_add_no_thread() -> None:
    async def main() -> None:
        async with ok.aio.start() as rt:
            client = rt.bind("c", "a")
            await client.publish("warm.up")  # start whatever the first publish starts
            before = set(threading.enumerate())
            tasks = [
                asyncio.create_task(client.wait_for(ok.WaitOnTopic(f"jobs.{i % 100}"), 600)) for i in range(10_000)
            ]
            await eventually(lambda: rt.hub.pending_waits()["on_topic"] == 10_000, "10,000 registered waits")
            assert set(threading.enumerate()) == before
            publisher = rt.bind("p", "a")
            sent = {i: await publisher.publish(f"jobs.{i}", i) for i in range(100)}
            got = await asyncio.gather(*tasks)
            assert all(m.id == sent[i % 100].id for i, m in enumerate(got))
            assert rt.hub.pending_waits()["on_topic"] == 0
            assert set(threading.enumerate()) == before

    run(main)


def test_cancelling_the_task_fires_the_token_the_hub_sees_and_loses_no_message() -> None:
    async def main() -> None:
        async with ok.aio.start() as rt:
            reg = rt.hub.register_mailbox("agent://c/a")
            client = rt.bind("c", "a")
            task = asyncio.create_task(client.wait_for(ok.WaitOnMailbox("agent://c/a"), ok.FOREVER))
            await eventually(lambda: rt.hub.pending_waits()["on_mailbox"] == 1, "the mailbox wait")
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            assert rt.hub.pending_waits()["on_mailbox"] == 0  # withdrawn by the hub, not just abandoned
            posted = await rt.bind("p", "x").post("agent://c/a", "kept")
            got = await client.wait_for(ok.WaitOnMailbox("agent://c/a"), 5)
            assert got.id == posted.id
            reg.close()

    run(main)


def test_a_cancel_token_raises_its_error_and_one_already_fired_raises_at_once() -> None:
    async def main() -> None:
        async with ok.aio.start() as rt:
            client = rt.bind("c", "a")
            token = ok.CancelToken()
            task = asyncio.create_task(client.wait_for(ok.WaitOnTopic("t"), ok.FOREVER, cancel=token))
            await eventually(lambda: rt.hub.pending_waits()["on_topic"] == 1, "the topic wait")
            token.cancel()
            with pytest.raises(CancelledError):
                await task
            with pytest.raises(CancelledError):
                await client.wait_for(ok.WaitOnTopic("t"), 5, cancel=token)
            assert rt.hub.pending_waits()["on_topic"] == 0

    run(main)


def test_cancelling_one_wait_does_not_fire_the_callers_budget() -> None:
    async def main() -> None:
        async with ok.aio.start() as rt:
            budget = ok.Budget(max_tokens=100)
            client = rt.bind("c", "a")
            task = asyncio.create_task(client.wait_for(ok.WaitOnTopic("t"), ok.FOREVER, cancel=budget.token))
            await eventually(lambda: rt.hub.pending_waits()["on_topic"] == 1, "the topic wait")
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            assert not budget.token.cancelled

    run(main)


def test_a_finite_timeout_returns_the_wait_timed_out_message() -> None:
    async def main() -> None:
        clock = ok.VirtualClock()
        async with ok.aio.start(clock=clock) as rt:
            client = rt.bind("c", "a")
            task = asyncio.create_task(client.wait_for(ok.WaitOnTopic("orders.*"), 30))
            await eventually(lambda: rt.hub.pending_waits()["on_topic"] == 1, "the topic wait")
            clock.advance(31)
            got = await task
            assert got.is_timeout
            assert got.topic == ok.WAIT_TIMED_OUT_TOPIC
            assert got.metadata["original_topic"] == "orders.*"

    run(main)


def test_budget_exhaustion_raises_budget_exhausted_not_a_timeout() -> None:
    async def main() -> None:
        clock = ok.VirtualClock()
        async with ok.aio.start(clock=clock) as rt:
            client = rt.bind("c", "a")
            by_tokens = ok.Budget(max_tokens=10, clock=clock)
            task = asyncio.create_task(client.wait_for(ok.WaitOnTopic("t"), ok.FOREVER, cancel=by_tokens.token))
            await eventually(lambda: rt.hub.pending_waits()["on_topic"] == 1, "the topic wait")
            by_tokens.consume(tokens=11)
            with pytest.raises(BudgetExhaustedError) as raised:
                await task
            assert not isinstance(raised.value, TimeoutError)

            by_time = ok.Budget(max_wall_time=5, clock=clock)
            task = asyncio.create_task(client.wait_for(ok.WaitOnTopic("t"), ok.FOREVER, cancel=by_time.token))
            await eventually(lambda: rt.hub.pending_waits()["on_topic"] == 1, "the topic wait")
            clock.advance(6)  # the budget's wall-time deadline fires on the hub's scheduler
            with pytest.raises(BudgetExhaustedError, match="wall-time"):
                await task

    run(main)


def test_typed_errors_are_raised_as_in_the_blocking_api() -> None:
    async def main() -> None:
        async with ok.aio.start() as rt:
            client = rt.bind("c", "a")
            with pytest.raises(MailboxNotFoundError):
                await client.wait_for(ok.WaitOnMailbox("agent://c/nobody"), 5)
            with pytest.raises(MailboxNotFoundError):
                await client.post("agent://c/nobody", 1)
            with pytest.raises(InvalidArgumentError):
                await client.send("agent://c/a", 1, ok.FOREVER)
            with pytest.raises(InvalidArgumentError):
                await client.wait_for("not a descriptor", 5)  # type: ignore[arg-type]

    run(main)


def test_send_is_answered_by_a_reply_and_times_out_with_a_typed_error() -> None:
    async def main() -> None:
        clock = ok.VirtualClock()
        async with ok.aio.start(clock=clock) as rt:
            reg = rt.hub.register_mailbox("agent://s/server")
            server = rt.bind("s", "server")
            client = rt.bind("c", "a")

            async def serve_one() -> None:
                request = await server.wait_for(ok.WaitOnMailbox("agent://s/server"), ok.FOREVER)
                assert request.correlation_id is not None
                await server.reply(request.correlation_id, {"echo": request.json()})

            serving = asyncio.create_task(serve_one())
            reply = await client.send("agent://s/server", {"n": 1}, timeout=30)
            await serving
            assert reply.json() == {"echo": {"n": 1}}

            unanswered = asyncio.create_task(client.send("agent://s/server", {"n": 2}, timeout=30))
            await eventually(lambda: rt.hub.pending_waits()["on_reply"] == 1, "the reply wait")
            clock.advance(31)
            with pytest.raises(SendTimeoutError):
                await unanswered
            reg.close()

    run(main)


def test_subscribe_iterates_in_order_and_ends_on_close_and_on_its_token() -> None:
    async def main() -> None:
        async with ok.aio.start() as rt:
            client = rt.bind("c", "a")
            publisher = rt.bind("p", "a")
            subscription = client.subscribe("orders.#")
            for i in range(5):
                await publisher.publish("orders.created", i)
            seen: list[object] = []
            async for message in subscription:
                seen.append(message.json())
                if len(seen) == 5:
                    subscription.close()
            assert seen == [0, 1, 2, 3, 4]

            token = ok.CancelToken()
            cancelled = client.subscribe("t", cancel=token)

            async def consume() -> list[object]:
                return [m.json() async for m in cancelled]

            consuming = asyncio.create_task(consume())
            await eventually(lambda: rt.hub.pending_waits()["on_topic"] == 1, "the subscription's wait")
            await publisher.publish("t", "one")
            await eventually(lambda: rt.hub.pending_waits()["on_topic"] == 1, "the next wait")
            token.cancel()
            assert await consuming == ["one"]

    run(main)


def test_cancelling_a_subscription_reader_keeps_the_next_message_buffered() -> None:
    async def main() -> None:
        async with ok.aio.start() as rt:
            async with rt.bind("c", "a").subscribe("t") as subscription:
                reader = asyncio.create_task(subscription.__anext__())
                await eventually(lambda: rt.hub.pending_waits()["on_topic"] == 1, "the subscription's wait")
                reader.cancel()
                with pytest.raises(asyncio.CancelledError):
                    await reader
                sent = await rt.bind("p", "a").publish("t", 1)
                got = await subscription.receive(5)
                assert got.id == sent.id
            assert subscription.subscription.closed

    run(main)


def test_stopping_the_runtime_fails_pending_waits_with_hub_stopped() -> None:
    async def main() -> None:
        rt = await ok.aio.start()
        task = asyncio.create_task(rt.bind("c", "a").wait_for(ok.WaitOnTopic("t"), ok.FOREVER))
        await eventually(lambda: rt.hub.pending_waits()["on_topic"] == 1, "the topic wait")
        await rt.stop()
        with pytest.raises(HubStoppedError):
            await task

    run(main)


def test_the_durable_hub_through_the_facade(tmp_path: Path) -> None:
    async def main() -> None:
        async with ok.aio.start(store=str(tmp_path / "state.db")) as rt:
            reg = rt.hub.register_mailbox("agent://c/a")
            client = rt.bind("c", "a")
            waiting = asyncio.create_task(client.wait_for(ok.WaitOnMailbox("agent://c/a"), 10))
            await eventually(lambda: rt.hub.pending_waits()["on_mailbox"] == 1, "the mailbox wait")
            posted = await rt.bind("p", "x").post("agent://c/a", {"durable": True})
            assert (await waiting).id == posted.id
            await client.publish("k", 7, ok.PublishOptions(retain_as_last_value=True, last_value_key="k"))
            last = await client.get_last_value("k")
            assert last is not None and last.json() == 7
            reg.close()

    run(main)


def _waiting_crew(crew_id: ok.CrewId) -> CrewBlueprint:
    agent = Agent("a", ScriptedModel([call("receive_message", {"wait_forever": True}), respond("done")]))
    return CrewBlueprint(agents=[agent], orchestration=Sequential([Task("go", agent.agent_id)]))


def test_wait_finished_awaits_a_crews_outcome(tmp_path: Path) -> None:
    async def main() -> None:
        async with ok.aio.start(store=str(tmp_path / "life.db")) as rt:
            sup = await rt.start_supervisor(factories={"waiter": _waiting_crew})
            crew = await sup.spawn("waiter")
            with pytest.raises(CrewWaitTimeoutError):
                await sup.wait_finished(crew, timeout=0.05)
            finishing = asyncio.create_task(sup.wait_finished(crew, timeout=30))
            await eventually(lambda: sup.supervisor.status(crew) is CrewStatus.WAITING, "the crew waiting")
            assert await sup.sleep(crew) is True  # the awaited outcome survives a sleep and a wake
            assert await sup.state(crew) is LifecycleState.ASLEEP
            await rt.bind("p", "x").post(f"agent://{crew}/a", "go on")  # wakes it
            outcome = await finishing
            assert outcome.status is CrewStatus.COMPLETED and outcome.result == "done"
            again = await sup.wait_finished(crew, timeout=5)  # already finished: at once
            assert again.status is CrewStatus.COMPLETED

    run(main)


def _failing_crew(crew_id: ok.CrewId) -> CrewBlueprint:
    agent = Agent("a", ScriptedModel([]))  # nothing to say: the crew fails
    return CrewBlueprint(agents=[agent], orchestration=Sequential([Task("go", agent.agent_id)]))


def test_wait_finished_raises_a_failure_and_an_unknown_crew_as_the_blocking_call_does(tmp_path: Path) -> None:
    async def main() -> None:
        async with ok.aio.start(store=str(tmp_path / "life.db")) as rt:
            sup = await rt.start_supervisor(factories={"failing": _failing_crew})
            crew = await sup.spawn("failing")
            with pytest.raises(CrewFailedError) as caught:
                await sup.wait_finished(crew, timeout=30)
            assert caught.value.crew_id == str(crew) and caught.value.outcome.status is CrewStatus.FAILED
            with pytest.raises(CrewNotFoundError):
                await sup.wait_finished("nobody", timeout=30)
            with pytest.raises(InvalidArgumentError):
                await sup.wait_finished(crew, timeout=0)

    run(main)


def test_cancelling_wait_finished_withdraws_its_callback(tmp_path: Path) -> None:
    async def main() -> None:
        async with ok.aio.start(store=str(tmp_path / "life.db")) as rt:
            sup = await rt.start_supervisor(factories={"waiter": _waiting_crew})
            crew = await sup.spawn("waiter")
            task = asyncio.create_task(sup.wait_finished(crew))
            await asyncio.sleep(0)  # let it register
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task

            def watching() -> int:
                return len(sup.supervisor.outcome_book._watchers.get(ok.CrewId(crew), []))

            await eventually(lambda: watching() == 0, "the watcher withdrawn")

    run(main)
