"""Fuzzing the ``links:`` reader: any text is a block or an ``AclConfigError``; a block
never grants more than what each of its entries for a peer grants."""

from __future__ import annotations

import contextlib
import io
from typing import Any

from hypothesis import example, given, settings
from hypothesis import strategies as st
from ruamel.yaml import YAML

from orkeon_actors.acl import load_crew_yaml, load_links
from orkeon_actors.acl.grammar import LinksBlock
from orkeon_actors.acl.links import AclConfigError, CrewLink, Direction
from tests.security.conftest import FUZZ

PEERS = ["bank", "shop", "client:ui"]
TOPICS = ["pay.request", "pay.*", "pay.#", "audit", "#"]
SAMPLE_TOPICS = ["pay.request", "pay.refund", "pay", "audit", "other.x"]

_yaml_tokens = st.sampled_from(
    [
        "links:", "\n", "  - ", "to: ", "bank", "direction: ", "outbound", "inbound", "bidirectional",
        "allowed_topics: ", "[", "]", "{", "}", ", ", "&a ", "*a", "!!python/object:os.system ", "!tag ",
        "name: ", "x", '"', "'", "#", ": ", "- ", "    ", "? ", "|", ">", "%YAML 1.2\n", "---\n", "...\n",
        "2001-13-45", "0x", "1e999", "~", "<<: *a", "\t",
    ]
)  # fmt: skip


@settings(FUZZ, max_examples=FUZZ.max_examples * 4)
@given(text=st.lists(_yaml_tokens, max_size=60).map("".join) | st.text(max_size=200))
@example(text="?   - links:")  # a list as a mapping key: unhashable for the loader
@example(text="a: &x [1]\n? *x\n: 2")  # the same through an alias
def test_any_text_is_a_block_or_a_config_error(text: str) -> None:
    try:
        block = load_links(text)
    except AclConfigError:
        return
    assert isinstance(block, LinksBlock)
    for link in block.links:
        assert isinstance(link, CrewLink)
    with contextlib.suppress(AclConfigError):  # a spec, or a config error: nothing else
        load_crew_yaml(text)


_entries = st.lists(
    st.fixed_dictionaries(
        {"to": st.sampled_from(PEERS), "direction": st.sampled_from([d.value for d in Direction])},
        optional={"allowed_topics": st.lists(st.sampled_from(TOPICS), max_size=3) | st.none()},
    ),
    max_size=6,
)


def _grants(link: CrewLink) -> set[tuple[str, str]]:
    out = set()
    for topic in SAMPLE_TOPICS:
        if link.allows_topic(topic):
            if link.direction.lets_declarer_send:
                out.add(("send", topic))
            if link.direction.lets_peer_send:
                out.add(("receive", topic))
    return out


def _dump(entries: list[dict[str, Any]]) -> str:
    stream = io.StringIO()
    YAML().dump({"links": entries}, stream)
    return stream.getvalue()


@settings(FUZZ, max_examples=FUZZ.max_examples * 4)
@given(entries=_entries)
def test_a_peer_named_twice_never_gets_a_wider_grant_than_any_entry(entries: list[dict[str, Any]]) -> None:
    block = load_links(_dump(entries))
    assert len({link.to for link in block.links}) == len(block.links)
    for link in block.links:
        written = [CrewLink(e["to"], e["direction"], e.get("allowed_topics")) for e in entries if e["to"] == link.to]
        for entry in written:
            assert _grants(link) <= _grants(entry)
    named = {e["to"] for e in entries}
    if len(named) < len(entries):
        assert block.warnings
