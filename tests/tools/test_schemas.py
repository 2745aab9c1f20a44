"""The tool definitions and their JSON Schemas (Draft 2020-12), and the examples of
``docs/tools.md``, checked against them."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import orkeon_actors as ok
from orkeon_actors.errors import InvalidArgumentError, InvalidIdError, ToolValidationError
from orkeon_actors.model.address import validate_topic, validate_topic_pattern
from orkeon_actors.tools import TOOL_SPECS, EventHubTools, error_schema, structure_request, tool_definitions
from orkeon_actors.tools.definitions import spec_for

DOCS = Path(__file__).resolve().parents[2] / "docs" / "tools.md"

INPUTS = {  # spec §5: the input fields of each tool, in order (+ the sent history's optional idempotency_key)
    "publish_event": ["topic", "payload", "target_crew_id", "metadata", "retain_as_last_value", "last_value_key"],
    "post_message": ["target_mailbox", "payload", "metadata", "idempotency_key"],
    "send_request": ["target_mailbox", "payload", "timeout_ms", "metadata", "idempotency_key"],
    "reply_to": ["correlation_id", "payload", "idempotency_key"],
    "receive_message": ["timeout_ms", "wait_forever", "mailbox"],
    "wait_for_event": ["topic", "timeout_ms", "wait_forever", "metadata_match"],
    "get_last_value": ["key", "crew_scope"],
}
REQUIRED = {
    "publish_event": ["topic", "payload"],
    "post_message": ["target_mailbox", "payload"],
    "send_request": ["target_mailbox", "payload", "timeout_ms"],
    "reply_to": ["correlation_id", "payload"],
    "receive_message": [],
    "wait_for_event": ["topic"],
    "get_last_value": ["key"],
}


def _validator(schema: dict[str, Any]) -> jsonschema.Draft202012Validator:
    return jsonschema.Draft202012Validator(schema, format_checker=jsonschema.FormatChecker())


def _objects(schema: Any) -> Iterator[dict[str, Any]]:
    """Every sub-schema describing an object with properties."""
    if isinstance(schema, dict):
        if "properties" in schema:
            yield schema
        for value in schema.values():
            yield from _objects(value)
    elif isinstance(schema, list):
        for item in schema:
            yield from _objects(item)


def test_the_seven_tools_in_the_order_of_the_spec() -> None:
    assert [d["name"] for d in EventHubTools.definitions()] == list(INPUTS)


@pytest.mark.parametrize("spec", TOOL_SPECS, ids=lambda s: s.name)
def test_every_schema_is_a_valid_draft_2020_12_schema(spec: Any) -> None:
    for schema in (spec.input_schema, spec.output_schema, error_schema()):
        jsonschema.Draft202012Validator.check_schema(schema)
        assert jsonschema.validators.validator_for(schema, default=None) is None  # no $schema: 2020-12 by default
        for obj in _objects(schema):
            assert obj["type"] == "object" or "object" in obj["type"]
            assert obj["additionalProperties"] is False


@pytest.mark.parametrize("spec", TOOL_SPECS, ids=lambda s: s.name)
def test_inputs_are_exactly_those_of_the_spec(spec: Any) -> None:
    schema = spec.input_schema
    assert list(schema["properties"]) == INPUTS[spec.name]
    assert schema.get("required", []) == REQUIRED[spec.name]
    assert all(prop.get("description") for prop in schema["properties"].values())
    assert len(spec.description) > 80


def test_definition_styles() -> None:
    default = tool_definitions()
    assert all(set(d) == {"name", "description", "input_schema"} for d in default)
    openai = tool_definitions("openai")
    assert [d["function"]["name"] for d in openai] == list(INPUTS)
    assert all(d["type"] == "function" and set(d["function"]) == {"name", "description", "parameters"} for d in openai)
    mcp = tool_definitions("mcp")
    assert all(set(d) == {"name", "description", "inputSchema", "outputSchema"} for d in mcp)
    assert [d["inputSchema"] for d in mcp] == [d["input_schema"] for d in default]
    assert [d["input_schema"] for d in default] == [dict(s.input_schema) for s in TOOL_SPECS]
    assert [d["outputSchema"] for d in mcp] == [dict(s.output_schema) for s in TOOL_SPECS]
    default[0]["input_schema"]["properties"].clear()  # callers get copies
    assert tool_definitions()[0]["input_schema"]["properties"]
    with pytest.raises(ValueError):
        tool_definitions("default")  # type: ignore[arg-type]


def test_timeout_rules_are_in_the_schemas() -> None:
    wait = _validator(spec_for("wait_for_event").input_schema)  # type: ignore[union-attr]
    send = _validator(spec_for("send_request").input_schema)  # type: ignore[union-attr]
    assert not wait.is_valid({"topic": "t", "timeout_ms": 0})
    assert not wait.is_valid({"topic": "t", "wait_forever": False})
    assert wait.is_valid({"topic": "t", "wait_forever": True})
    assert not send.is_valid({"target_mailbox": "crew://c", "payload": 1})
    assert not send.is_valid({"target_mailbox": "crew://c", "payload": 1, "timeout_ms": 5, "wait_forever": True})
    assert not send.is_valid({"target_mailbox": "crew//c", "payload": 1, "timeout_ms": 5})


# -- docs/tools.md ---------------------------------------------------------------------

_BLOCK = re.compile(r"^```json (definition|call|result|error-result)\n(.*?)^```$", re.S | re.M)


def _doc_blocks() -> list[tuple[str, Any]]:
    return [(kind, json.loads(body)) for kind, body in _BLOCK.findall(DOCS.read_text(encoding="utf-8"))]


def test_the_docs_give_every_definition_exactly() -> None:
    documented = [block for kind, block in _doc_blocks() if kind == "definition"]
    assert documented == tool_definitions()


def test_every_example_call_and_result_in_the_docs_validates() -> None:
    blocks = _doc_blocks()
    calls = [block for kind, block in blocks if kind == "call"]
    assert {call["name"] for call in calls} == set(INPUTS)  # at least one example per tool
    last_call: str | None = None
    checked = 0
    for kind, block in blocks:
        if kind == "call":
            assert set(block) == {"name", "arguments"}
            spec = spec_for(block["name"])
            assert spec is not None, block
            _validator(spec.input_schema).validate(block["arguments"])
            structure_request(block["arguments"], spec.request)  # the converter accepts it too
            last_call = block["name"]
        elif kind == "result":
            assert last_call is not None
            _validator(spec_for(last_call).output_schema).validate(block)  # type: ignore[union-attr]
        elif kind == "error-result":
            _validator(error_schema()).validate(block)
        checked += 1
    assert checked >= 30
    results = {kind for kind, _ in blocks}
    assert results == {"definition", "call", "result", "error-result"}


def test_the_docs_results_are_what_the_tools_return(clock: ok.VirtualClock) -> None:
    """Each documented result has the exact keys the tool really returns."""
    with ok.Runtime.start(clock=clock) as rt:
        scorer = EventHubTools(rt.hub.bind("billing", "scorer"))
        rt.hub.register_mailbox("agent://billing/clerk")
        real = {
            "publish_event": scorer.invoke("publish_event", {"topic": "t", "payload": 1}),
            "post_message": scorer.invoke("post_message", {"target_mailbox": "agent://billing/clerk", "payload": 1}),
            "get_last_value": scorer.invoke("get_last_value", {"key": "k"}),
        }
    documented: dict[str, set[str]] = {}
    last_call = ""
    for kind, block in _doc_blocks():
        if kind == "call":
            last_call = block["name"]
        elif kind == "result" and last_call in real:
            documented.setdefault(last_call, set(block))
    assert {name: set(result) for name, result in real.items()} == documented


# -- the schema's patterns agree with the hub's parsers ---------------------------------

_TOKENS = st.sampled_from([*"ab.-_*#/:Z9 é", "agent://", "crew://", "topic://", "client://", "_global"])


def _texts(max_tokens: int) -> st.SearchStrategy[str]:
    """Strings built from the pieces addresses, topics and ids are made of."""
    return st.lists(_TOKENS, max_size=max_tokens).map("".join)


def _accepts(call: Any) -> bool:
    try:
        call()
    except (InvalidArgumentError, InvalidIdError, ToolValidationError):
        return False
    return True


@settings(max_examples=300, deadline=None)
@given(_texts(12))
def test_mailbox_pattern_agrees_with_the_parser(text: str) -> None:
    schema = spec_for("post_message").input_schema["properties"]["target_mailbox"]  # type: ignore[union-attr]
    assert _validator(schema).is_valid(text) == _accepts(lambda: ok.MailboxAddress.parse(text))


@settings(max_examples=300, deadline=None)
@given(_texts(10))
def test_topic_patterns_agree_with_the_validators(text: str) -> None:
    properties = spec_for("wait_for_event").input_schema["properties"]  # type: ignore[union-attr]
    publish = spec_for("publish_event").input_schema["properties"]  # type: ignore[union-attr]
    assert _validator(properties["topic"]).is_valid(text) == _accepts(lambda: validate_topic_pattern(text))
    assert _validator(publish["topic"]).is_valid(text) == _accepts(lambda: validate_topic(text))


@settings(max_examples=200, deadline=None)
@given(_texts(8))
def test_crew_scope_pattern_agrees_with_the_converter(text: str) -> None:
    schema = spec_for("get_last_value").input_schema["properties"]["crew_scope"]  # type: ignore[union-attr]
    request = spec_for("get_last_value").request  # type: ignore[union-attr]
    assert _validator(schema).is_valid(text) == _accepts(
        lambda: structure_request({"key": "k", "crew_scope": text}, request)
    )
