"""The writer's two lanes (orkeon_actors.store.write_queue): urgent requests overtake
bulk ones only across keys, never a keyless request; bulk batches are bounded and bulk
requests are never starved. Properties over random pushes and takes."""

from __future__ import annotations

from typing import Any

import attrs
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from orkeon_actors.errors import InvalidArgumentError
from orkeon_actors.store.write_queue import Key, WriteQueue


@attrs.define(eq=False)
class Req:
    n: int
    key: Key
    urgent: bool
    asked: bool  # urgent as pushed (push clears ``urgent`` when it demotes)


def _keys(key: Key) -> frozenset[str] | None:
    """The request's keys; ``None`` for a keyless request (ordered against all)."""
    if key is None or key == ():
        return None
    return frozenset((key,) if isinstance(key, str) else key)


def _ordered(a: Req, b: Req) -> bool:
    """Whether ``a`` (pushed first) must run before ``b``."""
    ka, kb = _keys(a.key), _keys(b.key)
    return ka is None or kb is None or bool(ka & kb) or not b.urgent


keys = st.one_of(
    st.none(),
    st.sampled_from(["m1", "m2", "m3", "s1"]),
    st.tuples(st.sampled_from(["m1", "m2", "m3"]), st.sampled_from(["s1", "s2"])),
)
steps = st.lists(
    st.one_of(st.tuples(st.just("push"), keys, st.booleans()), st.just(("take", None, False))),
    max_size=120,
)


@settings(max_examples=300, deadline=None)
@given(steps, st.integers(1, 6), st.integers(1, 8))
def test_lanes_keep_order_per_key_bound_batches_and_never_starve_bulk(
    script: list[tuple[str, Key, bool]], bulk_batch: int, max_batch: int
) -> None:
    queue: WriteQueue[Req] = WriteQueue(max_batch=max_batch, bulk_batch=bulk_batch)
    pushed: list[Req] = []
    ran: list[Req] = []
    batches: list[list[Req]] = []
    take_at: list[int] = []  # requests pushed before each take

    def take() -> None:
        take_at.append(len(pushed))
        batch = queue.take()
        assert len(batch) <= max_batch
        assert sum(1 for r in batch if not r.urgent) <= min(bulk_batch, max_batch)
        assert [r.urgent for r in batch] == sorted((r.urgent for r in batch), reverse=True), "urgent ones first"
        batches.append(batch)
        ran.extend(batch)

    for op, key, urgent in script:
        if op == "take":
            take()
            continue
        request = Req(len(pushed), key, urgent, urgent)
        queued = list(pushed[i] for i in range(len(pushed)) if pushed[i] not in ran)
        conflict = any(not q.urgent and (_keys(q.key) is None or (_keys(key) or set()) & _keys(q.key)) for q in queued)
        went_urgent = queue.push(request)
        assert went_urgent == (urgent and _keys(key) is not None and not conflict)
        assert request.urgent == went_urgent
        pushed.append(request)
    while len(queue):
        take()
    assert queue.take() == []
    assert sorted(r.n for r in ran) == list(range(len(pushed))), "each request taken exactly once"
    position = {r.n: i for i, r in enumerate(ran)}
    for i, a in enumerate(pushed):
        for b in pushed[i + 1 :]:
            if _ordered(a, b):
                assert position[a.n] < position[b.n], f"{b} overtook {a}"
    batch_of = {r.n: i for i, batch in enumerate(batches) for r in batch}
    for b in pushed:
        if b.urgent:
            continue
        older_urgent = [batch_of[a.n] for a in pushed[: b.n] if a.urgent]
        first = next(i for i, count in enumerate(take_at) if count > b.n)  # the first take after its push
        start = max([first, *(i + 1 for i in older_urgent)])  # once the urgent ones before it ran
        waited = range(start, batch_of[b.n])
        without_bulk = [i for i in waited if all(r.urgent for r in batches[i])]
        with_bulk = len(waited) - len(without_bulk)  # the bulk lane moved on meanwhile
        assert len(without_bulk) <= with_bulk + 1, f"{b} waited through urgent batches {without_bulk}"


arrivals = st.lists(st.tuples(st.one_of(keys, st.sampled_from(["w1", "w2"])), st.booleans()), max_size=4)
cut_steps = st.lists(
    st.one_of(
        st.tuples(st.just("push"), keys, st.booleans()),
        st.tuples(st.just("write"), st.integers(1, 3), arrivals),
    ),
    max_size=120,
)


@settings(max_examples=300, deadline=None)
@given(cut_steps, st.integers(2, 6), st.integers(2, 8))
def test_urgent_requests_cutting_into_a_bulk_batch_keep_order_per_key(
    script: list[tuple[str, Any, Any]], bulk_batch: int, max_batch: int
) -> None:
    """The writer's cut-in: a bulk batch written up to some point, requests pushed
    meanwhile, then the urgent lane cutting in and the rest queued again. Whatever the
    interleaving, every request runs once and none overtakes one it must follow."""
    queue: WriteQueue[Req] = WriteQueue(max_batch=max_batch, bulk_batch=bulk_batch)
    pushed: list[Req] = []
    ran: list[Req] = []

    def push(key: Key, urgent: bool) -> None:
        request = Req(len(pushed), key, urgent, urgent)
        queue.push(request)
        pushed.append(request)

    def write(at: int, arriving: list[tuple[Key, bool]]) -> None:
        batch = queue.take()
        for key, urgent in arriving:  # pushed while the batch's first part is written
            push(key, urgent)
        if batch and not batch[0].urgent and 0 < at < len(batch):
            joining = queue.cut_in(batch[at:], max_batch - at)
            assert len(joining) <= max_batch - at
            assert all(r.urgent for r in joining)
            if joining:
                batch = batch[:at] + joining
        ran.extend(batch)

    for op, a, b in script:
        if op == "push":
            push(a, b)
        else:
            write(a, b)
    while len(queue):
        write(0, [])
    assert sorted(r.n for r in ran) == list(range(len(pushed))), "each request written exactly once"
    position = {r.n: i for i, r in enumerate(ran)}
    for i, first in enumerate(pushed):
        for later in pushed[i + 1 :]:
            if _ordered(first, later):
                assert position[first.n] < position[later.n], f"{later} overtook {first}"


def test_a_cut_in_waits_for_a_bulk_request_of_its_key_still_to_be_written() -> None:
    queue: WriteQueue[Req] = WriteQueue(max_batch=10, bulk_batch=10)
    written, rest = Req(0, "m1", False, False), Req(1, "m2", False, False)
    queue.push(written)
    queue.push(rest)
    assert queue.take() == [written, rest]
    same_key = Req(2, "m2", True, True)
    assert queue.push(same_key), "the batch in progress was taken: nothing queued shares its key"
    assert queue.cut_in([rest], 9) == [], "it must follow the part not written yet"
    other = Req(3, "m3", True, True)
    queue.push(other)
    assert queue.cut_in([rest], 9) == [], "the urgent lane cuts in whole or not at all"
    assert queue.take() == [same_key, other]


def test_a_cut_in_queues_the_rest_again_ahead_of_later_requests() -> None:
    queue: WriteQueue[Req] = WriteQueue(max_batch=10, bulk_batch=10)
    first, second, third = (Req(i, f"m{i}", False, False) for i in range(3))
    for request in (first, second, third):
        queue.push(request)
    assert queue.take() == [first, second, third]
    later = Req(3, "m1", False, False)
    queue.push(later)
    wake = Req(4, "w", True, True)
    assert queue.push(wake)
    assert queue.cut_in([second, third], 9) == [wake]
    assert not queue.push(Req(5, "m2", True, True)), "third is queued again: a post of its key waits for it"
    assert [r.n for r in queue.take()] == [1, 2, 3, 5]


def test_an_urgent_request_without_a_key_waits_its_turn() -> None:
    queue: WriteQueue[Req] = WriteQueue(max_batch=10, bulk_batch=10)
    bulk = Req(0, "m1", False, False)
    keyless_urgent = Req(1, None, True, True)
    queue.push(bulk)
    assert not queue.push(keyless_urgent)
    assert queue.take() == [bulk, keyless_urgent]


def test_bounds_below_one_are_refused() -> None:
    with pytest.raises(InvalidArgumentError, match="at least 1"):
        WriteQueue(max_batch=0)
    with pytest.raises(InvalidArgumentError, match="at least 1"):
        WriteQueue(bulk_batch=0)
