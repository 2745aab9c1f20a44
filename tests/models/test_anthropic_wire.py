"""AnthropicModel on the official SDK against a local Messages API server."""

from __future__ import annotations

import json
from typing import Any

import pytest

from orkeon_actors.crew.model import ChatMessage, ModelRequest, ToolCall
from orkeon_actors.errors import ModelConfigError, ModelError
from orkeon_actors.models import AnthropicModel, RetryPolicy

from .fake_provider import Awaited, FakeProvider, Reply, Sleeps

GET_WEATHER = {
    "name": "get_weather",
    "description": "Get the current weather in a given location",
    "input_schema": {
        "type": "object",
        "properties": {
            "location": {"type": "string", "description": "The city and state, e.g. San Francisco, CA"},
            "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
        },
        "required": ["location"],
    },
}

# The tool-use response of Anthropic's "Tool use" guide.
TOOL_USE_RESPONSE: dict[str, Any] = {
    "id": "msg_01Aq9w938a90dw8q",
    "type": "message",
    "role": "assistant",
    "model": "claude-sonnet-5-5",
    "stop_reason": "tool_use",
    "stop_sequence": None,
    "content": [
        {"type": "text", "text": "I'll check the current weather in San Francisco for you."},
        {
            "type": "tool_use",
            "id": "toolu_01A09q90qw90lq917835lq9",
            "name": "get_weather",
            "input": {"location": "San Francisco, CA", "unit": "celsius"},
        },
    ],
    "usage": {"input_tokens": 384, "output_tokens": 76, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0},
}

TEXT_RESPONSE: dict[str, Any] = {
    "id": "msg_013Zva2CMHLNnXjNJJKqJ2EF",
    "type": "message",
    "role": "assistant",
    "model": "claude-sonnet-5-5",
    "content": [{"type": "text", "text": "Hi! My name is Claude."}],
    "stop_reason": "end_turn",
    "stop_sequence": None,
    "usage": {
        "input_tokens": 2095,
        "output_tokens": 503,
        "cache_read_input_tokens": 1000,
        "cache_creation_input_tokens": 100,
    },
}


def _model(provider: FakeProvider, sleeps: Sleeps | None = None, **options: Any) -> Any:
    retry = RetryPolicy(sleep=sleeps or Sleeps(), max_retries=options.pop("max_retries", 3))
    return Awaited(
        AnthropicModel("claude-sonnet-5-5", api_key="sk-ant-test", base_url=provider.url, retry=retry, **options)
    )


def _request(*messages: ChatMessage) -> ModelRequest:
    conversation = messages or (ChatMessage("system", "Be brief."), ChatMessage("user", "Weather in SF?"))
    return ModelRequest("c1", "a", "", "Be brief.", conversation, (GET_WEATHER,), 0)


def test_the_request_is_the_documented_body_field_by_field(provider: FakeProvider) -> None:
    provider.replies = [Reply(body=TEXT_RESPONSE)]
    conversation = (
        ChatMessage("system", "Be brief."),
        ChatMessage("user", "Weather in SF and NYC?"),
        ChatMessage(
            "assistant",
            "Checking both.",
            (
                ToolCall("toolu_1", "get_weather", {"location": "SF"}),
                ToolCall("toolu_2", "get_weather", {"location": "NYC"}),
            ),
        ),
        ChatMessage("tool", '{"temp": 15}', tool_call_id="toolu_1", name="get_weather"),
        ChatMessage("tool", '{"error": {"type": "X", "message": "no", "field": null}}', tool_call_id="toolu_2"),
        ChatMessage("assistant", "", ()),  # an empty turn: left out
        ChatMessage("user", "And tomorrow?"),
    )
    _model(provider, max_tokens=1024, temperature=0.5).complete(_request(*conversation))
    [sent] = provider.requests
    assert sent.path == "/v1/messages"
    # the key as x-api-key (the Messages API reference) or as a bearer token (newer SDKs)
    assert "sk-ant-test" in (
        sent.headers.get("x-api-key"),
        sent.headers.get("authorization", "").removeprefix("Bearer "),
    )
    assert sent.headers["anthropic-version"]
    assert sent.headers["x-stainless-retry-count"] == "0"  # the SDK does not retry: the adapter does
    assert sent.body == {
        "model": "claude-sonnet-5-5",
        "max_tokens": 1024,
        "system": "Be brief.",
        "messages": [
            {"role": "user", "content": [{"type": "text", "text": "Weather in SF and NYC?"}]},
            {
                "role": "assistant",
                "content": [
                    {"type": "text", "text": "Checking both."},
                    {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {"location": "SF"}},
                    {"type": "tool_use", "id": "toolu_2", "name": "get_weather", "input": {"location": "NYC"}},
                ],
            },
            {
                "role": "user",
                "content": [  # parallel results in one user message, then the next prompt
                    {"type": "tool_result", "tool_use_id": "toolu_1", "content": '{"temp": 15}'},
                    {
                        "type": "tool_result",
                        "tool_use_id": "toolu_2",
                        "content": '{"error": {"type": "X", "message": "no", "field": null}}',
                        "is_error": True,
                    },
                    {"type": "text", "text": "And tomorrow?"},
                ],
            },
        ],
        "tools": [GET_WEATHER],
        "temperature": 0.5,
    }


def test_text_and_tool_use_blocks_in_one_turn(provider: FakeProvider) -> None:
    provider.replies = [Reply(body=TOOL_USE_RESPONSE)]
    response = _model(provider, price={"input": 3.0, "output": 15.0}).complete(_request())
    assert response.text == "I'll check the current weather in San Francisco for you."
    assert response.tool_calls == (
        ToolCall("toolu_01A09q90qw90lq917835lq9", "get_weather", {"location": "San Francisco, CA", "unit": "celsius"}),
    )
    assert (response.usage.input_tokens, response.usage.output_tokens) == (384, 76)
    assert response.usage.cost == pytest.approx((384 * 3 + 76 * 15) / 1e6)


def test_parallel_tool_use_and_cache_tokens(provider: FakeProvider) -> None:
    body = json.loads(json.dumps(TOOL_USE_RESPONSE))
    body["content"].append({"type": "tool_use", "id": "toolu_02", "name": "get_weather", "input": {"location": "NYC"}})
    body["usage"] = TEXT_RESPONSE["usage"]
    provider.replies = [Reply(body=body)]
    price = {"input": 3.0, "output": 15.0, "cache_read": 0.3, "cache_write": 3.75}
    response = _model(provider, price=price).complete(_request())
    assert [c.id for c in response.tool_calls] == ["toolu_01A09q90qw90lq917835lq9", "toolu_02"]
    assert response.usage.input_tokens == 2095 + 1000 + 100
    assert response.usage.cost == pytest.approx((2095 * 3 + 503 * 15 + 1000 * 0.3 + 100 * 3.75) / 1e6)


def test_overloaded_and_rate_limited_are_retried_honouring_retry_after(provider: FakeProvider, sleeps: Sleeps) -> None:
    overloaded = {
        "type": "error",
        "error": {"type": "overloaded_error", "message": "Overloaded"},
        "request_id": "req_1",
    }
    limited = {
        "type": "error",
        "error": {"type": "rate_limit_error", "message": "Number of request tokens has exceeded"},
    }
    provider.replies = [Reply(529, overloaded), Reply(429, limited, {"retry-after": "7"}), Reply(body=TEXT_RESPONSE)]
    assert _model(provider, sleeps).complete(_request()).text == "Hi! My name is Claude."
    assert len(sleeps.delays) == 2 and sleeps.delays[1] == 7.0


def test_an_invalid_request_is_not_retried(provider: FakeProvider, sleeps: Sleeps) -> None:
    invalid = {"type": "error", "error": {"type": "invalid_request_error", "message": "max_tokens: Field required"}}
    provider.replies = [Reply(400, invalid)]
    with pytest.raises(ModelError, match="HTTP 400 invalid_request_error: max_tokens: Field required") as caught:
        _model(provider, sleeps).complete(_request())
    assert caught.value.provider == "anthropic" and caught.value.attempts == 1 and sleeps.delays == []


def test_rate_limits_exhausted(provider: FakeProvider, sleeps: Sleeps) -> None:
    limited = {"type": "error", "error": {"type": "rate_limit_error", "message": "slow down"}}
    provider.replies = [Reply(429, limited, {"retry-after": "1"})] * 2
    with pytest.raises(ModelError, match=r"gave up after 2 attempts.*slow the crew down"):
        _model(provider, sleeps, max_retries=1).complete(_request())
    assert sleeps.delays == [1.0]


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ("upstream connect error", "not the anthropic wire format"),
        ({"type": "message", "role": "assistant", "content": "hi"}, "'content' is not a list"),
        ({**TEXT_RESPONSE, "content": [{"type": "thinking", "thinking": "..."}]}, "'thinking' block"),
        ({**TEXT_RESPONSE, "content": [{"type": "tool_use", "id": "t", "name": "x", "input": "{}"}]}, "object input"),
        ({**TEXT_RESPONSE, "usage": {"output_tokens": 3}}, "needs input_tokens"),
        ({**TEXT_RESPONSE, "type": "completion"}, "not a message"),
    ],
)
def test_malformed_bodies(provider: FakeProvider, body: Any, expected: str) -> None:
    provider.replies = [Reply(200, body)]
    with pytest.raises(ModelError, match=expected):
        _model(provider).complete(_request())


def test_a_tool_use_cut_at_max_tokens(provider: FakeProvider) -> None:
    provider.replies = [Reply(body={**TOOL_USE_RESPONSE, "stop_reason": "max_tokens"})]
    with pytest.raises(ModelError, match=r"cut at max_tokens \(4096\)"):
        _model(provider).complete(_request())


def test_a_key_is_required(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    with pytest.raises(ModelConfigError, match="ANTHROPIC_API_KEY"):
        AnthropicModel("claude-sonnet-5-5")
