"""A second process for the concurrency tests of ``test_concurrency.py``.

python tests/store/store_child.py hold DB N   open DB, post N messages, hold it until
                                              a line arrives on stdin, then stop
python tests/store/store_child.py open DB T   open DB waiting up to T seconds for its
                                              lock; print OPENED <depth> or LOCKED <why>
"""

from __future__ import annotations

import sys

import orkeon_actors as ok
from orkeon_actors.errors import StoreLockedError
from orkeon_actors.store import StoreConfig

BOX = "agent://crew/box"


def say(line: str) -> None:
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def hold(db: str, count: int) -> None:
    with ok.Runtime.start(store=db) as rt:
        rt.hub.register_mailbox(BOX)
        client = rt.hub.bind("child", "poster")
        for i in range(count):
            client.post(BOX, i)
            say(f"POSTED {i}")
        say("HOLDING")
        sys.stdin.readline()
    say("STOPPED")


def open_(db: str, timeout: float) -> None:
    try:
        rt = ok.Runtime.start(store=StoreConfig(db, lock_timeout=timeout))
    except StoreLockedError as exc:
        say(f"LOCKED {exc}")
        return
    with rt:
        say(f"OPENED {rt.hub.register_mailbox(BOX).depth()}")


if __name__ == "__main__":
    mode, path, arg = sys.argv[1:4]
    if mode == "hold":
        hold(path, int(arg))
    else:
        open_(path, float(arg))
