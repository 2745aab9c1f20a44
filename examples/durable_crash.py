"""The durable store survives a SIGKILL: what post() accepted is there after a restart.

The program runs itself twice. The child opens a store, posts ten messages, consumes
three of them in units of work (exactly-once processing), and kills itself with SIGKILL
in the middle of a fourth. The parent then reopens the store: the seven unconsumed
messages are there in order, the fourth first (at-least-once delivery), and the units
of work that committed are not done again.

Run: python examples/durable_crash.py
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

import orkeon_actors as ok
from orkeon_actors.testing import wait_until

BOX = "agent://billing/scorer"


def child(db: str) -> None:
    rt = ok.Runtime.start(store=db)  # synchronous=FULL: a post is on disk before post() returns
    reg = rt.hub.register_mailbox(BOX)
    shop = rt.hub.bind("shop", "web")
    for n in range(10):
        shop.post(BOX, {"invoice": n})
    with reg.reader() as reader:
        for _ in range(3):
            message = reader.receive()
            # A unit of work commits its effects, the message's acknowledgement and its
            # processed_messages row in one transaction.
            with rt.hub.unit_of_work("billing", "scorer", consuming=message) as uow:  # type: ignore[attr-defined]
                uow.post("agent://billing/ledger", {"booked": message.json()["invoice"]})
        reader.receive()  # the fourth: taken, never acknowledged...
        os.kill(os.getpid(), signal.SIGKILL)  # ...because the process dies right here


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        db = str(Path(tmp) / "state.db")
        with ok.Runtime.start(store=db) as rt:
            rt.hub.register_mailbox("agent://billing/ledger")  # registrations are durable too
        killed = subprocess.run([sys.executable, __file__, "--child", db])
        print("child exit status:", killed.returncode, "(-9: SIGKILL)")

        with ok.Runtime.start(store=db) as rt:
            ledger = rt.hub.register_mailbox("agent://billing/ledger")
            inbox = rt.hub.register_mailbox(BOX)
            # A unit of work's posts go through the outbox: committed with it, delivered just
            # after. Those the crash interrupted are delivered by the restart, in the background.
            wait_until(lambda: not rt.hub.outbox_records(pending_only=True), what="the outbox delivered")  # type: ignore[attr-defined]
            print("booked before the crash:", [m.json()["booked"] for m in _drain(ledger)])
            print("still to process, in order:", [m.json()["invoice"] for m in _drain(inbox)])


def _drain(reg: ok.MailboxRegistration) -> list[ok.Message]:
    with reg.reader() as reader:
        return [reader.receive() for _ in range(reg.depth())]


if __name__ == "__main__":
    if sys.argv[1:2] == ["--child"]:
        child(sys.argv[2])
    else:
        main()
