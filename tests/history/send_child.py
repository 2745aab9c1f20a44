"""Sends of agents on a durable hub, run as a child process by ``test_crash.py`` and
SIGKILLed at a crash point armed through the environment (``ORKEON_TEST_HOOKS=1``,
``ORKEON_TEST_SEND_FAIL_AFTER=<point>``, ``ORKEON_TEST_SEND_FAIL_NTH=<n>``).

Usage::

    python tests/history/send_child.py DB post|reply|keyed-reply|uow|topic|staged N
    python tests/history/send_child.py DB --recover

``post``: agent a/alice posts N messages to agent://b/bob (nobody consumes them).
``reply``: a/alice sends N requests to agent://b/desk, b/bob answers each (``keyed-reply``:
with the idempotency key ``answer-<i>``); each accepted reply prints its correlation id too.
``uow``: N units of work of a/alice each post one message to agent://b/bob.
``topic``: a/alice posts N messages to topic://news (a subscriber of crew c reads them).
``staged``: a/alice sends N posts through the intent protocol of
:mod:`orkeon_actors.history.intents`, with a materialiser standing in for a remote
recipient (its copy commits in a transaction of its own, idempotent by message id).
Each completed call prints ``ACCEPTED <message id>``. ``--recover`` boots the store
(resuming what the last run left), waits for the outbox, makes one more operation of
each sender, and prints ``RESULT <json>``.
"""

from __future__ import annotations

import json
import sys
import threading

import apsw

import orkeon_actors as ok
from orkeon_actors.history.endpoint import endpoint_of, parse_sender
from orkeon_actors.history.intents import resume, send_through
from orkeon_actors.history.records import SendKind, SentIntent
from orkeon_actors.hub.port import CallerContext
from orkeon_actors.store import faults, mailboxes
from orkeon_actors.store.durable_hub import SqliteEventHub

BOB = "agent://b/bob"
DESK = "agent://b/desk"
_lock = threading.Lock()


def emit(line: str) -> None:
    with _lock:
        sys.stdout.write(line + "\n")
        sys.stdout.flush()


def _hub(rt: ok.Runtime) -> SqliteEventHub:
    assert isinstance(rt.hub, SqliteEventHub)
    return rt.hub


class MailboxCopy:
    """A :class:`~orkeon_actors.history.intents.Materialiser` whose "remote" copy is a
    row of the recipient's mailbox, committed on its own (INSERT OR IGNORE by id)."""

    def __init__(self, hub: SqliteEventHub) -> None:
        self.hub = hub

    def materialise(self, intent: SentIntent) -> None:
        message = intent.message
        assert message.target_mailbox is not None
        address = str(message.target_mailbox)

        def work(conn: apsw.Connection) -> None:
            params = mailboxes.insert_params(address, message)
            conn.execute(
                "INSERT OR IGNORE INTO mailboxes (mailbox_address, message_id, payload, metadata, received_at, "
                "topic, source_crew_id, source_agent_id, target_crew_id, correlation_id, schema_id, seq, "
                "published_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (*params, self.hub.next_seq(), params[4]),
            )

        self.hub.writer.execute(work)
        faults.hit("send.recipient_materialised")


def _staged_intent(hub: SqliteEventHub, i: int) -> SentIntent:
    alice = parse_sender("agent://a/alice")
    to = ok.MailboxAddress.parse(BOB)
    message = hub.stamp(
        CallerContext(ok.CrewId("a"), ok.AgentId("alice")), "_system.post", {"i": i}, None, to.crew_id, to
    )
    return SentIntent(SendKind.POST, alice, endpoint_of(to), f"staged-{i}", message, hub.sent.now_ms())


def run(db: str, mode: str, count: int) -> None:
    with ok.Runtime.start(store=db) as rt:
        hub = _hub(rt)
        hub.register_mailbox(BOB)
        alice = hub.bind("a", "alice")
        emit("READY")
        if mode == "staged":
            copy = MailboxCopy(hub)
            for i in range(count):
                emit(f"ACCEPTED {send_through(hub.sent, copy, _staged_intent(hub, i)).id}")
        elif mode == "topic":
            listener = hub.bind("c").subscribe("news")
            for i in range(count):
                emit(f"ACCEPTED {alice.post('topic://news', {'i': i}).id}")
                assert [m.id for m in listener.drain()], "the topic post reached no subscriber"
        elif mode == "post":
            for i in range(count):
                emit(f"ACCEPTED {alice.post(BOB, {'i': i}).id}")
        elif mode == "uow":
            for i in range(count):
                with hub.unit_of_work("a", "alice") as uow:
                    message = uow.post(BOB, {"i": i})
                emit(f"ACCEPTED {message.id}")
            pause = threading.Event()
            while hub.outbox_records(pending_only=True):
                pause.wait(0.005)
        else:
            desk = hub.register_mailbox(DESK)
            bob = hub.bind("b", "bob")

            def serve() -> None:
                with desk.reader() as reader:
                    for _ in range(count):
                        request = reader.receive()
                        assert request.correlation_id is not None
                        key = f"answer-{request.json()['i']}" if mode == "keyed-reply" else None
                        answer = bob.reply(request.correlation_id, {"re": request.json()}, idempotency_key=key)
                        emit(f"ACCEPTED {answer.id} {request.correlation_id}")

            server = threading.Thread(target=serve, daemon=True)
            server.start()
            for i in range(count):
                alice.send(DESK, {"i": i}, timeout=30)
            server.join(30)
    emit("DONE")


def recover(db: str) -> None:
    with ok.Runtime.start(store=db) as rt:
        hub = _hub(rt)
        hub.register_mailbox(BOB)
        pause = threading.Event()
        while hub.outbox_records(pending_only=True):
            pause.wait(0.005)
        if hub.sent.pending(parse_sender("agent://a/alice")):
            emit(f"RESUMED {resume(hub.sent, MailboxCopy(hub), parse_sender('agent://a/alice'))}")
        booted = {who: hub.bind(*who.split("/")).sent().coverage.state.value for who in ("a/alice", "b/bob")}
        for who in ("a/alice", "b/bob"):
            hub.bind(*who.split("/")).post(BOB, "next operation")
        result = {
            "after_boot": booted,
            "sent": {
                who: [r.message_id for r in hub.bind(*who.split("/")).sent().rows][:-1] for who in ("a/alice", "b/bob")
            },
            "coverage": {who: hub.bind(*who.split("/")).sent().coverage.state.value for who in ("a/alice", "b/bob")},
            "verify": {who: hub.verify_sent(f"agent://{who}").ok for who in ("a/alice", "b/bob")},
            "bob_mailbox": [m.id for m in hub.kept_messages(BOB)][:-2],
        }
    emit("RESULT " + json.dumps(result))


def main() -> None:
    if sys.argv[2] == "--recover":
        recover(sys.argv[1])
    else:
        run(sys.argv[1], sys.argv[2], int(sys.argv[3]))


if __name__ == "__main__":
    main()
