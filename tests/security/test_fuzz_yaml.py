"""Fuzzing the one guarded YAML loader (``orkeon_actors.guarded_yaml``, issue 34): any
bytes or text is a document or a ``YamlInputError`` with a position, never another
exception; what it returns respects every bound; and a plain document under the bounds
reads back as written (JSON text, which is YAML 1.2). ``load_crew`` and ``CrewBlueprint.from_yaml`` answer every input
with a ``CrewConfigError``, never anything else."""

from __future__ import annotations

import json
import re
from typing import Any

from hypothesis import example, given, settings
from hypothesis import strategies as st

import orkeon_actors as ok
from orkeon_actors.config.source import to_plain
from orkeon_actors.errors import CrewConfigError, YamlInputError
from orkeon_actors.guarded_yaml import MAX_YAML_DEPTH, MAX_YAML_NODES, load_yaml
from tests.security.conftest import FUZZ

_tokens = st.sampled_from(
    [
        "name: ", "agents:", "\n", "  ", "- ", ": ", "? ", "x", "1", '"', "'", "#", "[", "]", "{", "}", ", ",
        "&a ", "&b ", "*a", "*b", "<<: *a", "!!python/object/apply:os.system ", "!!binary ", "!tag ", "!!str ",
        "|", ">", "%YAML 1.2\n", "%TAG ! tag:x,2000:\n", "---\n", "...\n", "2001-13-45", "0x1F", "1e999",
        "9" * 60, "~", "\t", "\x00", "\x85", "\ufeff", "\u2028", "\\x", "\\u12",
    ]
)  # fmt: skip
_documents = st.lists(_tokens, max_size=80).map("".join) | st.text(max_size=300)
_bytes = st.binary(max_size=300) | _documents.map(lambda t: t.encode("utf-8", "surrogatepass"))


def _walk(node: Any, depth: int = 0) -> int:
    """The node count of ``node`` (aliases expanded), checking its depth on the way."""
    assert depth <= MAX_YAML_DEPTH + 1
    if isinstance(node, dict):
        return 1 + sum(_walk(k, depth + 1) + _walk(v, depth + 1) for k, v in node.items())
    if isinstance(node, list):
        return 1 + sum(_walk(v, depth + 1) for v in node)
    return 1


def _load_or_refuse(data: str | bytes) -> None:
    try:
        document = load_yaml(data, "fuzz.yaml")
    except YamlInputError as exc:
        assert exc.file == "fuzz.yaml" and str(exc).startswith("fuzz.yaml")
        assert exc.line >= 0 and exc.column >= 0
        return
    plain = to_plain(document, "fuzz.yaml")
    assert _walk(plain) <= MAX_YAML_NODES


@settings(FUZZ, max_examples=FUZZ.max_examples * 4)
@given(text=_documents)
@example(text="? - a\n: b")  # a list as a key
@example(text="a: &x [1]\n? *x\n: 2")  # the same through an alias
@example(text="a: !!python/object/apply:os.system [echo]")
@example(text="a: 2001-13-45")  # a 13th month: the constructor's ValueError
@example(text="a: " + "1" * 5000)
@example(text="a: \x00")
@example(text="a: 1\na: 2")
def test_any_text_is_a_document_or_a_typed_error(text: str) -> None:
    _load_or_refuse(text)


@settings(FUZZ, max_examples=FUZZ.max_examples * 2)
@given(data=_bytes)
@example(data=b"a: \xff")
@example(data=b"\xef\xbb\xbfa: 1")
@example(data=b"\xfe\xff\x00a")  # UTF-16: not UTF-8
def test_any_bytes_are_a_document_or_a_typed_error(data: bytes) -> None:
    _load_or_refuse(data)


_keys = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=12)
_scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(10**30), max_value=10**30)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=30)
)
_values = st.recursive(
    _scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(_keys, inner, max_size=4),
    max_leaves=30,
)


_RAW_REFUSED = re.compile("[\x7f-\x9f\ufffe\uffff\u2028\u2029]")


def _json(value: Any, indent: int | None = None) -> str:
    """``{"v": value}`` as JSON (which is YAML 1.2), with the characters YAML does not
    allow raw (C1 controls, U+FFFE, U+FFFF) and the three YAML 1.1 reads as line breaks
    escaped, as the guarded loader asks."""
    text = json.dumps({"v": value}, ensure_ascii=False, indent=indent)
    return _RAW_REFUSED.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


@settings(FUZZ, max_examples=FUZZ.max_examples * 2)
@given(value=_values)
@example(value={"a": "\x85"})
@example(value={"\x85": ["\u2028", "\ufeff"]})
def test_a_document_under_the_bounds_reads_back_as_written(value: Any) -> None:
    for text in (_json(value), _json(value, indent=1)):
        assert to_plain(load_yaml(text, "doc.yaml"), "doc.yaml") == {"v": value}


@settings(FUZZ)
@given(text=_documents)
def test_a_crew_read_from_any_text_is_a_blueprint_or_a_crew_config_error(text: str) -> None:
    try:
        ok.CrewBlueprint.from_yaml(text, file="fuzz.yaml")
    except CrewConfigError as exc:
        assert all(isinstance(issue, ok.config.ConfigIssue) for issue in exc.issues)
