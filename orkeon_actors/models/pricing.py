"""What a model call costs: prices per million tokens, configured by the user.

No prices are bundled (they change, and differ per account and per deployment): give a
:class:`Price` to the adapter (``price=``) or a table of them keyed by model name
(``prices=``). Without either, a call costs ``0.0`` and an agent's ``max_cost`` budget
never fires for it; ``docs/models.md`` says so.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import attrs

from orkeon_actors.errors import ModelConfigError

__all__ = ["Price", "TokenCounts", "resolve_price"]


def _price(_instance: object, attribute: attrs.Attribute[Any], value: object) -> None:
    if value is None and attribute.name in ("cache_read", "cache_write"):
        return
    if isinstance(value, bool) or not isinstance(value, int | float) or value < 0 or not math.isfinite(value):
        raise ModelConfigError(f"price {attribute.name} must be a finite number >= 0 per million tokens, got {value!r}")


@attrs.frozen
class TokenCounts:
    """The tokens of one call as a provider reports them. ``input`` excludes the
    cached ones (``cache_read``: read from the prompt cache, ``cache_write``: written
    to it)."""

    input: int = 0
    output: int = 0
    cache_read: int = 0
    cache_write: int = 0

    @property
    def total_input(self) -> int:
        return self.input + self.cache_read + self.cache_write


@attrs.frozen
class Price:
    """Prices in currency units (say USD) per million tokens. ``cache_read`` and
    ``cache_write`` default to the ``input`` price."""

    input: float = attrs.field(validator=_price)
    output: float = attrs.field(validator=_price)
    cache_read: float | None = attrs.field(default=None, validator=_price)
    cache_write: float | None = attrs.field(default=None, validator=_price)

    def cost(self, tokens: TokenCounts) -> float:
        read = self.input if self.cache_read is None else self.cache_read
        write = self.input if self.cache_write is None else self.cache_write
        total = tokens.input * self.input + tokens.output * self.output
        return (total + tokens.cache_read * read + tokens.cache_write * write) / 1_000_000

    @classmethod
    def from_config(cls, config: Price | Mapping[str, Any]) -> Price:
        """A price from ``{"input": 3.0, "output": 15.0[, "cache_read": ..., "cache_write": ...]}``."""
        if isinstance(config, Price):
            return config
        if not isinstance(config, Mapping):
            raise ModelConfigError(f"a price is a mapping like {{'input': 3.0, 'output': 15.0}}, got {config!r}")
        known = {"input", "output", "cache_read", "cache_write"}
        if set(config) - known or not {"input", "output"} <= set(config):
            raise ModelConfigError(
                f"a price needs 'input' and 'output' (per million tokens), optionally 'cache_read' and "
                f"'cache_write'; got the keys {sorted(config)}"
            )
        return cls(**config)


def resolve_price(
    model: str, price: Price | Mapping[str, Any] | None, prices: Mapping[str, Price | Mapping[str, Any]] | None
) -> Price | None:
    """The price of ``model``: ``price`` itself, or its entry in the ``prices`` table
    (a table without it is a configuration error: the budget would silently not count)."""
    if price is not None and prices is not None:
        raise ModelConfigError("give a model either price= or prices= (a table), not both")
    if price is not None:
        return Price.from_config(price)
    if prices is None:
        return None
    if model not in prices:
        raise ModelConfigError(
            f"the price table has no entry for model {model!r} (it has {sorted(prices)}); add one so its cost "
            "is counted against the agent's budget"
        )
    return Price.from_config(prices[model])
