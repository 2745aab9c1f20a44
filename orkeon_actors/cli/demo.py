"""``orkeon demo``: the hub on its embedded durable store, then a multi-crew simulation.

Part 1 runs on the SQLite store (``--store PATH``, default a fresh file in a temporary
directory) and shows, in order: a global publish seen by a subscriber, a post to an
agent's mailbox, a send answered by a responder agent running in its own thread, a
retained last value, a finite wait that times out with the hub's WaitTimedOutMessage, a
send nobody answers, and a message that survives a restart of the runtime.

Part 2 runs three crews (sequential, hierarchical, parallel) of scripted agents in one
:class:`~orkeon_actors.sim.Simulation` on a virtual clock and prints their timeline.
"""

from __future__ import annotations

import tempfile
import threading
from pathlib import Path

import orkeon_actors as ok

__all__ = ["run_demo"]


class _Narrator:
    def __init__(self, color: bool) -> None:
        self._color = color
        self._lock = threading.Lock()

    def step(self, title: str) -> None:
        self._print(f"\n{self._bold(title)}")

    def line(self, who: str, text: str) -> None:
        self._print(f"  {self._dim(who.ljust(22))} {text}")

    def _print(self, text: str) -> None:
        with self._lock:
            print(text, flush=True)

    def _bold(self, text: str) -> str:
        return f"\033[1m{text}\033[0m" if self._color else text

    def _dim(self, text: str) -> str:
        return f"\033[36m{text}\033[0m" if self._color else text


def _who(message: ok.Message) -> str:
    agent = f"/{message.source_agent_id}" if message.source_agent_id else ""
    return f"{message.source_crew_id}{agent}"


def run_demo(color: bool = False, store: str | None = None) -> int:
    """Run both parts; 0 when every crew of the simulation completed."""
    say = _Narrator(color)
    with tempfile.TemporaryDirectory(prefix="orkeon-demo-") as scratch:
        path = Path(store) if store else Path(scratch) / "orkeon-demo.db"
        _hub_exchange(say, path)
    if store:
        print(f"\nthe store is kept at {path}: look into it with `orkeon store {path} mailboxes` (or crews, waits)")
    else:
        print("\nthe store was a temporary file and is gone; keep it with `orkeon demo --store PATH`")
    return _simulation(say)


def _hub_exchange(say: _Narrator, path: Path) -> None:
    print(f"orkeon demo, part 1: two crews talk through the event hub (durable store: {path})")
    with ok.Runtime.start(store=str(path)) as rt:
        hub = rt.hub
        planner = hub.bind("orders", "planner")
        scorer = hub.bind("fraud", "scorer")
        scorer_box = hub.register_mailbox("agent://fraud/scorer")

        say.step("1. publish: orders/planner broadcasts on 'orders.created'; fraud/scorer subscribed to 'orders.*'")
        with scorer.subscribe("orders.*") as subscription:
            sent = planner.publish("orders.created", {"order": 42, "amount": 1250})
            say.line("orders/planner", f"published {sent.topic} {sent.json()}")
            for message in subscription.drain():
                say.line("fraud/scorer", f"saw {message.topic} from {_who(message)}: {message.json()}")

        say.step("2. post: a fire-and-forget note into fraud/scorer's mailbox")
        planner.post("agent://fraud/scorer", {"note": "order 42 is from a new customer"})
        note = scorer.wait_for(ok.WaitOnMailbox("agent://fraud/scorer"), ok.FiniteWaitTimeout.of(5))
        say.line("fraud/scorer", f"took from its mailbox: {note.json()} (from {_who(note)})")

        say.step("3. send/reply: orders/planner asks fraud/scorer for a score and waits (timeout 5 s)")

        def respond() -> None:
            with scorer_box.reader() as reader:
                request = reader.receive()
                say.line("fraud/scorer", f"got request {request.json()}, correlation {request.correlation_id}")
                assert request.correlation_id is not None
                scorer.reply(request.correlation_id, {"order": 42, "score": 0.12, "verdict": "ok"})

        responder = threading.Thread(target=respond, name="demo-responder")
        responder.start()
        answer = planner.send("agent://fraud/scorer", {"score_order": 42}, timeout=5)
        responder.join()
        say.line("orders/planner", f"reply: {answer.json()}")

        say.step("4. last value: the planner retains its status; anyone can read it later")
        planner.publish(
            "orders.status",
            {"open_orders": 1},
            ok.PublishOptions(retain_as_last_value=True, last_value_key="orders.status"),
        )
        retained = scorer.get_last_value("orders.status")
        say.line("fraud/scorer", f"last value of 'orders.status': {retained.json() if retained else None}")

        say.step("5. wait with a finite timeout: nobody publishes 'orders.cancelled' within 0.2 s")
        timed_out = planner.wait_for(ok.WaitOnTopic("orders.cancelled"), ok.FiniteWaitTimeout.of(0.2))
        say.line(
            "orders/planner",
            f"wait ended with {timed_out.topic} from {timed_out.source_crew_id} "
            f"(original_topic={timed_out.metadata['original_topic']})",
        )

        say.step("6. send without a reply: the requester gets SendTimeoutError, not a hang")
        try:
            planner.send("agent://fraud/scorer", {"score_order": 43}, timeout=0.2)
        except ok.errors.SendTimeoutError as exc:
            say.line("orders/planner", f"SendTimeoutError: {exc}")
        leftover = scorer_box.close()
        say.line("hub", f"fraud/scorer's mailbox closed; {len(leftover)} unread message(s) handed back")

        say.step("7. durability: a post to the auditor's mailbox, then the runtime stops")
        hub.register_mailbox("agent://audit/auditor")
        kept = planner.post("agent://audit/auditor", {"event": "order 42 approved"})
        say.line("orders/planner", f"posted {kept.id} to agent://audit/auditor; stopping the runtime")
    with ok.Runtime.start(store=str(path)) as rt:
        rt.hub.register_mailbox("agent://audit/auditor")
        again = rt.hub.bind("audit", "auditor").wait_for(ok.WaitOnMailbox("agent://audit/auditor"), 5)
        say.line("audit/auditor", f"after the restart, took {again.id}: {again.json()}")


def _simulation(say: _Narrator) -> int:
    from orkeon_actors.sim import Simulation
    from orkeon_actors.sim.examples import build_hierarchical, build_parallel, build_sequential

    print("\norkeon demo, part 2: three crews of scripted agents, simulated on a virtual clock")
    with Simulation(seed=0) as sim:
        crews = [build(sim) for build in (build_sequential, build_hierarchical, build_parallel)]
        result = sim.run(until=3600)
        print(sim.trace.timeline())
        for crew in crews:
            status, output, failure = result.crews[crew]
            say.line(crew, f"{status.value}: {output if failure is None else failure}")
        print(f"\ndone in {result.virtual_time:g}s of virtual time; runtimes stopped, no thread left behind")
        return 0 if result.all_completed else 1
