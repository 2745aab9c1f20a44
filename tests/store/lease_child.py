"""Child process of ``test_lease_crash.py``: on a durable store, post three messages,
take the first with a lease, say ``LEASED`` and wait to be killed (``--hold``); or
reopen the store and print what the mailbox holds, in order (``--drain``)."""

from __future__ import annotations

import sys
import threading

import orkeon_actors as ok

BOX = "agent://c/a"


def hold(db: str) -> None:
    rt = ok.Runtime.start(store=db)
    rt.hub.register_mailbox(BOX)
    sender = rt.hub.bind("s", "x")
    for payload in ("first", "second", "third"):
        sender.post(BOX, payload)
    lease = rt.hub.bind("c", "a").lease(BOX, 10)
    second = rt.hub.bind("c", "a").lease  # a second reader comes back while the lease is held
    threading.Thread(target=lambda: second(BOX, ok.FOREVER), daemon=True).start()
    print("LEASED", lease.message.json(), flush=True)
    threading.Event().wait()  # until SIGKILL


def drain(db: str) -> None:
    with ok.Runtime.start(store=db) as rt:
        rt.hub.register_mailbox(BOX)
        reader = rt.hub.bind("c", "a")
        while not (message := reader.wait_for(ok.WaitOnMailbox(BOX), 0.5)).is_timeout:
            print("HELD", message.json(), flush=True)


if __name__ == "__main__":
    {"--hold": hold, "--drain": drain}[sys.argv[2]](sys.argv[1])
