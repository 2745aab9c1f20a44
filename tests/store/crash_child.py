"""A crew on a durable hub, run as a child process by ``test_crash.py`` and killed.

Usage::

    python tests/store/crash_child.py DB --produce N [--kill WHERE:NTH]
    python tests/store/crash_child.py DB --recover

A producer posts ``N`` messages to ``agent://crew/worker`` (printing ``ACCEPTED <id>``
once each ``post`` returned); the crew's handler consumes them through units of work:
each one appends the message id to the crew snapshot, posts ``{"id": ...}`` to
``agent://sink/out`` and publishes it retained as ``crew.last``, through the outbox,
atomically. ``--kill WHERE:NTH`` SIGKILLs this
process the NTH time it reaches WHERE: a store fault point (``writer.before_commit``,
``outbox.mid_dispatch``, ...), ``accept`` (right after a post was acknowledged) or
``handle`` (mid-handle: effects recorded, unit of work not committed).

``--recover`` produces nothing: it drains what the last run left, waits for the outbox,
and prints ``RESULT <json>`` with the crew's processed ids and the sink's message ids.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import threading

import orkeon_actors as ok
from orkeon_actors.store import faults
from orkeon_actors.store.durable_hub import SqliteEventHub

WORKER = "agent://crew/worker"
SINK = "agent://sink/out"
LAST = ok.PublishOptions(retain_as_last_value=True, last_value_key="crew.last")
_out_lock = threading.Lock()


def emit(line: str) -> None:
    with _out_lock:
        sys.stdout.write(line + "\n")
        sys.stdout.flush()


def processed_ids(hub: SqliteEventHub) -> list[str]:
    record = hub.load_snapshot("crew")
    if record is None:
        return []
    return list(json.loads(record.snapshot)["processed"])


def handle(hub: SqliteEventHub, message: ok.Message, kill: tuple[str, int] | None, handled: list[int]) -> None:
    with hub.unit_of_work("crew", "worker", consuming=message) as uow:
        if uow.already_processed:
            emit(f"DUPLICATE {message.id}")
            return
        processed = [*processed_ids(hub), message.id]
        uow.save_snapshot({"processed": processed}, mode="sequential", schema_version=1)
        uow.post(SINK, {"id": message.id})
        uow.publish("crew.progress", {"id": message.id}, LAST)
        handled[0] += 1
        if kill is not None and kill[0] == "handle" and handled[0] == kill[1]:
            os.kill(os.getpid(), signal.SIGKILL)
    emit(f"PROCESSED {message.id}")


def produce(hub: SqliteEventHub, count: int, kill: tuple[str, int] | None) -> None:
    producer = hub.bind("producer", "p")
    for i in range(count):
        message = producer.post(WORKER, {"i": i})
        emit(f"ACCEPTED {message.id}")
        if kill is not None and kill[0] == "accept" and i + 1 == kill[1]:
            os.kill(os.getpid(), signal.SIGKILL)


def run(db: str, count: int, kill: tuple[str, int] | None) -> None:
    if kill is not None and kill[0] not in ("accept", "handle"):
        faults.kill_at(kill[0], kill[1])
    with ok.Runtime.start(store=db) as rt:
        hub = rt.hub
        assert isinstance(hub, SqliteEventHub)
        hub.register_mailbox(SINK)
        work = hub.register_mailbox(WORKER)
        emit("READY")
        producer = threading.Thread(target=produce, args=(hub, count, kill), daemon=True)
        producer.start()
        handled = [0]
        with work.reader() as reader:
            for _ in range(count):
                handle(hub, reader.receive(), kill, handled)
        producer.join()
    emit("DONE")


def recover(db: str) -> None:
    with ok.Runtime.start(store=db) as rt:
        hub = rt.hub
        assert isinstance(hub, SqliteEventHub)
        hub.register_mailbox(SINK)
        work = hub.register_mailbox(WORKER)
        handled = [0]
        with work.reader() as reader:
            while work.depth() > 0:
                handle(hub, reader.receive(), None, handled)
        pause = threading.Event()
        while hub.outbox_records(pending_only=True):
            pause.wait(0.005)
    # Read the outcome as the next boot sees it: from the file alone.
    with ok.Runtime.start(store=db) as rt:
        hub = rt.hub
        assert isinstance(hub, SqliteEventHub)
        last = hub.system.get_last_value("crew.last")
        result = {
            "processed": processed_ids(hub),
            "sink": [message.json()["id"] for message in hub.kept_messages(SINK)],
            "worker_left": [message.id for message in hub.kept_messages(WORKER)],
            "last_value": None if last is None else last.json()["id"],
        }
    emit("RESULT " + json.dumps(result))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("db")
    parser.add_argument("--produce", type=int, default=0)
    parser.add_argument("--kill", default=None, help="WHERE:NTH")
    parser.add_argument("--recover", action="store_true")
    args = parser.parse_args()
    if args.recover:
        recover(args.db)
        return
    kill = None
    if args.kill:
        where, nth = args.kill.rsplit(":", 1)
        kill = (where, int(nth))
    run(args.db, args.produce, kill)


if __name__ == "__main__":
    main()
