"""The Studio's feed: bounded per browser, free while nobody watches."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from hypothesis import given
from hypothesis import strategies as st

from orkeon_actors.studio import StudioFeed
from orkeon_actors.studio.feed import event, rfc3339

AT = datetime(2026, 12, 1, 10, 0, 0, 123456, tzinfo=UTC)


def test_an_event_nobody_watches_is_not_even_kept() -> None:
    feed = StudioFeed()
    feed.emit(event("post", AT, crew="a"))
    assert not feed.watching
    assert feed.emitted == 0
    subscriber = feed.attach()
    assert subscriber.take(0) == []  # nothing was kept for a later browser


@given(capacity=st.integers(1, 20), emitted=st.integers(0, 60))
def test_a_slow_browser_keeps_the_newest_events_and_counts_the_dropped(capacity: int, emitted: int) -> None:
    feed = StudioFeed(capacity=capacity, recent=0)
    subscriber = feed.attach()
    for n in range(emitted):
        feed.emit(event("publish", AT, topic=f"t{n}"))
    taken = subscriber.take(0)
    assert [e["topic"] for e in taken] == [f"t{n}" for n in range(max(0, emitted - capacity), emitted)]
    assert subscriber.dropped == max(0, emitted - capacity)
    assert [e["seq"] for e in taken] == list(range(max(0, emitted - capacity) + 1, emitted + 1))


def test_a_new_browser_first_gets_the_recent_events() -> None:
    feed = StudioFeed(recent=2)
    first = feed.attach()
    for topic in ("a", "b", "c"):
        feed.emit(event("publish", AT, topic=topic))
    first.close()
    assert not feed.watching
    second = feed.attach()
    assert [e["topic"] for e in second.take(0)] == ["b", "c"]


def test_closing_a_subscriber_releases_a_blocked_take() -> None:
    feed = StudioFeed()
    subscriber = feed.attach()
    subscriber.close()
    assert subscriber.take(30) == []  # returns at once: closed


def test_events_are_json_ready_with_rfc3339_z_times() -> None:
    built = event("timeout", AT, crew="c1", agent=None, waited_for="orders.*")
    assert built == {"kind": "timeout", "at": "2026-12-01T10:00:00.123Z", "crew": "c1", "waited_for": "orders.*"}
    assert rfc3339(datetime(2026, 1, 2, 3, 4, 5)) == "2026-01-02T03:04:05.000Z"


def test_an_unknown_kind_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown studio event kind 'nope'"):
        event("nope", AT)
