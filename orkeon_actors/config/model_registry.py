"""Model providers: how a ``model:`` reference in a crew document becomes a
:class:`~orkeon_actors.crew.model.Model`.

A provider is registered under a name, either in code (:func:`register_model_provider`)
or by an installed package through the entry-point group ``orkeon_actors.models``::

    # pyproject.toml of a provider package
    [project.entry-points."orkeon_actors.models"]
    openai = "my_package.providers:OPENAI"     # a ModelProvider (or a callable)

A :class:`ModelProvider` has ``create(options, context) -> Model`` and may have
``check(options) -> Sequence[str]`` (the problems of a reference's options, reported by
``orkeon crew validate`` with the reference's position). A plain callable
``fn(options, context) -> Model`` is accepted as a provider too. ``options`` is the
reference without its ``provider`` key (``{model: ..., temperature: ...}``).

The built-in ``scripted`` provider (``{provider: scripted, script: [...], per_task:
bool}``) builds a :class:`~orkeon_actors.crew.model.ScriptedModel`; a step is a string
(a text answer), ``{text, tokens?, cost?}`` or ``{call: TOOL, arguments?, tokens?,
cost?}``.

Entry points are read once, on the first look-up; a name registered in code wins over
an entry point of the same name (with ``replace=True``), and two entry points under one
name are an error naming both.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence
from importlib.metadata import entry_points
from typing import Any, Final, Protocol, runtime_checkable

import attrs

from orkeon_actors.config.frozen import thaw
from orkeon_actors.crew.model import Model, ModelResponse, ScriptedModel, call, respond
from orkeon_actors.errors import CrewConfigError, InvalidArgumentError

__all__ = [
    "ENTRY_POINT_GROUP",
    "ModelContext",
    "ModelProvider",
    "create_model",
    "provider_problems",
    "model_provider",
    "model_provider_names",
    "register_model_provider",
    "reload_entry_points",
    "unregister_model_provider",
]

ENTRY_POINT_GROUP: Final = "orkeon_actors.models"
"""The entry-point group model provider packages register under."""


@attrs.frozen
class ModelContext:
    """Who a model is built for: the crew's name and id, the agent's id (and, for an
    autonomous sub-agent, its role and depth)."""

    crew_name: str
    crew_id: str
    agent_id: str
    role: str = ""
    depth: int = 0


@runtime_checkable
class ModelProvider(Protocol):
    """Builds models from references (see the module docstring)."""

    def create(self, options: Mapping[str, Any], context: ModelContext) -> Model: ...


ProviderLike = ModelProvider | Callable[[Mapping[str, Any], ModelContext], Model]


class _ScriptedProvider:
    """The built-in ``scripted`` provider."""

    def check(self, options: Mapping[str, Any]) -> Sequence[str]:
        return []  # the schema describes every option completely

    def create(self, options: Mapping[str, Any], context: ModelContext) -> Model:
        return ScriptedModel([_step(s) for s in options["script"]], per_task=bool(options.get("per_task", False)))


def _step(step: Any) -> ModelResponse:
    if isinstance(step, str):
        return respond(step)
    tokens, cost = int(step.get("tokens", 10)), float(step.get("cost", 0.0))
    if "call" in step:
        return call(str(step["call"]), dict(step.get("arguments") or {}), tokens=tokens, cost=cost)
    return respond(str(step["text"]), tokens=tokens, cost=cost)


_lock = threading.Lock()
_registered: dict[str, ProviderLike] = {"scripted": _ScriptedProvider()}
_discovered: dict[str, ProviderLike] | None = None


def _entry_point_providers() -> dict[str, ProviderLike]:
    global _discovered
    with _lock:
        if _discovered is None:
            found: dict[str, ProviderLike] = {}
            origin: dict[str, str] = {}
            for ep in entry_points(group=ENTRY_POINT_GROUP):
                if ep.name in origin:
                    raise InvalidArgumentError(
                        f"two packages register the model provider {ep.name!r} ({origin[ep.name]} and {ep.value}); "
                        "uninstall one of them"
                    )
                origin[ep.name] = ep.value
                found[ep.name] = ep.load()
            _discovered = found
        return _discovered


def reload_entry_points() -> None:
    """Forget the entry points read so far; the next look-up reads them again (after a
    provider package was installed into the running interpreter)."""
    global _discovered
    with _lock:
        _discovered = None


def register_model_provider(name: str, provider: ProviderLike, *, replace: bool = False) -> None:
    """Register ``provider`` under ``name`` (``InvalidArgumentError`` if the name is
    taken and ``replace`` is false; ``scripted`` is never replaced)."""
    if not isinstance(name, str) or not name or (name == "scripted" and not replace):
        raise InvalidArgumentError(f"cannot register a model provider named {name!r}")
    if not (isinstance(provider, ModelProvider) or callable(provider)):
        raise InvalidArgumentError(f"a model provider has create(options, context) or is callable, got {provider!r}")
    with _lock:
        if name in _registered and not replace:
            raise InvalidArgumentError(f"a model provider named {name!r} is registered already; pass replace=True")
        _registered[name] = provider


def unregister_model_provider(name: str) -> None:
    """Forget a provider registered in code (entry points stay)."""
    if name == "scripted":
        raise InvalidArgumentError("the built-in scripted provider cannot be unregistered")
    with _lock:
        _registered.pop(name, None)


def model_provider_names() -> list[str]:
    """Every provider known: registered in code and by entry point, sorted."""
    return sorted({*_registered, *_entry_point_providers()})


def model_provider(name: str) -> ProviderLike | None:
    """The provider registered under ``name``, or ``None``."""
    with _lock:
        found = _registered.get(name)
    return found if found is not None else _entry_point_providers().get(name)


def provider_problems(name: str, options: Mapping[str, Any]) -> list[str]:
    """What is wrong with a reference to ``name``: an unknown provider, or the problems
    its ``check`` reports."""
    provider = model_provider(name)
    if provider is None:
        known = ", ".join(model_provider_names())
        return [
            f"unknown model provider {name!r}; known: {known} (install a provider package registering it under "
            f"the {ENTRY_POINT_GROUP!r} entry-point group, or call register_model_provider)"
        ]
    check = getattr(provider, "check", None)
    return [str(p) for p in check(thaw(options))] if callable(check) else []


def create_model(name: str, options: Mapping[str, Any], context: ModelContext) -> Model:
    """A model from provider ``name``; ``CrewConfigError`` for an unknown provider."""
    provider = model_provider(name)
    if provider is None:
        raise CrewConfigError(provider_problems(name, options)[0])
    plain = thaw(options)  # providers get plain JSON values they may keep or change
    model: Model = provider.create(plain, context) if isinstance(provider, ModelProvider) else provider(plain, context)
    return model
