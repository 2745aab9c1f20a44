"""Hypothesis over JSON-RPC traffic to a real ``orkeon mcp`` over stdio: whatever a
client writes (well-formed requests with odd params, notifications, responses to nothing,
malformed lines), every request gets exactly one answer with its id, every unreadable
line a JSON-RPC error with id null, the server never dies, and a message posted
afterwards is received intact. Bounded (CI): one server, 60 examples."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from .test_stdio_raw import HANDSHAKE, RawStdio

QUICK_TOOLS = ["publish_event", "post_message", "reply_to", "get_last_value", "no_such_tool"]
"""Tools that answer at once whatever their arguments (no waits: every answer is due now)."""

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**70), 2**70) | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=12,
)
methods = st.sampled_from(["ping", "tools/list", "tools/call", "initialize", "resources/list", "x/unknown", ""])
tool_calls = st.fixed_dictionaries(
    {"name": st.sampled_from(QUICK_TOOLS), "arguments": st.dictionaries(st.text(max_size=16), json_values, max_size=4)}
)


@st.composite
def requests(draw: st.DrawFn) -> dict[str, Any]:
    method = draw(methods)
    params = (
        draw(tool_calls)
        if method == "tools/call"
        else draw(st.none() | st.dictionaries(st.text(max_size=8), json_values, max_size=3))
    )
    message: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
    if params is not None:
        message["params"] = params
    return message


notifications = st.builds(
    lambda method, params: {"jsonrpc": "2.0", "method": method, "params": params},
    st.sampled_from(["notifications/cancelled", "notifications/progress", "notifications/initialized", "x/y"]),
    st.dictionaries(st.sampled_from(["requestId", "progressToken", "progress", "reason"]), json_values, max_size=3),
)
stray_responses = st.builds(
    lambda i, r: {"jsonrpc": "2.0", "id": i, "result": r},
    st.integers(10**6, 10**7),
    st.dictionaries(st.text(max_size=8), json_values, max_size=3),
)
malformed = st.sampled_from(
    ["{", "[]", "[1, 2]", '"x"', "42", "null", '{"jsonrpc": "1.0"}', "{]", "\u00ff\u0000"]
) | st.text(alphabet='{}[]":,0123456789abc ', min_size=1, max_size=40).filter(lambda t: t.strip() != "")
lines = st.lists(
    st.one_of(
        requests().map(lambda m: ("request", m)),
        notifications.map(lambda m: ("notification", m)),
        stray_responses.map(lambda m: ("notification", m)),
        malformed.map(lambda t: ("raw", t)),
    ),
    min_size=1,
    max_size=6,
)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RawStdio]:
    raw = RawStdio(tmp_path_factory.mktemp("fuzz") / "s.db")
    raw.send({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": HANDSHAKE})
    assert raw.answer()["id"] == 0
    raw.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
    try:
        yield raw
    finally:
        assert raw.process.poll() is None, "the server died during the fuzz run"
        posted = raw.call(1, "post_message", {"target_mailbox": "agent://desk/claude", "payload": {"after": "fuzz"}})
        assert posted["result"]["isError"] is False
        raw.close()


_ids = iter(range(1000, 10**9))


def _is_json_rpc_line(text: str) -> bool:
    try:
        value = json.loads(text)
    except ValueError:
        return False
    return isinstance(value, dict) and value.get("jsonrpc") == "2.0" and ("method" in value or "id" in value)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(traffic=lines)
def test_every_request_is_answered_once_and_the_server_lives(server: RawStdio, traffic: list[tuple[str, Any]]) -> None:
    due: set[int] = set()
    nulls = 0
    for kind, item in traffic:
        if kind == "request":
            request_id = next(_ids)
            server.send({**item, "id": request_id})
            due.add(request_id)
        elif kind == "notification":
            server.send(item)
        else:
            server.send_line(item)
            if not _is_json_rpc_line(item):
                nulls += 1
    fence = next(_ids)
    server.send({"jsonrpc": "2.0", "id": fence, "method": "ping"})
    seen_fence = False
    deadline = time.monotonic() + 60
    while due or not seen_fence or nulls > 0:
        assert time.monotonic() < deadline, (due, nulls, seen_fence)
        answer = server.answer(timeout=60)
        if answer["id"] is None:
            nulls -= 1
            assert answer["error"]["code"] in (-32700, -32600)
        elif answer["id"] == fence:
            seen_fence = True
        else:
            assert answer["id"] in due, f"an answer to nothing, or twice: {answer}"
            due.remove(answer["id"])
    assert nulls == 0
    assert server.process.poll() is None
