"""``OpenAIChatModel``: the Chat Completions API with tool calling, on the official
``openai`` SDK (``pip install "orkeon-actors[openai]"``).

``base_url`` points it at any OpenAI-compatible server (vLLM, llama.cpp, Ollama, LM
Studio...). The conversation maps to ``messages`` one to one:

* ``system`` / ``user`` -> ``{"role", "content"}``;
* ``assistant`` -> ``{"role": "assistant", "content": text or null, "tool_calls": [{"id",
  "type": "function", "function": {"name", "arguments"}}]}`` (the ids and argument text
  as the model produced them, so a woken crew sends the provider the same history);
* ``tool`` -> ``{"role": "tool", "tool_call_id", "content"}``.

Tools go out in the ``"openai"`` style, or ``"openai-strict"`` with ``strict=True``
(the arguments the model then sends are turned back into canonical ones before a tool
sees them). Responses come back as text plus any number of tool calls (parallel tool
calls are one turn, run in order).
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from typing import Any, Literal

from orkeon_actors.crew.model import ChatMessage, ModelRequest, ModelResponse, ToolCall
from orkeon_actors.errors import ModelConfigError
from orkeon_actors.models.base import MalformedResponse, SdkModel
from orkeon_actors.models.pricing import Price, TokenCounts
from orkeon_actors.models.rate_limit import RateLimit
from orkeon_actors.models.retry import RetryPolicy
from orkeon_actors.tools.styles import DefinitionStyle, canonical_arguments, render

__all__ = ["OpenAIChatModel"]

MaxTokensParameter = Literal["max_completion_tokens", "max_tokens"]


class OpenAIChatModel(SdkModel):
    """An agent's model on Chat Completions.

    * ``api_key``: default ``OPENAI_API_KEY``; with a ``base_url`` and no key at all
      (a local server that needs none), a placeholder key is sent.
    * ``base_url``: the API root, e.g. ``http://127.0.0.1:8000/v1`` (default OpenAI's).
    * ``max_tokens_parameter``: ``"max_completion_tokens"`` (OpenAI's current name) or
      ``"max_tokens"`` (older OpenAI-compatible servers).
    * ``strict``: send the tools in OpenAI strict mode.
    * ``parallel_tool_calls``: sent when not ``None``.
    * ``temperature``, ``extra_body``: sent as given (``extra_body`` merged last).
    * ``client``: an ``openai.AsyncOpenAI`` to use instead of building one (its retries are
      turned off; this adapter retries).

    See :class:`~orkeon_actors.models.base.ProviderModel` for the rest. Raises
    ``ModelConfigError`` when the ``openai`` extra is not installed or no key is set.
    """

    provider = "openai"

    def __init__(
        self,
        model: str,
        *,
        api_key: str | None = None,
        base_url: str | None = None,
        max_tokens: int | None = None,
        max_tokens_parameter: MaxTokensParameter = "max_completion_tokens",
        timeout: float = 60.0,
        retry: RetryPolicy | None = None,
        price: Price | Mapping[str, Any] | None = None,
        prices: Mapping[str, Price | Mapping[str, Any]] | None = None,
        strict: bool = False,
        parallel_tool_calls: bool | None = None,
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
        if max_tokens_parameter not in ("max_completion_tokens", "max_tokens"):
            raise ModelConfigError(
                f"max_tokens_parameter must be 'max_completion_tokens' or 'max_tokens', got {max_tokens_parameter!r}"
            )
        try:
            import openai
        except ImportError as exc:
            raise ModelConfigError('OpenAIChatModel needs the openai SDK: pip install "orkeon-actors[openai]"') from exc
        self.base_url = base_url
        self.max_tokens_parameter = max_tokens_parameter
        self.strict = strict
        self.parallel_tool_calls = parallel_tool_calls
        self.temperature = temperature
        self.extra_body = dict(extra_body or {})
        key = api_key or os.environ.get("OPENAI_API_KEY")
        if not key and client is None:
            if base_url is None:
                raise ModelConfigError(
                    "OpenAIChatModel needs an API key: set OPENAI_API_KEY or pass api_key (or a base_url for a "
                    "local server that needs none)"
                )
            key = "not-needed"
        self.connect(openai, openai.AsyncOpenAI, client, _chat_completions, api_key=key, base_url=base_url)

    # -- request -----------------------------------------------------------------------

    def wire_request(self, request: ModelRequest) -> dict[str, Any]:
        body: dict[str, Any] = {"model": self.model, "messages": [_message(m) for m in request.messages]}
        if request.tools:
            style: DefinitionStyle = "openai-strict" if self.strict else "openai"
            body["tools"] = [render(definition, style) for definition in request.tools]
            if self.parallel_tool_calls is not None:
                body["parallel_tool_calls"] = self.parallel_tool_calls
        if self.max_tokens is not None:
            body[self.max_tokens_parameter] = self.max_tokens
        return self.finish_body(body)

    # -- response ----------------------------------------------------------------------

    def wire_response(self, body: Mapping[str, Any], request: ModelRequest) -> tuple[ModelResponse, TokenCounts | None]:
        choices = body.get("choices")
        if not isinstance(choices, list) or not choices or not isinstance(choices[0], Mapping):
            raise MalformedResponse("'choices' is not a non-empty list of objects")
        choice = choices[0]
        message = choice.get("message")
        if not isinstance(message, Mapping):
            raise MalformedResponse("choices[0].message is not an object")
        finish = choice.get("finish_reason")
        content = message.get("content")
        if content is None:
            content = message.get("refusal") or ""
        if not isinstance(content, str):
            raise MalformedResponse("choices[0].message.content is not a string")
        raw_calls = message.get("tool_calls") or []
        if not isinstance(raw_calls, list):
            raise MalformedResponse("choices[0].message.tool_calls is not a list")
        if finish == "length" and raw_calls:
            raise self.error(
                f"the answer was cut at max_tokens ({self.max_tokens}) inside a tool call; raise max_tokens"
            )
        if finish == "content_filter":
            raise self.error("the provider's content filter stopped the answer (finish_reason content_filter)")
        schemas = {str(d.get("name")): d.get("input_schema") for d in request.tools}
        calls = tuple(self._tool_call(c, i, request.turn, schemas) for i, c in enumerate(raw_calls))
        answered = body.get("model")
        response = ModelResponse(
            text=content,
            tool_calls=calls,
            finish_reason=finish if isinstance(finish, str) else None,
            response_model=answered if isinstance(answered, str) else None,
        )
        return response, _tokens(body.get("usage"))

    def _tool_call(self, raw: Any, index: int, turn: int, schemas: Mapping[str, Any]) -> ToolCall:
        if not isinstance(raw, Mapping) or not isinstance(raw.get("function"), Mapping):
            raise MalformedResponse(f"tool_calls[{index}] is not a function call")
        if raw.get("type", "function") != "function":
            raise MalformedResponse(f"tool_calls[{index}] has type {raw.get('type')!r}; only 'function' is supported")
        function = raw["function"]
        name, arguments = function.get("name"), function.get("arguments")
        if not isinstance(name, str) or not isinstance(arguments, str | None):
            raise MalformedResponse(f"tool_calls[{index}].function needs a string name and string arguments")
        call_id = raw.get("id") or f"call_{turn}_{index}"  # some compatible servers send none
        text = arguments or "{}"
        try:
            parsed = json.loads(text)
        except ValueError:
            # Not JSON: hand the tool the raw text as a JSON string, which it refuses with
            # a validation error the model reads (an agent's tool call is untrusted input).
            return ToolCall(str(call_id), name, json.dumps(text))
        schema = schemas.get(name)
        if self.strict and isinstance(schema, Mapping):
            return ToolCall(str(call_id), name, json.dumps(canonical_arguments(schema, parsed), sort_keys=True))
        return ToolCall(str(call_id), name, text)


def _chat_completions(client: Any) -> Any:
    return client.chat.completions


def _message(message: ChatMessage) -> dict[str, Any]:
    if message.role == "tool":
        return {"role": "tool", "tool_call_id": message.tool_call_id, "content": message.content}
    if message.role == "assistant" and message.tool_calls:
        return {
            "role": "assistant",
            "content": message.content or None,
            "tool_calls": [
                {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
                for c in message.tool_calls
            ],
        }
    return {"role": message.role, "content": message.content}


def _tokens(usage: Any) -> TokenCounts | None:
    if usage is None:
        return None
    if not isinstance(usage, Mapping):
        raise MalformedResponse("'usage' is not an object")
    prompt, completion = usage.get("prompt_tokens"), usage.get("completion_tokens")
    if not isinstance(prompt, int) or not isinstance(completion, int):
        raise MalformedResponse("usage.prompt_tokens and usage.completion_tokens must be integers")
    details = usage.get("prompt_tokens_details") or {}
    cached = (details.get("cached_tokens") or 0) if isinstance(details, Mapping) else 0
    if not isinstance(cached, int) or not 0 <= cached <= prompt:
        raise MalformedResponse("usage.prompt_tokens_details.cached_tokens is not a count within prompt_tokens")
    return TokenCounts(input=prompt - cached, output=completion, cache_read=cached)
