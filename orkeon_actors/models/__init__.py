"""Model adapters: agents on real LLMs through the providers' official SDKs.

* :class:`OpenAIChatModel` (Chat Completions; with ``base_url`` any OpenAI-compatible
  server) needs ``pip install "orkeon-actors[openai]"``;
* :class:`AnthropicModel` (Messages API) needs ``pip install "orkeon-actors[anthropic]"``.

Both implement the :class:`~orkeon_actors.crew.model.Model` protocol; the SDK is
imported when an adapter is built, so this package imports without either extra.
Crew configuration names them ``{provider: openai, model: ...}`` through the
``orkeon_actors.models`` entry-point group (:mod:`orkeon_actors.models.factories`).
See ``docs/models.md``.
"""

from orkeon_actors.models.anthropic_messages import AnthropicModel
from orkeon_actors.models.base import Failure, ProviderModel
from orkeon_actors.models.factories import anthropic_model, openai_model
from orkeon_actors.models.openai_chat import OpenAIChatModel
from orkeon_actors.models.pricing import Price, TokenCounts
from orkeon_actors.models.rate_limit import RateLimit
from orkeon_actors.models.retry import RetryPolicy, parse_retry_after

__all__ = [
    "AnthropicModel",
    "Failure",
    "OpenAIChatModel",
    "Price",
    "ProviderModel",
    "RateLimit",
    "RetryPolicy",
    "TokenCounts",
    "anthropic_model",
    "openai_model",
    "parse_retry_after",
]
