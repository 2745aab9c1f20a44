"""``AnthropicModel``: the Messages API with ``tool_use`` / ``tool_result`` blocks, on
the official ``anthropic`` SDK (``pip install "orkeon-actors[anthropic]"``).

The conversation maps to the Messages API's shape:

* ``system`` entries -> the top-level ``system`` text (joined by a blank line);
* ``user`` -> a ``user`` message with a ``text`` block;
* ``assistant`` -> an ``assistant`` message: a ``text`` block (when there is text), then
  one ``tool_use`` block ``{"id", "name", "input"}`` per tool call, ids as the model
  produced them (an assistant turn with neither is left out: the API refuses empty
  content);
* ``tool`` -> a ``tool_result`` block ``{"tool_use_id", "content"}`` in a ``user``
  message (``is_error: true`` for a refused call's ``{"error": ...}`` result); the
  results of parallel tool calls share one ``user`` message, as the API requires.

Consecutive entries of one role are merged into one message, so the roles alternate.
A response's ``text`` blocks are joined into the turn's text (the API splits text
around citations), its ``tool_use`` blocks become tool calls in order.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from typing import Any

from orkeon_actors.crew.model import ChatMessage, ModelRequest, ModelResponse, ToolCall
from orkeon_actors.errors import ModelConfigError
from orkeon_actors.models.base import MalformedResponse, SdkModel
from orkeon_actors.models.pricing import Price, TokenCounts
from orkeon_actors.models.rate_limit import RateLimit
from orkeon_actors.models.retry import RetryPolicy
from orkeon_actors.tools.styles import render

__all__ = ["AnthropicModel"]

DEFAULT_MAX_TOKENS = 4096
"""The Messages API requires ``max_tokens``; this is sent when none is configured."""


class AnthropicModel(SdkModel):
    """An agent's model on the Anthropic Messages API.

    * ``api_key``: default ``ANTHROPIC_API_KEY`` (required).
    * ``base_url``: the API root (default Anthropic's; the SDK appends ``/v1/messages``).
    * ``max_tokens``: per call, default :data:`DEFAULT_MAX_TOKENS` (the API requires one).
    * ``temperature``, ``extra_body``: sent as given (``extra_body`` merged last).
    * ``client``: an ``anthropic.AsyncAnthropic`` to use (its retries are turned off).

    See :class:`~orkeon_actors.models.base.ProviderModel` for the rest. Raises
    ``ModelConfigError`` when the ``anthropic`` extra is not installed or no key is set.
    """

    provider = "anthropic"

    def __init__(
        self,
        model: str,
        *,
        api_key: str | None = None,
        base_url: str | None = None,
        max_tokens: int = DEFAULT_MAX_TOKENS,
        timeout: float = 60.0,
        retry: RetryPolicy | None = None,
        price: Price | Mapping[str, Any] | None = None,
        prices: Mapping[str, Price | Mapping[str, Any]] | None = None,
        temperature: float | None = None,
        extra_body: Mapping[str, Any] | None = None,
        require_usage: bool = True,
        client: Any = None,
        rate_limit: RateLimit | None = None,
    ) -> None:
        super().__init__(
            model,
            max_tokens=max_tokens,
            timeout=timeout,
            retry=retry,
            price=price,
            prices=prices,
            require_usage=require_usage,
            rate_limit=rate_limit,
        )
        try:
            import anthropic
        except ImportError as exc:
            raise ModelConfigError(
                'AnthropicModel needs the anthropic SDK: pip install "orkeon-actors[anthropic]"'
            ) from exc
        self.base_url = base_url
        self.temperature = temperature
        self.extra_body = dict(extra_body or {})
        key = api_key or os.environ.get("ANTHROPIC_API_KEY")
        if not key and client is None:
            raise ModelConfigError("AnthropicModel needs an API key: set ANTHROPIC_API_KEY or pass api_key")
        self.connect(anthropic, anthropic.AsyncAnthropic, client, _messages_of, api_key=key, base_url=base_url)

    # -- request -----------------------------------------------------------------------

    def wire_request(self, request: ModelRequest) -> dict[str, Any]:
        system = "\n\n".join(m.content for m in request.messages if m.role == "system" and m.content)
        body: dict[str, Any] = {
            "model": self.model,
            "max_tokens": self.max_tokens,
        }
        try:
            body["messages"] = _messages(request.messages)
        except ValueError as exc:
            raise self.error(str(exc)) from exc
        if system:
            body["system"] = system
        if request.tools:
            body["tools"] = [render(definition, "anthropic") for definition in request.tools]
        return self.finish_body(body)

    # -- response ----------------------------------------------------------------------

    def wire_response(self, body: Mapping[str, Any], request: ModelRequest) -> tuple[ModelResponse, TokenCounts | None]:
        if body.get("type") != "message" or body.get("role") != "assistant":
            raise MalformedResponse("the body is not a message of role assistant")
        blocks = body.get("content")
        if not isinstance(blocks, list):
            raise MalformedResponse("'content' is not a list of blocks")
        texts: list[str] = []
        calls: list[ToolCall] = []
        for index, block in enumerate(blocks):
            kind = block.get("type") if isinstance(block, Mapping) else None
            if kind == "text" and isinstance(block.get("text"), str):
                texts.append(block["text"])
            elif kind == "tool_use":
                call_id, name, arguments = block.get("id"), block.get("name"), block.get("input")
                if not (isinstance(call_id, str) and call_id and isinstance(name, str) and isinstance(arguments, dict)):
                    raise MalformedResponse(
                        f"content[{index}] (tool_use) needs a string id and name and an object input"
                    )
                calls.append(ToolCall(call_id, name, arguments))
            else:
                raise MalformedResponse(f"content[{index}] is a {kind!r} block, which this adapter does not handle")
        stop = body.get("stop_reason")
        if stop == "max_tokens" and calls:
            raise self.error(
                f"the answer was cut at max_tokens ({self.max_tokens}) inside a tool call; raise max_tokens"
            )
        if stop == "pause_turn":
            raise self.error(
                "the provider paused the turn (pause_turn, a server tool); this adapter runs no server tools"
            )
        answered = body.get("model")
        response = ModelResponse(
            text="".join(texts),
            tool_calls=tuple(calls),
            finish_reason=stop if isinstance(stop, str) else None,
            response_model=answered if isinstance(answered, str) else None,
        )
        return response, _tokens(body.get("usage"))


def _messages_of(client: Any) -> Any:
    return client.messages


def _messages(conversation: tuple[ChatMessage, ...]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for message in conversation:
        if message.role == "system":
            continue
        role, blocks = _blocks(message)
        if not blocks:
            continue
        if out and out[-1]["role"] == role:
            out[-1]["content"].extend(blocks)
        else:
            out.append({"role": role, "content": blocks})
    return out


def _blocks(message: ChatMessage) -> tuple[str, list[dict[str, Any]]]:
    if message.role == "tool":
        block: dict[str, Any] = {"type": "tool_result", "tool_use_id": message.tool_call_id, "content": message.content}
        if _is_error_result(message.content):
            block["is_error"] = True
        return "user", [block]
    blocks: list[dict[str, Any]] = []
    if message.content:
        blocks.append({"type": "text", "text": message.content})
    for call in message.tool_calls:
        arguments = call.parsed_arguments()
        if not isinstance(arguments, dict):
            raise ValueError(
                f"the conversation holds tool call {call.id} ({call.name}) whose arguments are not a JSON object; "
                "the Messages API takes only objects as tool_use input"
            )
        blocks.append({"type": "tool_use", "id": call.id, "name": call.name, "input": arguments})
    return message.role, blocks


def _is_error_result(content: str) -> bool:
    try:
        decoded = json.loads(content)
    except ValueError:
        return False
    return isinstance(decoded, dict) and set(decoded) == {"error"}


def _tokens(usage: Any) -> TokenCounts | None:
    if usage is None:
        return None
    if not isinstance(usage, Mapping):
        raise MalformedResponse("'usage' is not an object")
    counts = {}
    for key in ("input_tokens", "output_tokens", "cache_read_input_tokens", "cache_creation_input_tokens"):
        value = usage.get(key) or 0
        if not isinstance(value, int) or value < 0:
            raise MalformedResponse(f"usage.{key} is not a count")
        counts[key] = value
    if "input_tokens" not in usage or "output_tokens" not in usage:
        raise MalformedResponse("usage needs input_tokens and output_tokens")
    return TokenCounts(
        input=counts["input_tokens"],
        output=counts["output_tokens"],
        cache_read=counts["cache_read_input_tokens"],
        cache_write=counts["cache_creation_input_tokens"],
    )
