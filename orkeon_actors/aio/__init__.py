"""The asyncio facade: the same runtime, awaited without holding a thread.

::

    import orkeon_actors as ok

    async with ok.aio.start() as rt:
        client = rt.bind("billing", "scorer")
        message = await client.wait_for(ok.WaitOnTopic("orders.*"), timeout=30)
        async for event in client.subscribe("orders.#"):
            ...

See ``docs/asyncio.md``: what holds no thread, cancellation, timeouts and errors.
"""

from orkeon_actors.aio.awaiting import await_receive, await_wait, receive_future, wait_future
from orkeon_actors.aio.client import AsyncHubClient, AsyncSubscription
from orkeon_actors.aio.runtime import AsyncCrewSupervisor, AsyncRuntime, start

__all__ = [
    "AsyncCrewSupervisor",
    "AsyncHubClient",
    "AsyncRuntime",
    "AsyncSubscription",
    "await_receive",
    "await_wait",
    "receive_future",
    "start",
    "wait_future",
]
