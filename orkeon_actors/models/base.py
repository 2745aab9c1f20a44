"""What every provider adapter shares: the call with retries, usage and cost, errors.

An adapter subclasses :class:`ProviderModel` and supplies four things: the request body
for a :class:`~orkeon_actors.crew.model.ModelRequest` (:meth:`~ProviderModel.wire_request`),
sending it through its SDK (:meth:`~ProviderModel.send`, returning the raw JSON text),
reading the SDK's exceptions (:meth:`~ProviderModel.failure`), and reading the response
body (:meth:`~ProviderModel.wire_response`). ``complete`` then guarantees:

* a failure the SDK reports is retried by the :class:`~orkeon_actors.models.retry.RetryPolicy`
  when it is transient, and otherwise raised as :class:`~orkeon_actors.errors.ModelError`
  (the crew then fails with that message as its reason);
* a body that is not the documented wire format raises ``ModelError`` (not retried);
* the usage of the call, in tokens and in cost (from the configured price), is in the
  returned ``ModelResponse``, which the crew charges to the agent's budget.

``complete`` is a coroutine function: the crew runs it on the runtime's I/O loop
(``docs/crews.md``) while its agent is parked, so neither the call nor a backoff holds a
thread; cancelling the call (its crew stopped, cancelled or out of budget) aborts the
HTTP request. The SDKs' async clients (``AsyncOpenAI``, ``AsyncAnthropic``) make the
calls, one client per event loop (an SDK client's connections belong to the loop that
opened them).
"""

from __future__ import annotations

import abc
import asyncio
import functools
import inspect
import json
import math
import weakref
from collections.abc import Callable, Mapping
from typing import Any, ClassVar

import attrs
from loguru import logger

from orkeon_actors.crew.model import ModelRequest, ModelResponse, Usage
from orkeon_actors.errors import ModelConfigError, ModelError
from orkeon_actors.models.pricing import Price, TokenCounts, resolve_price
from orkeon_actors.models.rate_limit import RateLimit, shared_limit
from orkeon_actors.models.retry import RetryPolicy, is_retryable_status, parse_retry_after

__all__ = [
    "Failure",
    "MalformedResponse",
    "ProviderModel",
    "SdkModel",
    "provider_message",
    "sdk_failure",
    "split_parameters",
]


@attrs.frozen
class Failure:
    """One failed attempt as the adapter reads it from the SDK's exception."""

    reason: str
    status: int | None = None
    retry_after: float | None = None

    @property
    def retryable(self) -> bool:
        return self.status is None or is_retryable_status(self.status)


class MalformedResponse(ValueError):
    """Raised by ``wire_response`` for a body that is not the documented format."""


def _positive_int(name: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ModelConfigError(f"{name} must be a positive int, got {value!r}")
    return value


class ProviderModel(abc.ABC):
    """A :class:`~orkeon_actors.crew.model.Model` backed by a provider's HTTP API.

    * ``model``: the provider's model name.
    * ``max_tokens``: the output limit of each call (``None``: the provider's default,
      where it has one).
    * ``timeout``: seconds per HTTP attempt (connect, read and write).
    * ``retry``: the :class:`RetryPolicy` (default: 3 retries, 0.5 s doubling to 8 s).
    * ``price`` / ``prices``: see :mod:`orkeon_actors.models.pricing`.
    * ``require_usage``: a response without token counts is an error (the budget could
      not count it); turn off for a server that never reports usage.
    * ``rate_limit``: the :class:`~orkeon_actors.models.rate_limit.RateLimit` each attempt
      waits for (default: the one shared by every model of this provider and
      ``base_url``, which only holds calls back for a 429's ``Retry-After``).
    """

    provider: ClassVar[str]

    def __init__(
        self,
        model: str,
        *,
        max_tokens: int | None,
        timeout: float,
        retry: RetryPolicy | None,
        price: Price | Mapping[str, Any] | None,
        prices: Mapping[str, Price | Mapping[str, Any]] | None,
        require_usage: bool,
        rate_limit: RateLimit | None = None,
    ) -> None:
        if not isinstance(model, str) or not model:
            raise ModelConfigError(f"{self.provider}: model must be a non-empty model name, got {model!r}")
        if isinstance(timeout, bool) or not isinstance(timeout, int | float) or not (0 < timeout < math.inf):
            raise ModelConfigError(f"{self.provider}: timeout must be a positive number of seconds, got {timeout!r}")
        self.model = model
        self.max_tokens = None if max_tokens is None else _positive_int("max_tokens", max_tokens)
        self.timeout = float(timeout)
        self.retry = retry or RetryPolicy()
        self.price = resolve_price(model, price, prices)
        self.require_usage = require_usage
        self._rate_limit = rate_limit

    @property
    def rate_limit(self) -> RateLimit:
        """The limit this model's calls wait for."""
        if self._rate_limit is None:
            self._rate_limit = shared_limit(self.provider, getattr(self, "base_url", None))
        return self._rate_limit

    def __repr__(self) -> str:
        return f"{type(self).__name__}(model={self.model!r})"

    # -- what a provider supplies ------------------------------------------------------

    @abc.abstractmethod
    def wire_request(self, request: ModelRequest) -> dict[str, Any]:
        """The JSON request body for ``request`` (a pure function of it)."""

    @abc.abstractmethod
    async def send(self, body: Mapping[str, Any]) -> str:
        """Send ``body`` through the SDK (no retries) and return the response text."""

    @abc.abstractmethod
    def failure(self, exc: Exception) -> Failure | None:
        """``exc`` read as a failed attempt, or ``None`` if it is not the SDK's."""

    @abc.abstractmethod
    def wire_response(self, body: Mapping[str, Any], request: ModelRequest) -> tuple[ModelResponse, TokenCounts | None]:
        """The response body as a ``ModelResponse`` (usage still empty) and its token
        counts (``None`` when the body has none). Raises :class:`MalformedResponse`."""

    # -- the call ------------------------------------------------------------------------

    async def complete(self, request: ModelRequest) -> ModelResponse:
        body = self.wire_request(request)
        estimated = len(json.dumps(body, default=str)) // 4 + (self.max_tokens or 0)
        text, attempts = await self._send_with_retries(body, estimated)
        try:
            decoded = json.loads(text)
            if not isinstance(decoded, dict):
                raise MalformedResponse(f"the body is a JSON {type(decoded).__name__}, not an object")
            response, tokens = self.wire_response(decoded, request)
        except (ValueError, KeyError, TypeError) as exc:
            raise self.error(
                f"the response is not the {self.provider} wire format ({exc}); check base_url points at a "
                f"{self.provider}-compatible API: {_excerpt(text)}",
                attempts=attempts,
            ) from exc
        if tokens is None:
            if self.require_usage:
                raise self.error(
                    "the response reports no token usage, so the agent's budget cannot count it; "
                    "pass require_usage=False for a server that never reports usage",
                    attempts=attempts,
                )
            tokens = TokenCounts()
        self.rate_limit.settle(estimated, tokens.total_input + tokens.output)
        cost = 0.0 if self.price is None else self.price.cost(tokens)
        return attrs.evolve(response, usage=Usage(tokens.total_input, tokens.output, cost))

    def error(
        self, reason: str, *, status: int | None = None, attempts: int = 1, retryable: bool = False
    ) -> ModelError:
        return ModelError(
            f"{self.provider} model {self.model!r}: {reason}",
            provider=self.provider,
            model=self.model,
            status=status,
            attempts=attempts,
            retryable=retryable,
        )

    async def _send_with_retries(self, body: Mapping[str, Any], estimated: int) -> tuple[str, int]:
        policy = self.retry
        limit = self.rate_limit
        attempt = 0
        paused_for_hold = False
        while True:
            attempt += 1
            await limit.acquire(estimated, hold=not paused_for_hold)
            try:
                return await self.send(body), attempt
            except Exception as exc:
                failure = self.failure(exc)
                if failure is None:
                    raise
                paused_for_hold = failure.status == 429 and failure.retry_after is not None
                if paused_for_hold:  # every call to this provider waits, not only this one (it pauses below)
                    limit.hold(failure.retry_after or 0.0)
                delay = self._retry_delay(failure, attempt, exc)
            logger.warning(
                "{} model {!r}: {}; retry {}/{} in {:.2f} s",
                self.provider,
                self.model,
                failure.reason,
                attempt,
                policy.max_retries,
                delay,
            )
            paused = policy.sleep(delay)
            if inspect.isawaitable(paused):
                await paused

    def _retry_delay(self, failure: Failure, attempt: int, exc: Exception) -> float:
        """The pause before the next attempt, or the ``ModelError`` ending the call."""
        policy = self.retry
        status = failure.status
        if not failure.retryable:
            raise self.error(
                f"{failure.reason} (HTTP {status}, not retried: the request was refused; fix the request, the key "
                "or the configuration)",
                status=status,
                attempts=attempt,
            ) from exc
        if failure.retry_after is not None and failure.retry_after > policy.max_retry_after:
            raise self.error(
                f"{failure.reason}; the server asks to wait {failure.retry_after:g} s, more than max_retry_after "
                f"({policy.max_retry_after:g} s): try later, or raise max_retry_after",
                status=status,
                attempts=attempt,
                retryable=True,
            ) from exc
        if attempt > policy.max_retries:
            raise self.error(
                f"{failure.reason}; gave up after {attempt} attempts (max_retries={policy.max_retries}): "
                + (
                    "slow the crew down or raise max_retries" if status == 429 else "the provider is failing; try later"
                ),
                status=status,
                attempts=attempt,
                retryable=True,
            ) from exc
        return failure.retry_after if failure.retry_after is not None else policy.backoff(attempt - 1)


class SdkModel(ProviderModel):
    """A :class:`ProviderModel` on an SDK generated by Stainless (``openai``,
    ``anthropic``): the same exception classes, raw-response API and client options.
    A subclass sets :attr:`sdk` (the SDK module) and how to reach the object whose
    ``create`` makes the call (e.g. ``client.chat.completions``) in its ``__init__``,
    through :meth:`connect`; :attr:`resource` is that object on the running loop's
    client."""

    sdk: Any
    temperature: float | None = None
    extra_body: dict[str, Any]

    def connect(self, sdk: Any, client_class: Any, client: Any, resource: Callable[[Any], Any], **options: Any) -> None:
        """Use the SDK's async ``client_class``, with its own retries off: ``client``
        itself (it must be one), or a new ``client_class(**options)`` per event loop.
        ``resource(client)`` is the object whose ``create`` makes the call."""
        self.sdk = sdk
        self._resource_of = resource
        self._clients: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, Any] = weakref.WeakKeyDictionary()
        self._shared: Any = None
        if client is not None:
            if not isinstance(client, client_class):
                raise ModelConfigError(
                    f"{self.provider}: client must be an {sdk.__name__}.{client_class.__name__} (the adapter calls "
                    f"the SDK's async client), got {type(client).__name__}"
                )
            self._shared = client.with_options(timeout=self.timeout, max_retries=0)
        self._make: Callable[[], Any] = lambda: client_class(timeout=self.timeout, max_retries=0, **options)

    @property
    def resource(self) -> Any:
        """The object whose ``create`` makes the call, on the running loop's client."""
        client = self._shared
        if client is None:
            loop = asyncio.get_running_loop()
            client = self._clients.get(loop)
            if client is None:
                client = self._clients[loop] = self._make()
        return self._resource_of(client)

    def finish_body(self, body: dict[str, Any]) -> dict[str, Any]:
        """``body`` with ``temperature`` (when set) and ``extra_body`` (last) added."""
        if self.temperature is not None:
            body["temperature"] = self.temperature
        body.update(self.extra_body)
        return body

    async def send(self, body: Mapping[str, Any]) -> str:
        resource = self.resource
        known, extra = split_parameters(resource.create, body)
        raw = await resource.with_raw_response.create(**known, extra_body=extra)
        text: str = raw.http_response.text
        return text

    def failure(self, exc: Exception) -> Failure | None:
        return sdk_failure(
            exc,
            status_error=self.sdk.APIStatusError,
            timeout_error=self.sdk.APITimeoutError,
            connection_error=self.sdk.APIConnectionError,
            timeout=self.timeout,
        )


def _excerpt(text: str, limit: int = 200) -> str:
    text = text.strip()
    return repr(text if len(text) <= limit else text[:limit] + "...")


def sdk_failure(
    exc: Exception,
    *,
    status_error: type[Exception],
    timeout_error: type[Exception],
    connection_error: type[Exception],
    timeout: float,
) -> Failure | None:
    """Read an exception of the OpenAI or Anthropic SDK (both generated by Stainless,
    with the same exception shapes) as a :class:`Failure`; ``None`` for anything else."""
    if isinstance(exc, status_error):
        status: int = getattr(exc, "status_code")  # noqa: B009 - typed per SDK, read generically
        response = getattr(exc, "response")  # noqa: B009
        detail = provider_message(getattr(exc, "body", None))
        return Failure(f"HTTP {status} {detail}", status, parse_retry_after(response.headers))
    if isinstance(exc, timeout_error):
        return Failure(f"no response within the {timeout:g} s timeout")
    if isinstance(exc, connection_error):
        cause = exc.__cause__ or exc
        return Failure(f"cannot reach the server ({type(cause).__name__}: {cause})")
    return None


def split_parameters(create: Any, body: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """``body`` split into the keyword arguments the SDK's ``create`` names and the rest,
    which the SDK sends through its ``extra_body`` (SDK releases add and drop named
    parameters; the JSON on the wire is the same either way)."""
    named = _named_parameters(create)
    known = {k: v for k, v in body.items() if k in named}
    extra = {k: v for k, v in body.items() if k not in named}
    return known, extra or None


@functools.cache
def _named_parameters(create: Any) -> frozenset[str]:
    signature = inspect.signature(create)
    return frozenset(name for name in signature.parameters if not name.startswith("extra_"))


def provider_message(body: object) -> str:
    """The error type and message of a provider's error body: OpenAI's
    ``{"error": {"message", "type", ...}}`` and Anthropic's ``{"type": "error", "error":
    {"type", "message"}}`` (the SDKs may have unwrapped ``error`` already)."""
    if isinstance(body, Mapping):
        inner = body.get("error", body)
        if isinstance(inner, Mapping):
            kind, message = inner.get("type"), inner.get("message")
            if message:
                return f"{kind}: {message}" if kind else str(message)
        return _excerpt(json.dumps(body, default=str))
    if body is None:
        return "(no body)"
    return _excerpt(str(body))
