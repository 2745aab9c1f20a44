"""Byte flips in a real store file: opening it is a typed error or a correct open.

A store holding accepted (acknowledged) posts is written once; each example flips a few
bytes of a copy and opens it. The outcome is a ``StoreError`` (of any kind), or an open
in which every accepted message is still there to read; never a raw exception.
SQLite keeps no checksums, so a flip inside a payload's bytes can change that payload;
what must not happen is a message that silently goes missing.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

import orkeon_actors as ok
from orkeon_actors.errors import StoreCorruptError, StoreError
from tests.security.conftest import FUZZ

MAILBOX = "agent://c/a"
ACCEPTED = 20


@pytest.fixture(scope="module")
def pristine(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, set[str]]]:
    directory = Path(tmp_path_factory.mktemp("store"))
    path = directory / "state.db"
    ids: set[str] = set()
    with ok.Runtime.start(store=str(path)) as rt:
        rt.hub.register_mailbox(MAILBOX)
        client = rt.hub.bind("c", "b")
        for n in range(ACCEPTED):
            ids.add(str(client.post(MAILBOX, {"n": n}).id))
    assert not (directory / "state.db-wal").exists() or (directory / "state.db-wal").stat().st_size == 0
    yield path, ids
    shutil.rmtree(directory, ignore_errors=True)


def _open_and_read(path: Path) -> set[str]:
    with ok.Runtime.start(store=str(path)) as rt:
        reg = rt.hub.register_mailbox(MAILBOX)
        return {str(m.id) for m in rt.hub.kept_messages(MAILBOX)} | {  # type: ignore[attr-defined]
            str(m.id) for m in reg.close()
        }


@settings(FUZZ)
@given(
    flips=st.lists(st.tuples(st.integers(min_value=0), st.integers(min_value=1, max_value=255)), min_size=1, max_size=4)
)
@example(flips=[(18, 1)])  # SQLite's write version 2 -> 3: the file would open read-only
@example(flips=[(19, 4)])  # the read version: SQLite would refuse to read it
def test_a_flipped_store_is_a_typed_error_or_keeps_every_accepted_message(
    pristine: tuple[Path, set[str]], tmp_path_factory: pytest.TempPathFactory, flips: list[tuple[int, int]]
) -> None:
    source, ids = pristine
    damaged = bytearray(source.read_bytes())
    for position, mask in flips:
        damaged[position % len(damaged)] ^= mask
    path = Path(tmp_path_factory.mktemp("flip")) / "state.db"
    path.write_bytes(bytes(damaged))
    try:
        found = _open_and_read(path)
    except StoreError:
        return
    assert ids <= found


@pytest.mark.parametrize("offset", [18, 19])
def test_a_damaged_format_version_is_a_corrupt_store_left_untouched(
    pristine: tuple[Path, set[str]], tmp_path: Path, offset: int
) -> None:
    damaged = bytearray(pristine[0].read_bytes())
    damaged[offset] = 3
    path = tmp_path / "state.db"
    path.write_bytes(bytes(damaged))
    with pytest.raises(StoreCorruptError, match=r"bytes 18-19.*restore it from a backup"):
        ok.Runtime.start(store=str(path))
    assert path.read_bytes() == bytes(damaged)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["state.db"]
