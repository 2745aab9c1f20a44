"""Fuzzing ``EventHubTools.invoke`` on both hubs, as a prompt-injected model would call it.

For arbitrary tool names and arguments (any JSON, JSON text with NaN, duplicate keys or
deep nesting, hostile strings naming other crews' mailboxes and the hub's topics, huge
numbers), every call in ``errors="result"`` mode:

* returns a dict that is strict JSON (no NaN, no Infinity), and either validates against
  the tool's output schema or is an error result whose ``type`` is a typed error of
  :mod:`orkeon_actors.errors`; the only exception is the caller's own cancel token
  firing (the harness cancels a wait after a moment), which raises ``CancelledError``;
* never carries data of the victim crew (its mail, its retained value, its replies);
* leaves the runtime serving a well-formed call, and the victim's data where it was.
"""

from __future__ import annotations

import contextlib
import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import orkeon_actors as ok
from orkeon_actors import errors
from orkeon_actors.tools import EventHubTools
from orkeon_actors.tools.definitions import TOOL_NAMES
from tests.security.conftest import FUZZ, HUBS, start
from tests.tools.conftest import check_result

SECRET = "victim-secret-7f3a"
TYPED_ERRORS = {
    name
    for name in dir(errors)
    if isinstance(getattr(errors, name), type) and issubclass(getattr(errors, name), errors.EventHubError)
}
FIELDS = sorted(
    {
        "topic", "payload", "target_crew_id", "metadata", "retain_as_last_value", "last_value_key",
        "target_mailbox", "timeout_ms", "correlation_id", "mailbox", "wait_forever", "metadata_match",
        "key", "crew_scope",
    }
)  # fmt: skip
HOSTILE_STRINGS = [
    "agent://victim/a", "crew://victim", "victim", "_global", "_system", "_system.post", "_system.reply",
    "_system.wait_timed_out", "topic://_system.post", "client://ui", "#", "*", "a.#", "k", "secret",
    "\x00", "\ud800", "../../etc/passwd", "a" * 300, ".".join(["w"] * 600), "NaN", "1e999",
]  # fmt: skip


def _json_values() -> st.SearchStrategy[Any]:
    scalars = st.one_of(
        st.none(),
        st.booleans(),
        st.integers(),
        st.integers(min_value=10**30, max_value=10**40),
        st.floats(allow_nan=True, allow_infinity=True),
        st.text(max_size=40),
        st.sampled_from(HOSTILE_STRINGS),
    )
    return st.recursive(
        scalars,
        lambda children: st.one_of(
            st.lists(children, max_size=4),
            st.dictionaries(st.sampled_from(FIELDS) | st.text(max_size=8), children, max_size=4),
        ),
        max_leaves=12,
    )


def _deep(depth: int) -> str:
    return '{"topic": "t", "payload": ' + "[" * depth + "]" * depth + "}"


def _arguments() -> st.SearchStrategy[Any]:
    fielded = st.dictionaries(st.sampled_from(FIELDS), _json_values(), max_size=6)
    return st.one_of(
        fielded,
        fielded.map(lambda d: json.dumps(d, allow_nan=True)),
        fielded.map(lambda d: json.dumps(d, allow_nan=True).replace(", ", ', "topic": "_system.post", ', 1)),
        st.integers(min_value=100, max_value=20_000).map(_deep),
        st.text(max_size=60),
        st.binary(max_size=60),
        _json_values(),
    )


class Arena:
    """One runtime per hub: an attacker's tools and a victim crew with data to steal."""

    def __init__(self, runtime: ok.Runtime) -> None:
        self.runtime = runtime
        hub = runtime.hub
        self.victim_inbox = hub.register_mailbox("agent://victim/a")
        hub.register_mailbox("agent://victim/b")
        victim = hub.bind("victim", "a")
        victim.post("agent://victim/a", {"note": SECRET})
        victim.publish(
            "state",
            SECRET,
            ok.PublishOptions(target_crew_id="victim", retain_as_last_value=True, last_value_key="k"),
        )
        self.pending = victim.request("agent://victim/b", {"ask": SECRET}, timeout=3600)
        self.tools = EventHubTools(hub.bind("evil", "mallory"))

    def victim_intact(self) -> bool:
        return self.victim_inbox.depth() == 1 and self.runtime.hub.is_active_correlation(
            self.pending.correlation_id  # type: ignore[arg-type]
        )


@pytest.fixture(scope="module", params=HUBS)
def arena(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Arena]:
    runtime = start(str(request.param), Path(tmp_path_factory.mktemp("fuzz")))
    try:
        yield Arena(runtime)
    finally:
        runtime.stop()


def _call(tools: EventHubTools, name: Any, arguments: Any) -> dict[str, Any] | None:
    """The result, or ``None`` when our own token cancelled a wait that would block."""
    token = ok.CancelToken()
    timer = threading.Timer(0.05, token.cancel)
    timer.start()
    try:
        return tools.invoke(name, arguments, errors="result", cancel=token)
    except errors.CancelledError:
        assert token.cancelled
        return None
    finally:
        timer.cancel()


@settings(FUZZ)
@given(name=st.sampled_from(TOOL_NAMES) | st.text(max_size=20) | st.none() | st.integers(), arguments=_arguments())
def test_every_call_is_a_result_or_a_typed_error_and_reaches_no_other_crew(
    arena: Arena, name: Any, arguments: Any
) -> None:
    result = _call(arena.tools, name, arguments)
    if result is not None:
        text = json.dumps(result, allow_nan=False)
        assert SECRET not in text
        if "error" in result:
            assert result["error"]["type"] in TYPED_ERRORS
        else:
            check_result(name, result)
    assert arena.victim_intact()
    served = arena.tools.invoke("publish_event", {"topic": "still.serving", "payload": {"ok": True}})
    assert "event_id" in served


@settings(FUZZ)
@given(tool=st.sampled_from(TOOL_NAMES), arguments=st.dictionaries(st.sampled_from(FIELDS), _json_values(), max_size=6))
def test_typed_calls_never_raise_untyped_errors(arena: Arena, tool: str, arguments: dict[str, Any]) -> None:
    """The typed methods (``tools.publish_event({...})``) raise only typed errors."""
    token = ok.CancelToken()
    timer = threading.Timer(0.05, token.cancel)
    timer.start()
    try:
        with contextlib.suppress(errors.EventHubError):  # typed: what a caller may rely on
            getattr(arena.tools, tool)(arguments, cancel=token)
    finally:
        timer.cancel()
    assert arena.victim_intact()
