"""OpenAIChatModel on the official SDK against a local Chat Completions server."""

from __future__ import annotations

import json
from typing import Any

import pytest

from orkeon_actors.crew.model import ChatMessage, ModelRequest, ToolCall
from orkeon_actors.errors import ModelConfigError, ModelError
from orkeon_actors.models import OpenAIChatModel, Price, RetryPolicy
from orkeon_actors.tools import tool_definitions

from .fake_provider import Awaited, FakeProvider, Reply, Sleeps

WEATHER = {
    "name": "get_current_weather",
    "description": "Get the current weather in a given location",
    "input_schema": {
        "type": "object",
        "properties": {"location": {"type": "string"}, "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}},
        "required": ["location"],
    },
}

# The "function calling" response of the Chat Completions API reference.
TOOL_CALL_RESPONSE: dict[str, Any] = {
    "id": "chatcmpl-abc123",
    "object": "chat.completion",
    "created": 1699896916,
    "model": "gpt-4o-mini",
    "choices": [
        {
            "index": 0,
            "message": {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "call_abc123",
                        "type": "function",
                        "function": {"name": "get_current_weather", "arguments": '{\n"location": "Boston, MA"\n}'},
                    }
                ],
            },
            "logprobs": None,
            "finish_reason": "tool_calls",
        }
    ],
    "usage": {"prompt_tokens": 82, "completion_tokens": 17, "total_tokens": 99},
}

TEXT_RESPONSE: dict[str, Any] = {
    "id": "chatcmpl-123",
    "object": "chat.completion",
    "created": 1677652288,
    "model": "gpt-4o-mini",
    "system_fingerprint": "fp_44709d6fcb",
    "choices": [
        {
            "index": 0,
            "message": {"role": "assistant", "content": "\n\nHello there, how may I assist you today?"},
            "logprobs": None,
            "finish_reason": "stop",
        }
    ],
    "usage": {
        "prompt_tokens": 9,
        "completion_tokens": 12,
        "total_tokens": 21,
        "prompt_tokens_details": {"cached_tokens": 4},
    },
}


def _model(provider: FakeProvider, sleeps: Sleeps | None = None, **options: Any) -> Any:
    retry = RetryPolicy(sleep=sleeps or Sleeps(), max_retries=options.pop("max_retries", 3))
    return Awaited(
        OpenAIChatModel("gpt-4o-mini", api_key="sk-test", base_url=f"{provider.url}/v1", retry=retry, **options)
    )


def _request(*messages: ChatMessage, tools: tuple[dict[str, Any], ...] = (WEATHER,), turn: int = 0) -> ModelRequest:
    conversation = messages or (ChatMessage("system", "Be brief."), ChatMessage("user", "Weather in Boston?"))
    return ModelRequest("c1", "a", "", "Be brief.", conversation, tools, turn)


def test_the_request_is_the_documented_body_field_by_field(provider: FakeProvider) -> None:
    provider.replies = [Reply(body=TEXT_RESPONSE)]
    conversation = (
        ChatMessage("system", "Be brief."),
        ChatMessage("user", "Weather in Boston and Paris?"),
        ChatMessage(
            "assistant",
            "Looking both up.",
            (
                ToolCall("call_1", "get_current_weather", '{"location": "Boston"}'),
                ToolCall("call_2", "get_current_weather", '{"location":"Paris"}'),
            ),
        ),
        ChatMessage("tool", '{"temp": 3}', tool_call_id="call_1", name="get_current_weather"),
        ChatMessage("tool", '{"temp": 9}', tool_call_id="call_2", name="get_current_weather"),
    )
    _model(provider, max_tokens=256, parallel_tool_calls=True, temperature=0.0).complete(_request(*conversation))
    [sent] = provider.requests
    assert sent.path == "/v1/chat/completions"
    assert sent.headers["authorization"] == "Bearer sk-test"
    assert sent.headers["content-type"] == "application/json"
    assert sent.body == {
        "model": "gpt-4o-mini",
        "messages": [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "Weather in Boston and Paris?"},
            {
                "role": "assistant",
                "content": "Looking both up.",
                "tool_calls": [
                    {
                        "id": "call_1",
                        "type": "function",
                        "function": {"name": "get_current_weather", "arguments": '{"location": "Boston"}'},
                    },
                    {
                        "id": "call_2",
                        "type": "function",
                        "function": {"name": "get_current_weather", "arguments": '{"location":"Paris"}'},
                    },
                ],
            },
            {"role": "tool", "tool_call_id": "call_1", "content": '{"temp": 3}'},
            {"role": "tool", "tool_call_id": "call_2", "content": '{"temp": 9}'},
        ],
        "tools": [
            {
                "type": "function",
                "function": {
                    "name": WEATHER["name"],
                    "description": WEATHER["description"],
                    "parameters": WEATHER["input_schema"],
                },
            }
        ],
        "parallel_tool_calls": True,
        "max_completion_tokens": 256,
        "temperature": 0.0,
    }


def test_a_tool_call_response_keeps_its_id_and_argument_text(provider: FakeProvider) -> None:
    provider.replies = [Reply(body=TOOL_CALL_RESPONSE)]
    response = _model(provider, price={"input": 0.15, "output": 0.6}).complete(_request())
    assert response.text == ""
    assert response.tool_calls == (ToolCall("call_abc123", "get_current_weather", '{\n"location": "Boston, MA"\n}'),)
    assert (response.usage.input_tokens, response.usage.output_tokens) == (82, 17)
    assert response.usage.cost == pytest.approx((82 * 0.15 + 17 * 0.6) / 1e6)


def test_text_plus_parallel_tool_calls_in_one_turn(provider: FakeProvider) -> None:
    body = json.loads(json.dumps(TOOL_CALL_RESPONSE))
    message = body["choices"][0]["message"]
    message["content"] = "Checking two cities."
    message["tool_calls"].append(
        {
            "id": "call_def456",
            "type": "function",
            "function": {"name": "get_current_weather", "arguments": '{"location": "Paris"}'},
        }
    )
    provider.replies = [Reply(body=body)]
    response = _model(provider).complete(_request())
    assert response.text == "Checking two cities."
    assert [c.id for c in response.tool_calls] == ["call_abc123", "call_def456"]


def test_cached_prompt_tokens_are_priced_as_cache_reads(provider: FakeProvider) -> None:
    provider.replies = [Reply(body=TEXT_RESPONSE)]
    model = _model(provider, prices={"gpt-4o-mini": {"input": 1.0, "output": 2.0, "cache_read": 0.5}})
    response = model.complete(_request())
    assert response.text == "\n\nHello there, how may I assist you today?"
    assert response.usage.input_tokens == 9
    assert response.usage.cost == pytest.approx((5 * 1.0 + 4 * 0.5 + 12 * 2.0) / 1e6)


def test_strict_mode_sends_strict_tools_and_gives_canonical_arguments(provider: FakeProvider) -> None:
    body = json.loads(json.dumps(TOOL_CALL_RESPONSE))
    strict_args = {"topic": "orders.new", "payload": '{"id": 7}', "target_crew_id": None, "metadata": None,
                   "retain_as_last_value": None, "last_value_key": None}  # fmt: skip
    body["choices"][0]["message"]["tool_calls"][0]["function"] = {
        "name": "publish_event",
        "arguments": json.dumps(strict_args),
    }
    provider.replies = [Reply(body=body)]
    hub_tools = tuple(tool_definitions("anthropic"))
    response = _model(provider, strict=True).complete(_request(tools=hub_tools))
    sent = provider.requests[0].body["tools"]
    assert sent == tool_definitions("openai-strict")
    assert response.tool_calls[0].parsed_arguments() == {"topic": "orders.new", "payload": {"id": 7}}


def test_arguments_that_are_not_json_reach_the_tool_as_a_string(provider: FakeProvider) -> None:
    body = json.loads(json.dumps(TOOL_CALL_RESPONSE))
    body["choices"][0]["message"]["tool_calls"][0]["function"]["arguments"] = "{location: Boston"
    provider.replies = [Reply(body=body)]
    [call] = _model(provider).complete(_request()).tool_calls
    assert call.parsed_arguments() == "{location: Boston"


def test_429_honours_retry_after_then_succeeds(provider: FakeProvider, sleeps: Sleeps) -> None:
    limited = {
        "error": {"message": "Rate limit reached", "type": "requests", "param": None, "code": "rate_limit_exceeded"}
    }
    provider.replies = [
        Reply(429, limited, {"retry-after": "2"}),
        Reply(429, limited, {"retry-after-ms": "250"}),
        Reply(body=TEXT_RESPONSE),
    ]
    response = _model(provider, sleeps).complete(_request())
    assert response.text.endswith("assist you today?")
    assert sleeps.delays == [2.0, 0.25]
    assert len(provider.requests) == 3
    assert provider.requests[0].body == provider.requests[2].body  # the same request again


@pytest.mark.parametrize("status", [408, 409, 500, 502, 503])
def test_transient_statuses_back_off_and_retry(provider: FakeProvider, sleeps: Sleeps, status: int) -> None:
    provider.replies = [
        Reply(status, {"error": {"message": "busy", "type": "server_error"}}),
        Reply(body=TEXT_RESPONSE),
    ]
    _model(provider, sleeps).complete(_request())
    assert len(sleeps.delays) == 1 and 0.375 <= sleeps.delays[0] <= 0.5  # 0.5 s less up to 25 % jitter


def test_retries_exhausted_raise_a_model_error_with_the_reason(provider: FakeProvider, sleeps: Sleeps) -> None:
    provider.replies = [Reply(503, {"error": {"message": "overloaded", "type": "server_error"}})] * 3
    with pytest.raises(ModelError) as caught:
        _model(provider, sleeps, max_retries=2).complete(_request())
    error = caught.value
    assert (error.status, error.attempts, error.retryable, error.provider) == (503, 3, True, "openai")
    assert "HTTP 503 server_error: overloaded" in str(error) and "gave up after 3 attempts" in str(error)
    assert len(sleeps.delays) == 2 and sleeps.delays[1] > sleeps.delays[0] * 1.4  # doubling, less jitter


@pytest.mark.parametrize("status", [400, 401, 403, 404, 422])
def test_other_4xx_are_not_retried(provider: FakeProvider, sleeps: Sleeps, status: int) -> None:
    provider.replies = [Reply(status, {"error": {"message": "Invalid 'messages'", "type": "invalid_request_error"}})]
    with pytest.raises(
        ModelError, match=f"HTTP {status} invalid_request_error: Invalid 'messages'.*not retried"
    ) as caught:
        _model(provider, sleeps).complete(_request())
    assert caught.value.attempts == 1 and not caught.value.retryable
    assert sleeps.delays == [] and len(provider.requests) == 1


def test_a_retry_after_beyond_the_limit_fails_at_once(provider: FakeProvider, sleeps: Sleeps) -> None:
    provider.replies = [
        Reply(429, {"error": {"message": "quota", "type": "insufficient_quota"}}, {"retry-after": "3600"})
    ]
    with pytest.raises(ModelError, match="asks to wait 3600 s, more than max_retry_after"):
        _model(provider, sleeps).complete(_request())
    assert sleeps.delays == []


@pytest.mark.parametrize(
    ("reply", "expected"),
    [
        (Reply(200, "<html>Welcome to nginx</html>"), "not the openai wire format"),
        (Reply(200, {"object": "chat.completion"}), "'choices' is not a non-empty list"),
        (Reply(200, {"choices": [{"message": {"content": 7}}]}), "content is not a string"),
        (Reply(200, [1, 2]), "JSON list, not an object"),
        (Reply(200, {**TEXT_RESPONSE, "usage": None}), "reports no token usage"),
        (Reply(200, {**TEXT_RESPONSE, "usage": {"prompt_tokens": "9"}}), "must be integers"),
    ],
)
def test_malformed_bodies_raise_a_model_error(provider: FakeProvider, reply: Reply, expected: str) -> None:
    provider.replies = [reply]
    with pytest.raises(ModelError, match=expected):
        _model(provider).complete(_request())
    assert len(provider.requests) == 1  # not retried


def test_no_usage_is_accepted_when_asked(provider: FakeProvider) -> None:
    provider.replies = [Reply(200, {**TEXT_RESPONSE, "usage": None})]
    assert _model(provider, require_usage=False).complete(_request()).usage.total_tokens == 0


def test_a_cut_tool_call_and_a_refused_connection(provider: FakeProvider, sleeps: Sleeps) -> None:
    body = json.loads(json.dumps(TOOL_CALL_RESPONSE))
    body["choices"][0]["finish_reason"] = "length"
    provider.replies = [Reply(body=body)]
    with pytest.raises(ModelError, match="cut at max_tokens"):
        _model(provider).complete(_request())
    url = provider.url
    provider.close()
    model = Awaited(OpenAIChatModel("m", base_url=f"{url}/v1", retry=RetryPolicy(max_retries=1, sleep=sleeps)))
    with pytest.raises(ModelError, match="cannot reach the server") as caught:
        model.complete(_request())
    assert caught.value.status is None and caught.value.attempts == 2


def test_configuration_errors(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with pytest.raises(ModelConfigError, match="set OPENAI_API_KEY"):
        OpenAIChatModel("gpt-4o-mini")
    with pytest.raises(ModelConfigError, match="price table has no entry"):
        OpenAIChatModel("gpt-x", base_url="http://127.0.0.1:9/v1", prices={"gpt-4o": {"input": 1, "output": 1}})
    with pytest.raises(ModelConfigError, match="timeout"):
        OpenAIChatModel("gpt-x", base_url="http://127.0.0.1:9/v1", timeout=0)
    with pytest.raises(ModelConfigError, match="max_tokens"):
        OpenAIChatModel("gpt-x", base_url="http://127.0.0.1:9/v1", max_tokens=0)
    with pytest.raises(ModelConfigError, match="finite number >= 0"):
        Price(input=-1, output=1)
