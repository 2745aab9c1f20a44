"""Provider rate limits: requests and tokens per minute queue calls (never drop them), and
a 429's Retry-After holds back every call through the same limit."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from orkeon_actors.crew.model import ChatMessage, ModelRequest
from orkeon_actors.errors import ModelConfigError
from orkeon_actors.models import OpenAIChatModel, RateLimit, RetryPolicy

from .fake_provider import FakeProvider, Reply, Sleeps

OK: dict[str, Any] = {
    "id": "x",
    "object": "chat.completion",
    "model": "m",
    "choices": [{"index": 0, "message": {"role": "assistant", "content": "hi"}, "finish_reason": "stop"}],
    "usage": {"prompt_tokens": 5, "completion_tokens": 1, "total_tokens": 6},
}
REQUEST = ModelRequest("c", "a", "", "", (ChatMessage("user", "hi"),))


def test_requests_per_minute_queue_the_calls_beyond_the_burst() -> None:
    limit = RateLimit(requests_per_minute=240)  # a burst of 240, then one every 0.25 s

    async def main() -> None:
        await asyncio.gather(*(limit.acquire() for _ in range(242)))

    asyncio.run(main())
    assert limit.waits >= 2  # the 241st and 242nd waited for the bucket; all went


def test_tokens_per_minute_count_what_the_provider_reported() -> None:
    limit = RateLimit(tokens_per_minute=100)

    async def main() -> None:
        await limit.acquire(80)
        limit.settle(80, 10)  # the call used 10: 90 are back
        await limit.acquire(80)

    asyncio.run(main())
    assert limit.waits == 0


def test_a_retry_after_holds_back_every_call_through_the_limit(provider: FakeProvider) -> None:
    limited = {"error": {"message": "Rate limit reached", "type": "requests"}}
    provider.replies = [Reply(429, limited, {"retry-after": "0.3"}), Reply(body=OK), Reply(body=OK)]
    limit = RateLimit()
    sleeps = Sleeps()

    def model() -> OpenAIChatModel:
        return OpenAIChatModel(
            "m", base_url=f"{provider.url}/v1", rate_limit=limit, retry=RetryPolicy(max_retries=2, sleep=sleeps)
        )

    first, second = model(), model()

    async def main() -> None:
        one = asyncio.create_task(first.complete(REQUEST))
        while not sleeps.delays:  # the first call got its 429 and is pausing
            await asyncio.sleep(0.001)
        waited_before = limit.waits
        await second.complete(REQUEST)
        assert limit.waits > waited_before  # the second call was held back by the first one's 429
        await one

    asyncio.run(main())
    assert sleeps.delays == [0.3] and len(provider.requests) == 3


def test_a_bad_rate_is_a_config_error() -> None:
    with pytest.raises(ModelConfigError, match="requests_per_minute"):
        RateLimit(requests_per_minute=0)
