"""The hub's stateful contract at 100,000 operations, for ``orkeon bench hub``.

The unit suite's state machine (``tests/contract/test_stateful_hub.py``) drives the hub
with short hypothesis-chosen sequences; this drives one hub for 100,000 seeded random
operations of the same kinds (subscribe, publish globally or scoped, post, receive from
a mailbox, drain, close a subscription) and checks every observation against a plain
model as it goes: nothing lost, nothing duplicated, FIFO per mailbox and per
subscriber, scoping (spec §10.1) and AMQP patterns (the reference ``topic_matches``).
A disagreement raises ``AssertionError`` naming the step.
"""

from __future__ import annotations

import random
import shutil
from collections import deque

from orkeon_actors.bench.context import scratch_directory
from orkeon_actors.hub.port import Subscription
from orkeon_actors.hub.routing import topic_matches
from orkeon_actors.model.options import FiniteWaitTimeout, PublishOptions, WaitOnMailbox
from orkeon_actors.runtime import Runtime

__all__ = ["drive_hub"]

CREWS = ["c1", "c2", "c3"]
TOPICS = ["orders.created", "orders.eu.created", "audit.event", "orders"]
PATTERNS = ["orders.*", "orders.#", "#", "audit.event", "*.created"]
MAILBOXES = ["agent://c1/a", "agent://c2/b", "crew://c3"]
MAX_SUBSCRIPTIONS = 24


def _check(rt: Runtime, steps: int, seed: int) -> None:
    rng = random.Random(seed)
    hub = rt.hub
    registrations = {m: hub.register_mailbox(m) for m in MAILBOXES}
    mailboxes: dict[str, deque[int]] = {m: deque() for m in MAILBOXES}
    subscriptions: list[tuple[Subscription, str, str, deque[int]]] = []
    posters = {crew: hub.bind(crew, "p") for crew in CREWS}
    counter = 0
    for step in range(steps):
        kind = rng.random()
        if kind < 0.08 and len(subscriptions) < MAX_SUBSCRIPTIONS:
            crew, pattern = rng.choice(CREWS), rng.choice(PATTERNS)
            subscriptions.append((hub.bind(crew, "s").subscribe(pattern), crew, pattern, deque()))
        elif kind < 0.40:
            counter += 1
            crew, topic, scope = rng.choice(CREWS), rng.choice(TOPICS), rng.choice([None, *CREWS])
            posters[crew].publish(topic, counter, PublishOptions(target_crew_id=scope))
            for _, sub_crew, pattern, model in subscriptions:
                if topic_matches(pattern, topic) and (scope is None or scope == sub_crew):
                    model.append(counter)
        elif kind < 0.65:
            counter += 1
            address = rng.choice(MAILBOXES)
            posters[rng.choice(CREWS)].post(address, counter)
            mailboxes[address].append(counter)
        elif kind < 0.85:
            address = rng.choice(MAILBOXES)
            if mailboxes[address]:
                owner = address.split("//")[1].split("/")[0]
                got = hub.bind(owner, "r").wait_for(WaitOnMailbox(address), FiniteWaitTimeout.of(30))
                expected = mailboxes[address].popleft()
                if got.is_timeout or got.json() != expected:
                    raise AssertionError(f"step {step}: {address} gave {got!r}, the model expected {expected}")
        elif kind < 0.97 and subscriptions:
            sub, _, pattern, model = rng.choice(subscriptions)
            drained = [m.json() for m in sub.drain()]
            if drained != list(model):
                raise AssertionError(f"step {step}: {pattern} drained {drained}, the model expected {list(model)}")
            model.clear()
        elif subscriptions:
            sub, *_ = subscriptions.pop(rng.randrange(len(subscriptions)))
            sub.close()
    for address, model in mailboxes.items():
        left = [m.json() for m in registrations[address].close()]
        if left != list(model):
            raise AssertionError(f"{address} handed back {left}, the model expected {list(model)}")


def drive_hub(steps: int, seed: int = 31) -> int:
    """Run ``steps`` checked operations on a memory hub and on a SQLite hub; returns
    the number of operations checked (raises ``AssertionError`` on a disagreement)."""
    with Runtime.start() as rt:
        _check(rt, steps, seed)
    directory = scratch_directory("orkeon-bench-stateful-")
    try:
        with Runtime.start(store=f"{directory}/stateful.db") as rt:
            _check(rt, steps, seed)
    finally:
        shutil.rmtree(directory, ignore_errors=True)
    return 2 * steps
