from __future__ import annotations

import os
import threading
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from ulid import ULID

import orkeon_actors as ok
from orkeon_actors.errors import EventHubError, InvalidIdError
from orkeon_actors.model.ids import new_secret_ulid_str, new_ulid_str


def test_crew_and_agent_ids_accept_plain_names() -> None:
    assert ok.CrewId("billing-1") == "billing-1"
    assert ok.AgentId("scorer.v2") == "scorer.v2"
    assert repr(ok.CrewId("billing-1")) == "CrewId('billing-1')"


@pytest.mark.parametrize("bad", ["", "_system", "-x", "a b", "a/b", "x" * 129, "é"])
def test_invalid_crew_ids_are_refused_with_a_hint(bad: str) -> None:
    with pytest.raises(InvalidIdError, match="letters, digits"):
        ok.CrewId(bad)


def test_invalid_id_error_is_a_value_error_and_a_hub_error() -> None:
    with pytest.raises(ValueError):
        ok.AgentId("")
    with pytest.raises(EventHubError):
        ok.AgentId("")


def test_system_crew_is_reserved() -> None:
    assert ok.CrewId.SYSTEM == "_system"
    assert ok.CrewId.SYSTEM.is_system
    assert not ok.CrewId("system").is_system
    with pytest.raises(InvalidIdError):
        ok.CrewId("_system")


def test_new_crew_ids_are_unique_ulids() -> None:
    ids = {ok.CrewId.new() for _ in range(1000)}
    assert len(ids) == 1000
    for crew_id in list(ids)[:10]:
        ULID.from_str(crew_id)


def test_message_ids_are_ulids_increasing_in_mint_order() -> None:
    minted = [new_ulid_str() for _ in range(5000)]
    assert minted == sorted(minted)
    assert len(set(minted)) == len(minted)
    assert all(ULID.from_str(m).milliseconds > 0 for m in minted[:50])


def test_message_id_validates_its_format() -> None:
    good = ok.MessageId.new()
    assert ok.MessageId(str(good).lower()) == good
    with pytest.raises(InvalidIdError, match="ULID"):
        ok.MessageId("not-a-ulid")
    with pytest.raises(InvalidIdError):
        ok.CorrelationId("8" * 26)  # first character above 7 overflows 128 bits


@given(st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789._-", min_size=1, max_size=40))
def test_names_starting_with_alnum_round_trip(name: str) -> None:
    if name[0].isalnum():
        assert str(ok.CrewId(name)) == name
    else:
        with pytest.raises(InvalidIdError):
            ok.CrewId(name)


def test_minted_ulids_decode_to_their_minting_time_with_python_ulid() -> None:
    import time

    before = time.time_ns() // 1_000_000
    minted = [new_ulid_str() for _ in range(3000)]
    after = time.time_ns() // 1_000_000
    for text in minted:
        decoded = ULID.from_str(text)
        assert str(decoded) == text
        assert before <= decoded.milliseconds <= after + 1


@settings(max_examples=10, deadline=None)
@given(threads=st.integers(2, 8), per_thread=st.integers(1, 2_000))
def test_ulids_minted_on_several_threads_at_once_are_unique_and_increase_per_thread(
    threads: int, per_thread: int
) -> None:
    minted: list[list[str]] = [[] for _ in range(threads)]
    start = threading.Barrier(threads)

    def mint(into: list[str]) -> None:
        start.wait(10)
        into.extend(new_ulid_str() for _ in range(per_thread))

    workers = [threading.Thread(target=mint, args=(into,)) for into in minted]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(30)
    every = [ulid for into in minted for ulid in into]
    assert len(set(every)) == threads * per_thread  # no id twice, across threads
    for into in minted:
        assert into == sorted(into) and len(set(into)) == len(into)  # each thread's in mint order


def test_secret_ids_are_valid_ulids_of_their_minting_time_and_never_repeat_across_threads() -> None:
    """Correlation ids read their 80 random bits from a per-thread CSPRNG buffer: every
    id valid, none shared between threads, none repeated across buffer refills."""
    minted: list[list[str]] = [[] for _ in range(4)]

    def mint(out: list[str]) -> None:
        out.extend(new_secret_ulid_str() for _ in range(2_000))  # many refills of 64 ids

    before = time.time()
    threads = [threading.Thread(target=mint, args=(out,)) for out in minted]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    after = time.time()
    every = [i for out in minted for i in out]
    assert len(set(every)) == len(every) == 8_000
    for text in every[::97]:
        decoded = ULID.from_str(str(ok.CorrelationId(text)))
        assert before - 0.002 <= decoded.timestamp <= after + 0.002
    randomness = {i[10:] for i in every}
    assert len(randomness) == len(every)  # the 80 random bits differ too, not only the time


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_a_forked_child_never_mints_its_parents_secret_ids() -> None:
    new_secret_ulid_str()  # the parent's buffer holds 63 unused ids
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: mint what the parent's buffer would have given, report, exit
        os.close(read)
        os.write(write, ",".join(new_secret_ulid_str() for _ in range(63)).encode())
        os._exit(0)
    os.close(write)
    with os.fdopen(read) as pipe:
        child = set(pipe.read().split(","))
    os.waitpid(pid, 0)
    parent = {new_secret_ulid_str() for _ in range(63)}
    assert len(child) == 63
    assert {i[10:] for i in child}.isdisjoint({i[10:] for i in parent})


def test_message_ids_stay_increasing_across_a_carry_into_their_high_random_bits(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Within one millisecond an id is the previous one plus one: past the low 20 bits
    the increment carries into the cached high part, and the order holds."""
    from orkeon_actors.model import ids

    frozen = time.time_ns()
    rand = (0x1234_5678_9ABC_DEF << 20 | 0xFFFFD) << 1  # 3 ids before the low 20 bits wrap
    monkeypatch.setattr(time, "time_ns", lambda: frozen)
    monkeypatch.setattr(os, "urandom", lambda n: rand.to_bytes(n, "big"))
    mint = ids._make_ulid_generator()
    minted = [mint(str) for _ in range(8)]
    assert minted == sorted(minted) and len(set(minted)) == 8
    values = [int(ULID.from_str(m)) & ((1 << 80) - 1) for m in minted]
    assert values == [(rand >> 1) + i for i in range(8)]


def test_secret_ids_use_every_character_of_the_alphabet_evenly() -> None:
    """The 16 random characters of a correlation id are uniform over the 32 Crockford
    characters (80 bits): none missing, none favoured."""
    from collections import Counter

    counts = Counter("".join(new_secret_ulid_str()[10:] for _ in range(4_000)))
    assert len(counts) == 32
    expected = 4_000 * 16 / 32
    assert all(0.85 * expected < count < 1.15 * expected for count in counts.values())
