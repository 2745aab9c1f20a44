"""Crashes: inputs that raised something other than a typed error (issue 15)."""

from __future__ import annotations

import functools
import json
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import orkeon_actors as ok
from orkeon_actors.acl import load_links
from orkeon_actors.acl.links import AclConfigError
from orkeon_actors.errors import InvalidArgumentError, LimitExceededError
from orkeon_actors.hub.routing import topic_matches
from orkeon_actors.model.limits import MAX_JSON_DEPTH, MAX_TOPIC_BYTES, MAX_TOPIC_WORDS
from orkeon_actors.tools import EventHubTools
from tests.security.conftest import FUZZ


def _reference_match(pattern: str, topic: str) -> bool:
    p, w = pattern.split("."), topic.split(".")

    @functools.cache
    def match(i: int, j: int) -> bool:
        if i == len(p):
            return j == len(w)
        if p[i] == "#":
            return match(i + 1, j) or (j < len(w) and match(i, j + 1))
        return j < len(w) and (p[i] == "*" or p[i] == w[j]) and match(i + 1, j + 1)

    return match(0, 0)


_words = st.lists(st.sampled_from(["a", "b", "*", "#"]), min_size=1, max_size=7).map(".".join)


@settings(FUZZ, max_examples=300)
@given(pattern=_words, topic=st.lists(st.sampled_from(["a", "b", "c"]), min_size=1, max_size=7).map(".".join))
def test_iterative_matching_agrees_with_the_recursive_definition(pattern: str, topic: str) -> None:
    assert topic_matches(pattern, topic) == _reference_match(pattern, topic)


def test_matching_many_words_does_not_recurse() -> None:
    words = ".".join(["w"] * 5000)
    assert topic_matches("#", words) and topic_matches("#.w.#.w", words) and not topic_matches("#.x", words)


def test_a_topic_of_many_words_is_refused_and_breaks_nobody(rt: ok.Runtime) -> None:
    watcher = rt.hub.system.subscribe("#")
    attacker = rt.hub.bind("evil", "e")
    with pytest.raises(LimitExceededError) as caught:
        attacker.publish(".".join(["w"] * 500), "x")
    assert caught.value.bound in ("MAX_TOPIC_BYTES", "MAX_TOPIC_WORDS")
    with pytest.raises(LimitExceededError, match="MAX_TOPIC_WORDS"):
        attacker.publish(".".join(["w"] * (MAX_TOPIC_WORDS + 1)), "x")
    with pytest.raises(LimitExceededError, match="MAX_TOPIC_BYTES"):
        attacker.publish("a" * (MAX_TOPIC_BYTES + 1), "x")
    with pytest.raises(LimitExceededError):
        attacker.subscribe(".".join(["#"] * 500))
    rt.hub.bind("good").publish("orders.created", 1)
    assert watcher.receive(5).json() == 1


def _deep_text(depth: int) -> str:
    return "[" * depth + "]" * depth


def test_deep_tool_arguments_are_an_error_result(rt: ok.Runtime) -> None:
    tools = EventHubTools(rt.hub.bind("c", "a"))
    deep_json = '{"topic": "t", "payload": ' + _deep_text(10_000) + "}"
    result = tools.invoke("publish_event", deep_json, errors="result")
    assert result["error"]["type"] == "LimitExceededError"
    deep_list: object = []
    for _ in range(10_000):
        deep_list = [deep_list]
    result = tools.invoke("publish_event", {"topic": "t", "payload": deep_list}, errors="result")
    assert result["error"]["type"] == "ToolValidationError" and result["error"]["field"] == "payload"
    assert "MAX_JSON_DEPTH" in result["error"]["message"]
    ok_depth = json.loads(_deep_text(MAX_JSON_DEPTH))
    assert "event_id" in tools.invoke("publish_event", {"topic": "t", "payload": ok_depth})


def test_deep_python_payloads_are_refused_at_the_call(rt: ok.Runtime) -> None:
    deep: object = []
    for _ in range(10_000):
        deep = [deep]
    with pytest.raises(LimitExceededError):
        rt.hub.bind("c").publish("t", deep)
    with pytest.raises(LimitExceededError):
        rt.hub.bind("c").publish("t", json.loads(_deep_text(MAX_JSON_DEPTH + 1)))


@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf, {"x": [math.nan]}])
def test_nan_and_infinity_are_refused_at_the_call(rt: ok.Runtime, value: object) -> None:
    client = rt.hub.bind("c", "a")
    rt.hub.register_mailbox("agent://c/b")
    with pytest.raises(InvalidArgumentError):
        client.publish("t", value)
    with pytest.raises(InvalidArgumentError):
        client.post("agent://c/b", value)


@pytest.mark.parametrize("text", ['{"topic": "t", "payload": NaN}', '{"topic": "t", "payload": 1e999}'])
def test_nan_in_tool_json_is_an_error_result(rt: ok.Runtime, text: str) -> None:
    result = EventHubTools(rt.hub.bind("c", "a")).invoke("publish_event", text, errors="result")
    assert result["error"]["type"] == "ToolValidationError"


def test_duplicate_keys_in_tool_json_are_refused(rt: ok.Runtime) -> None:
    text = '{"topic": "t", "topic": "_system.post", "payload": 1}'
    result = EventHubTools(rt.hub.bind("c", "a")).invoke("publish_event", text, errors="result")
    assert result["error"]["type"] == "ToolValidationError" and "twice" in result["error"]["message"]


@pytest.mark.parametrize(
    "payload",
    [b"NaN", b"[Infinity]", b"[" * 5000 + b"]" * 5000, b'{"a": 1, "a": 2}'],
    ids=["nan", "inf", "deep", "dup"],
)
def test_a_hostile_bytes_payload_reaches_a_model_as_valid_json(rt: ok.Runtime, payload: bytes) -> None:
    """Python code may publish any bytes; the tool result stays strict JSON."""
    tools = EventHubTools(rt.hub.bind("c", "a"))
    rt.hub.bind("c", "b").post("agent://c/a", payload)
    result = tools.invoke("receive_message", {"timeout_ms": 5000})
    text = json.dumps(result, allow_nan=False)  # raises on NaN / Infinity
    assert result["message"]["payload_encoding"] == "text"
    assert json.loads(text)["message"]["payload"] == payload.decode()


def test_a_python_tag_in_yaml_is_a_config_error() -> None:
    with pytest.raises(AclConfigError, match="tag"):
        load_links("links: !!python/object:os.system {}\n")
    with pytest.raises(AclConfigError, match="tag"):
        load_links("links:\n  - !custom {to: b, direction: outbound}\n")


def test_deep_yaml_is_a_config_error() -> None:
    with pytest.raises(AclConfigError, match="MAX_YAML_FLOW_OPENERS"):
        load_links("links: " + "[" * 5000 + "]" * 5000)
    block_deep = "links:\n" + "".join(" " * (2 * i) + "-\n" for i in range(300))
    with pytest.raises(AclConfigError, match="MAX_YAML_DEPTH"):
        load_links(block_deep)


def test_a_billion_laughs_is_refused_before_it_expands() -> None:
    """Before: 13 s of CPU. Refused on its event stream, counting expanded nodes."""
    lines = ["a0: &a0 [lol]"] + [f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 9) + "]" for i in range(1, 10)]
    with pytest.raises(AclConfigError, match="MAX_YAML_NODES"):
        load_links("\n".join([*lines, "links: [*a9]"]))
    block_style = ["a0: &a0 lol"] + [f"a{i}: &a{i}\n" + "\n".join([f"  - *a{i - 1}"] * 9) for i in range(1, 10)]
    with pytest.raises(AclConfigError, match="MAX_YAML_NODES"):
        load_links("\n".join([*block_style, "links: []"]))
