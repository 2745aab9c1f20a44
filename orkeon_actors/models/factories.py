"""Build an adapter from a model reference in crew configuration.

A crew file names a model as a mapping, ``{provider: openai, model: gpt-4o-mini,
base_url: ..., max_tokens: 512, ...}``. The providers are entry points of the group
:data:`ENTRY_POINT_GROUP` (``orkeon_actors.models``). This package registers
``openai`` -> :data:`OPENAI` and ``anthropic`` -> :data:`ANTHROPIC`, each a
:class:`ProviderFactory`: ``create(options, context)`` builds the model from the
reference's options (with or without its ``provider`` key; ``context``, who the model is
for, is not needed by these two), ``check(options)`` lists what is wrong with them
without building anything (for a validator), and calling it with the reference is
``create``. :func:`openai_model` and :func:`anthropic_model` are the same in Python.

Settings (all optional but ``model``): ``base_url``, ``api_key_env`` (the name of the
environment variable holding the key; keys do not belong in crew files), ``max_tokens``,
``timeout``, ``temperature``, ``retry`` (``max_retries``, ``initial_backoff``,
``max_backoff``, ``max_retry_after``), ``price`` (``input``, ``output``, ``cache_read``,
``cache_write`` per million tokens) or ``prices`` (a table of them by model name),
``require_usage``, ``extra_body``; for ``openai`` also ``max_tokens_parameter``,
``strict`` and ``parallel_tool_calls``. An unknown setting, a missing ``model`` or an
unset ``api_key_env`` variable raises :class:`~orkeon_actors.errors.ModelConfigError`.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from typing import Any, Final

from orkeon_actors.crew.model import AnyModel
from orkeon_actors.errors import ModelConfigError
from orkeon_actors.models.anthropic_messages import AnthropicModel
from orkeon_actors.models.openai_chat import OpenAIChatModel
from orkeon_actors.models.pricing import Price, resolve_price
from orkeon_actors.models.retry import RetryPolicy

__all__ = ["ANTHROPIC", "ENTRY_POINT_GROUP", "OPENAI", "ProviderFactory", "anthropic_model", "openai_model"]

ENTRY_POINT_GROUP: Final = "orkeon_actors.models"

_COMMON: Final = frozenset(
    {
        "provider", "model", "base_url", "api_key_env", "max_tokens", "timeout", "temperature", "retry",
        "price", "prices", "require_usage", "extra_body",
    }
)  # fmt: skip
_OPENAI_ONLY: Final = frozenset({"max_tokens_parameter", "strict", "parallel_tool_calls"})


class ProviderFactory:
    """A provider of the ``orkeon_actors.models`` entry-point group (see the module
    docstring). Raises :class:`~orkeon_actors.errors.ModelConfigError` for a bad
    reference."""

    def __init__(self, provider: str, build: Callable[..., AnyModel], known: frozenset[str]) -> None:
        self.provider = provider
        self._build = build
        self._known = known

    def __repr__(self) -> str:
        return f"ProviderFactory({self.provider!r})"

    def create(self, options: Mapping[str, Any], context: object = None) -> AnyModel:
        return self._build(**_settings(self.provider, options, self._known, resolve_env=True))

    def check(self, options: Mapping[str, Any]) -> list[str]:
        """The problems of ``options`` (empty when they are fine); the key's environment
        variable is not checked (it may be set only where the crew runs)."""
        try:
            _settings(self.provider, options, self._known, resolve_env=False)
        except ModelConfigError as exc:
            return [str(exc)]
        return []

    def __call__(self, options: Mapping[str, Any], context: object = None) -> AnyModel:
        return self.create(options, context)


OPENAI: Final = ProviderFactory("openai", OpenAIChatModel, _COMMON | _OPENAI_ONLY)
ANTHROPIC: Final = ProviderFactory("anthropic", AnthropicModel, _COMMON)


def openai_model(reference: Mapping[str, Any]) -> OpenAIChatModel:
    """An :class:`OpenAIChatModel` from a model reference (see the module docstring)."""
    model = OPENAI.create(reference)
    assert isinstance(model, OpenAIChatModel)
    return model


def anthropic_model(reference: Mapping[str, Any]) -> AnthropicModel:
    """An :class:`AnthropicModel` from a model reference (see the module docstring)."""
    model = ANTHROPIC.create(reference)
    assert isinstance(model, AnthropicModel)
    return model


def _settings(provider: str, config: Mapping[str, Any], known: frozenset[str], *, resolve_env: bool) -> dict[str, Any]:
    if not isinstance(config, Mapping):
        raise ModelConfigError(f"a {provider} model reference is a mapping like {{provider: {provider}, model: ...}}")
    if config.get("provider", provider) != provider:
        raise ModelConfigError(f"the {provider} factory was given a reference to provider {config['provider']!r}")
    unknown = set(config) - known
    if unknown:
        raise ModelConfigError(
            f"unknown {provider} model settings {sorted(unknown)}; the settings are {sorted(known - {'provider'})}"
        )
    if not config.get("model"):
        raise ModelConfigError(f"a {provider} model reference needs 'model' (the provider's model name)")
    settings = {k: v for k, v in config.items() if k not in ("provider", "api_key_env", "retry")}
    if "retry" in config:
        retry = config["retry"]
        if not isinstance(retry, Mapping):
            raise ModelConfigError(f"{provider} 'retry' is a mapping of retry settings, got {retry!r}")
        settings["retry"] = RetryPolicy.from_config(retry)
    if "price" in config:
        Price.from_config(config["price"])
    if isinstance(config.get("prices"), Mapping):
        resolve_price(str(config["model"]), None, config["prices"])
    variable = config.get("api_key_env")
    if variable is not None and resolve_env:
        key = os.environ.get(str(variable))
        if not key:
            raise ModelConfigError(
                f"the {provider} model reads its API key from ${variable}, which is not set; export it"
            )
        settings["api_key"] = key
    return settings
