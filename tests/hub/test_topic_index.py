"""The router's index matches exactly what the reference matcher says (issue 31).

``TopicRouter`` used to scan (and copy) every entry on each add, remove and cache miss;
it now indexes exact topics and patterns. These properties hold the index to
:func:`orkeon_actors.hub.routing.topic_matches` for random patterns, topics and
add/remove sequences, order included (entries come back in the order they were added).
"""

from __future__ import annotations

import attrs
from hypothesis import given, settings
from hypothesis import strategies as st

from orkeon_actors.hub.routing import TopicRouter, topic_matches
from orkeon_actors.model.ids import CrewId
from orkeon_actors.model.message import FrozenMap, Message

CREW = CrewId("c")
WORDS = st.sampled_from(["a", "b", "c", "", "a*", "#b"])
PATTERN_WORDS = st.one_of(WORDS, st.just("*"), st.just("#"))
TOPICS = st.lists(WORDS, min_size=1, max_size=5).map(".".join)
PATTERNS = st.lists(PATTERN_WORDS, min_size=1, max_size=5).map(".".join)


@attrs.define(eq=False)
class Entry:
    pattern: str
    crew_id: CrewId = CREW
    metadata_match: FrozenMap | None = None

    def offer(self, message: Message) -> None:
        raise AssertionError("not routed in this test")


@st.composite
def operations(draw: st.DrawFn) -> list[tuple[str, int | str]]:
    ops: list[tuple[str, int | str]] = []
    added = 0
    for _ in range(draw(st.integers(0, 60))):
        kind = draw(st.sampled_from(["add", "add", "remove", "match", "readd"]))
        if kind == "add":
            ops.append(("add", draw(PATTERNS)))
            added += 1
        elif kind in ("remove", "readd") and added:
            ops.append((kind, draw(st.integers(0, added - 1))))
        else:
            ops.append(("match", draw(TOPICS)))
    return ops


@settings(max_examples=400, deadline=None)
@given(operations(), st.lists(TOPICS, min_size=1, max_size=8))
def test_the_index_matches_what_the_reference_matcher_says(ops: list[tuple[str, int | str]], probes: list[str]) -> None:
    router = TopicRouter()
    made: list[Entry] = []
    live: list[Entry] = []  # in the order they were (last) added

    def check(topic: str) -> None:
        expected = [e for e in live if topic_matches(e.pattern, topic)]
        assert list(router.match(topic)) == expected, topic

    for kind, arg in ops:
        if kind == "add":
            entry = Entry(str(arg))
            made.append(entry)
            router.add(entry)
            live.append(entry)
        elif kind == "remove":
            entry = made[int(arg)]
            router.remove(entry)
            if entry in live:
                live.remove(entry)
        elif kind == "readd":
            entry = made[int(arg)]
            if entry not in live:
                router.add(entry)
                live.append(entry)
        else:
            check(str(arg))
        assert router.count() == len(live)
    for topic in probes:
        check(topic)
    for entry in list(live):
        router.remove(entry)
    assert router.count() == 0
    for topic in probes:
        assert router.match(topic) == ()


@settings(max_examples=300, deadline=None)
@given(PATTERNS, TOPICS)
def test_one_pattern_alone_matches_as_the_reference(pattern: str, topic: str) -> None:
    router = TopicRouter()
    entry = Entry(pattern)
    router.add(entry)
    assert (router.match(topic) == (entry,)) == topic_matches(pattern, topic)


def test_a_cached_topic_sees_an_entry_added_after_it_was_cached() -> None:
    router = TopicRouter()
    first = Entry("orders.created")
    router.add(first)
    assert router.match("orders.created") == (first,)  # cached now
    exact, wildcard = Entry("orders.created"), Entry("orders.*")
    router.add(exact)
    assert router.match("orders.created") == (first, exact)
    router.add(wildcard)
    assert router.match("orders.created") == (first, exact, wildcard)
    router.remove(first)
    assert router.match("orders.created") == (exact, wildcard)
    router.remove(wildcard)
    assert router.match("orders.created") == (exact,)
