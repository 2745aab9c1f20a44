"""The configuration of the external A2A agents a runtime's crews may call.

A runtime knows each remote agent by a *name* (what ``links:`` and the ``a2a://NAME``
address use) and reaches it by its *card URL*: the base URL whose
``/.well-known/agent-card.json`` is its agent card (A2A v1.0, "Agent Discovery")::

    rt = ok.Runtime.start(a2a_agents={
        "weather": "http://127.0.0.1:9100",                      # the base URL only
        "billing": RemoteAgent("billing", "https://billing.example",
                               timeout=30, headers={"Authorization": "Bearer ..."}),
    })

A name is 1-128 letters, digits, ``.``, ``_`` or ``-`` (an ``a2a://`` address). The
timeout is mandatory (positive, finite; default 120 s): a call that outlives it is
cancelled on the remote side (``tasks/cancel``) and fails with
:class:`~orkeon_actors.errors.RemoteAgentTimeoutError`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any, Final

import attrs

from orkeon_actors.acl.links import AclConfigError, a2a_link_name
from orkeon_actors.errors import InvalidArgumentError

__all__ = ["DEFAULT_TIMEOUT", "RemoteAgent", "remote_agents"]

DEFAULT_TIMEOUT: Final = 120.0
"""Seconds a call of a remote agent may take, card fetch included, by default."""


def _name(_instance: object, _attribute: attrs.Attribute[str], value: str) -> None:
    try:
        a2a_link_name(value)
    except AclConfigError as exc:
        raise InvalidArgumentError(str(exc)) from None


def _url(_instance: object, _attribute: attrs.Attribute[str], value: str) -> None:
    if not isinstance(value, str) or not value.startswith(("http://", "https://")):
        raise InvalidArgumentError(
            f"the card URL of an A2A agent must be an http(s) URL (the base URL serving "
            f"/.well-known/agent-card.json), got {value!r}"
        )


def _timeout(_instance: object, _attribute: attrs.Attribute[float], value: float) -> None:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) or value <= 0:
        raise InvalidArgumentError(
            f"the timeout of an A2A agent call must be a positive, finite number of seconds, got {value!r}"
        )


def _headers(value: Mapping[str, str] | None) -> Mapping[str, str]:
    return MappingProxyType(dict(value or {}))


@attrs.frozen
class RemoteAgent:
    """One external A2A agent: ``name`` (its ``a2a://NAME``), ``url`` (the base URL of its
    card), ``timeout`` (seconds per call), ``headers`` sent with every request (a bearer
    token: ``{"Authorization": "Bearer ..."}``), ``streaming`` (ask for server-sent events
    when the card offers them; ``False`` sends ``message/send`` and polls) and
    ``card_path`` (where the card is, relative to ``url``).

    Raises :class:`~orkeon_actors.errors.InvalidArgumentError` for a bad field."""

    name: str = attrs.field(validator=_name)
    url: str = attrs.field(validator=_url)
    timeout: float = attrs.field(default=DEFAULT_TIMEOUT, validator=_timeout)
    headers: Mapping[str, str] = attrs.field(factory=dict, converter=_headers, repr=False)
    streaming: bool = True
    card_path: str | None = None


def remote_agents(value: Mapping[str, str | RemoteAgent | Mapping[str, Any]] | None) -> dict[str, RemoteAgent]:
    """Read ``Runtime.start(a2a_agents=...)``: each name maps to a card URL, a
    :class:`RemoteAgent` (whose ``name`` must be that name) or a mapping of its fields
    (``{"url": ..., "timeout": ...}``). Raises ``InvalidArgumentError`` otherwise."""
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise InvalidArgumentError(
            f"a2a_agents must map names to card URLs ({{'weather': 'http://host:port'}}), got {value!r}"
        )
    agents: dict[str, RemoteAgent] = {}
    for name, spec in value.items():
        if isinstance(spec, RemoteAgent):
            if spec.name != name:
                raise InvalidArgumentError(
                    f"a2a_agents[{name!r}] is RemoteAgent({spec.name!r}, ...): the key and the agent's name must agree"
                )
            agents[name] = spec
        elif isinstance(spec, str):
            agents[name] = RemoteAgent(name, spec)
        elif isinstance(spec, Mapping):
            unknown = set(spec) - {"url", "timeout", "headers", "streaming", "card_path"}
            if unknown or "url" not in spec:
                raise InvalidArgumentError(
                    f"a2a_agents[{name!r}] needs url: and may have timeout:, headers:, streaming:, card_path: "
                    f"(got keys {sorted(spec)})"
                )
            agents[name] = RemoteAgent(name, **spec)
        else:
            raise InvalidArgumentError(f"a2a_agents[{name!r}] must be a card URL or a RemoteAgent, got {spec!r}")
    return agents
