"""Build an adapter from a model reference in crew configuration.

A crew file names a model as a mapping, ``{provider: openai, model: gpt-4o-mini,
base_url: ..., max_tokens: 512, ...}``. The providers are entry points of the group
:data:`ENTRY_POINT_GROUP` (``orkeon_actors.models``): each is a factory taking that
mapping and returning a :class:`~orkeon_actors.crew.model.Model`. This package
registers ``openai`` -> :func:`openai_model` and ``anthropic`` -> :func:`anthropic_model`
in its ``pyproject.toml``; a third-party provider registers its own factory the same way.

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
from collections.abc import Mapping
from typing import Any, Final

from orkeon_actors.errors import ModelConfigError
from orkeon_actors.models.anthropic_messages import AnthropicModel
from orkeon_actors.models.openai_chat import OpenAIChatModel
from orkeon_actors.models.retry import RetryPolicy

__all__ = ["ENTRY_POINT_GROUP", "anthropic_model", "openai_model"]

ENTRY_POINT_GROUP: Final = "orkeon_actors.models"

_COMMON: Final = frozenset(
    {
        "provider", "model", "base_url", "api_key_env", "max_tokens", "timeout", "temperature", "retry",
        "price", "prices", "require_usage", "extra_body",
    }
)  # fmt: skip
_OPENAI_ONLY: Final = frozenset({"max_tokens_parameter", "strict", "parallel_tool_calls"})


def openai_model(config: Mapping[str, Any]) -> OpenAIChatModel:
    """An :class:`OpenAIChatModel` from a model reference (see the module docstring)."""
    settings = _settings("openai", config, _COMMON | _OPENAI_ONLY)
    return OpenAIChatModel(**settings)


def anthropic_model(config: Mapping[str, Any]) -> AnthropicModel:
    """An :class:`AnthropicModel` from a model reference (see the module docstring)."""
    settings = _settings("anthropic", config, _COMMON)
    return AnthropicModel(**settings)


def _settings(provider: str, config: Mapping[str, Any], known: frozenset[str]) -> dict[str, Any]:
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
    variable = config.get("api_key_env")
    if variable is not None:
        key = os.environ.get(str(variable))
        if not key:
            raise ModelConfigError(
                f"the {provider} model reads its API key from ${variable}, which is not set; export it"
            )
        settings["api_key"] = key
    return settings
