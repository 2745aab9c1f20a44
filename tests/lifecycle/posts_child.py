"""The bench's tally crew (``orkeon_actors.bench.bookkeeping``: one agent looping on
``receive_message``, its conversation bounded, its tally of the posts it was given in
its own conversation) run as a child process by ``test_bookkeeping_posts.py``, which
SIGKILLs it mid-run.

Usage::

    python tests/lifecycle/posts_child.py DB START TOTAL EVERY

Boots ``DB`` (spawning the crew and putting it to sleep once if the store does not hold
it yet), then posts ``START .. TOTAL-1``, each with the idempotency key ``post-N`` (a post
committed before a kill is not sent again by the next run) and printing ``POSTED N``
once it returned; after every ``EVERY``-th post it waits until the crew was given it and
puts the crew to sleep. At the end it prints ``STATE <json>`` (the crew's bookkeeping
rows), posts ``"stop"`` and prints ``RESULT <json>``: the crew's tally.
"""

from __future__ import annotations

import json
import sys

import orkeon_actors as ok
from orkeon_actors.bench.bookkeeping import ADDRESS, CREW, STOP, Tally, TallyModel, tally_crew
from orkeon_actors.crew import CrewStatus
from orkeon_actors.lifecycle import CrewSupervisor, LifecycleState
from orkeon_actors.testing import wait_until


def emit(line: str) -> None:
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def main() -> None:
    db, start, total, every = sys.argv[1], *(int(a) for a in sys.argv[2:])
    model = TallyModel()
    rt = ok.Runtime.start(store=db)
    sup = CrewSupervisor(rt, factories={"tally": tally_crew(model)})

    def parked() -> None:
        wait_until(lambda: sup.status(CREW) is CrewStatus.WAITING, timeout=30, what="the crew waiting")

    if sup.state(CREW) is LifecycleState.UNKNOWN:
        sup.spawn("tally", CREW)
        parked()
        assert sup.sleep(CREW) is True
    poster = rt.hub.bind("shop", "desk")
    for n in range(start, total):
        poster.post(ADDRESS, n, idempotency_key=f"post-{n}")
        emit(f"POSTED {n}")
        if (n + 1) % every == 0 or n + 1 == total:
            model.wait_for(n + 1, 30)
            parked()
            assert sup.sleep(CREW) is True
    rows = rt.hub.readers.query(
        "SELECT (SELECT count(*) FROM processed_messages WHERE crew_id = ?1), "
        "(SELECT count(*) FROM mailbox_marks WHERE crew_id = ?1), "
        "(SELECT count(*) FROM mailboxes WHERE mailbox_address = ?2)",
        (CREW, ADDRESS),
    )[0]
    emit("STATE " + json.dumps({"processed": rows[0], "marks": rows[1], "kept": rows[2]}))
    poster.post(ADDRESS, STOP)
    wait_until(lambda: sup.outcome(CREW) is not None, timeout=30, what="the crew finished")
    outcome = sup.outcome(CREW)
    assert outcome is not None
    tally = Tally.parse(str(outcome.result or ""))
    emit("RESULT " + json.dumps(None if tally is None else [tally.count, tally.last, tally.out_of_order]))
    sup.stop()
    rt.stop()


if __name__ == "__main__":
    main()
