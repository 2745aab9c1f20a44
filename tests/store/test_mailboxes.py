"""Durable mailboxes: kept before post returns, FIFO across restarts, acknowledged
consumption (at-least-once), registration that outlives the process."""

from __future__ import annotations

from pathlib import Path

import apsw
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import orkeon_actors as ok
from orkeon_actors.errors import MailboxNotFoundError, StoreWriteError
from orkeon_actors.store import StoreConfig, faults, mailboxes
from tests.conftest import Background
from tests.store.conftest import Opener, PausedHandOver, drain, durable

BOX = "agent://crew/worker"


def test_a_post_is_in_the_mailboxes_table_before_post_returns(open_store: Opener, store_path: Path) -> None:
    rt = open_store()
    rt.hub.register_mailbox(BOX)
    message = rt.hub.bind("sender", "s").post(BOX, {"n": 1})
    outsider = apsw.Connection(str(store_path), flags=apsw.SQLITE_OPEN_READONLY)
    try:
        rows = list(outsider.execute("SELECT message_id, payload FROM mailboxes WHERE mailbox_address = ?", (BOX,)))
    finally:
        outsider.close()
    assert rows == [(message.id, b'{"n":1}')]


def test_fifo_100_messages_posted_in_quick_succession(open_store: Opener) -> None:
    rt = open_store()
    reg = rt.hub.register_mailbox(BOX)
    sender = rt.hub.bind("sender", "s")
    for i in range(100):
        sender.post(BOX, i)
    with reg.reader() as reader:
        assert [reader.receive().json() for _ in range(100)] == list(range(100))


def test_fifo_100_messages_across_a_restart(open_store: Opener) -> None:
    rt = open_store()
    rt.hub.register_mailbox(BOX)
    sender = rt.hub.bind("sender", "s")
    sent = [sender.post(BOX, i).id for i in range(100)]
    rt.stop()

    rt = open_store()
    reg = rt.hub.register_mailbox(BOX)
    assert reg.depth() == 100
    with reg.reader() as reader:
        received = [reader.receive() for _ in range(100)]
    assert [m.id for m in received] == sent
    assert [m.json() for m in received] == list(range(100))
    assert {m.source_crew_id for m in received} == {"sender"}


def test_a_restart_keeps_what_was_not_consumed_in_order(open_store: Opener) -> None:
    rt = open_store()
    reg = rt.hub.register_mailbox(BOX)
    sender = rt.hub.bind("sender", "s")
    for i in range(100):
        sender.post(BOX, i)
    with reg.reader() as reader:
        assert [reader.receive().json() for _ in range(40)] == list(range(40))
    rt.stop()

    rt = open_store()
    assert drain(rt.hub.register_mailbox(BOX)) == list(range(40, 100))


def test_a_clean_stop_acknowledges_what_the_consumer_was_handed(open_store: Opener) -> None:
    rt = open_store()
    rt.hub.register_mailbox(BOX)
    client = rt.hub.bind("crew", "worker")
    for i in range(3):
        client.post(BOX, i)
    assert client.wait_for(ok.WaitOnMailbox(BOX), 5).json() == 0
    rt.stop()  # the consumer never came back, but a clean stop acknowledges what it was handed

    rt = open_store()
    reg = rt.hub.register_mailbox(BOX)
    assert drain(reg) == [1, 2]


@pytest.mark.parametrize("outcome", ["timeout", "cancel"])
def test_the_next_receive_attempt_acknowledges_whatever_its_outcome(open_store: Opener, outcome: str) -> None:
    rt = open_store()
    hub = durable(rt)
    reg = hub.register_mailbox(BOX)
    client = hub.bind("crew", "worker")
    client.post(BOX, "only")
    assert client.wait_for(ok.WaitOnMailbox(BOX), 5).json() == "only"
    if outcome == "timeout":
        assert client.wait_for(ok.WaitOnMailbox(BOX), 0.05).is_timeout
    else:
        tok = ok.CancelToken()
        tok.cancel()
        with pytest.raises(ok.errors.CancelledError):
            with reg.reader() as reader:
                reader.receive(cancel=tok)
    hub.writer.execute(lambda conn: None)  # every queued acknowledgement is committed before this
    assert hub.kept_messages(BOX) == []


def test_a_message_handed_out_before_a_crash_is_redelivered(open_store: Opener, store_path: Path) -> None:
    """At-least-once: without a clean stop (a kill), the handed message comes again."""
    import subprocess
    import sys
    import textwrap

    child = textwrap.dedent(
        f"""
        import os, signal, orkeon_actors as ok
        rt = ok.Runtime.start(store={str(store_path)!r})
        rt.hub.register_mailbox({BOX!r})
        client = rt.hub.bind("crew", "worker")
        for i in range(3):
            client.post({BOX!r}, i)
        print(client.wait_for(ok.WaitOnMailbox({BOX!r}), 5).id, flush=True)
        os.kill(os.getpid(), signal.SIGKILL)
        """
    )
    done = subprocess.run([sys.executable, "-c", child], capture_output=True, text=True, timeout=60)
    assert done.returncode == -9, done.stderr
    first_id = done.stdout.strip()
    rt = open_store()
    reg = rt.hub.register_mailbox(BOX)
    again = rt.hub.bind("crew", "worker").wait_for(ok.WaitOnMailbox(BOX), 5)
    assert str(again.id) == first_id, "at-least-once: redelivered, with its original id"
    assert drain(reg) == [1, 2]


def test_explicit_acknowledgement(open_store: Opener) -> None:
    rt = open_store()
    hub = durable(rt)
    hub.register_mailbox(BOX)
    client = hub.bind("crew", "worker")
    client.post(BOX, "a")
    client.post(BOX, "b")
    message = client.wait_for(ok.WaitOnMailbox(BOX), 5)
    hub.acknowledge(message)
    hub.acknowledge(message)  # twice is harmless
    rt.stop()

    rt = open_store()
    assert drain(rt.hub.register_mailbox(BOX)) == ["b"]


def test_deferred_acknowledgement_keeps_a_crews_consumed_rows_until_their_owner_deletes_them(
    open_store: Opener,
) -> None:
    rt = open_store()
    hub = durable(rt)
    ledger = hub.defer_acks("crew")
    reg = hub.register_mailbox(BOX)
    other = hub.register_mailbox("agent://other/worker")  # not deferred: acknowledged as usual
    client = hub.bind("sender", "s")
    for i in range(3):
        client.post(BOX, i)
        client.post("agent://other/worker", i)
    consumed = [hub.bind("crew", "worker").wait_for(ok.WaitOnMailbox(BOX), 5) for _ in range(3)]
    assert drain(other) == [0, 1, 2]
    hub.park_mailbox(reg)  # coming back and parking acknowledge nothing for a deferring crew
    assert ledger.view() == tuple((BOX, str(m.id)) for m in consumed)
    rt.stop()

    rt = open_store()
    hub = durable(rt)
    assert [m.json() for m in hub.kept_messages(BOX)] == [0, 1, 2]  # redelivered after a restart
    assert hub.kept_messages("agent://other/worker") == []
    hub.writer.execute(lambda conn: mailboxes.delete_messages(conn, ledger.view()))  # the owner's commit
    ledger.acknowledged(ledger.view())
    assert hub.kept_messages(BOX) == [] and len(ledger) == 0


def test_posts_to_a_registered_mailbox_are_kept_while_nobody_holds_it(open_store: Opener) -> None:
    rt = open_store()
    rt.hub.register_mailbox(BOX)
    rt.stop()

    rt = open_store()
    hub = durable(rt)
    assert ok.MailboxAddress.parse(BOX) in hub.durable_mailboxes
    sender = hub.bind("sender", "s")
    sender.post(BOX, "while-away")
    with pytest.raises(MailboxNotFoundError):
        sender.post("agent://crew/never-registered", "x")
    assert drain(hub.register_mailbox(BOX)) == ["while-away"]


def test_closing_a_registration_returns_and_forgets_its_messages(open_store: Opener) -> None:
    rt = open_store()
    reg = rt.hub.register_mailbox(BOX)
    sender = rt.hub.bind("sender", "s")
    for i in range(3):
        sender.post(BOX, i)
    assert [m.json() for m in reg.close()] == [0, 1, 2]
    with pytest.raises(MailboxNotFoundError):
        sender.post(BOX, "late")
    rt.stop()

    rt = open_store()
    with pytest.raises(MailboxNotFoundError):
        rt.hub.bind("sender", "s").post(BOX, "after restart")
    assert rt.hub.register_mailbox(BOX).depth() == 0


def test_a_send_request_is_kept_like_a_post(open_store: Opener) -> None:
    rt = open_store()
    hub = durable(rt)
    hub.register_mailbox(BOX)
    request = hub.bind("asker", "a").request(BOX, {"q": 1}, timeout=30)
    kept = hub.kept_messages(BOX)
    assert [m.id for m in kept] == [request.id]
    assert kept[0].correlation_id == request.correlation_id


# -- a property: any interleaving of posts, consumption and restarts ------------------

_OPS = st.lists(
    st.one_of(
        st.tuples(st.just("post"), st.integers(0, 10_000)),
        st.tuples(st.just("take_reader"), st.none()),
        st.tuples(st.just("take_wait"), st.none()),
        st.tuples(st.just("restart"), st.none()),
    ),
    max_size=14,
)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=_OPS)
def test_posts_consumption_and_restarts_keep_fifo_and_lose_nothing(
    tmp_path_factory: pytest.TempPathFactory, ops: list[tuple[str, int | None]]
) -> None:
    """Model: the kept queue. Whatever a consumer was handed is acknowledged by its
    next receive attempt, by closing its reader, or by the clean stop of a restart, so
    nothing consumed comes back and nothing unconsumed is lost."""
    path = str(tmp_path_factory.mktemp("fifo") / "state.db")
    rt = ok.Runtime.start(store=path)
    try:
        reg = rt.hub.register_mailbox(BOX)
        queue: list[int] = []
        for op, value in ops:
            client = rt.hub.bind("crew", "worker")
            if op == "post":
                assert value is not None
                client.post(BOX, value)
                queue.append(value)
            elif op == "take_reader" and queue:
                with reg.reader() as reader:
                    assert reader.receive().json() == queue.pop(0)
            elif op == "take_wait" and queue:
                assert client.wait_for(ok.WaitOnMailbox(BOX), 5).json() == queue.pop(0)
            elif op == "restart":
                rt.stop()
                rt = ok.Runtime.start(store=path)
                reg = rt.hub.register_mailbox(BOX)
        assert drain(reg) == queue
    finally:
        rt.stop()


def test_system_traffic_is_kept_too(open_store: Opener) -> None:
    rt = open_store()
    rt.hub.register_mailbox(BOX)
    sent = rt.hub.system.post(BOX, "from the hub")
    rt.stop()
    rt = open_store()
    reg = rt.hub.register_mailbox(BOX)
    with reg.reader() as reader:
        kept = reader.receive()
    assert kept.id == sent.id and kept.source_crew_id.is_system and kept.source_agent_id is None


def test_a_post_racing_a_close_is_either_returned_by_the_close_or_refused(
    open_store: Opener, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The close deletes the committed row before the poster handed its message over:
    the poster must be told (never a silent loss), and a new registration starts empty."""
    hub = durable(open_store())
    reg = hub.register_mailbox(BOX)
    paused = PausedHandOver(hub, monkeypatch)
    post = Background(lambda: hub.bind("sender", "s").post(BOX, "racing"))
    assert paused.committed.wait(10)
    assert reg.close() == []
    again = hub.register_mailbox(BOX)
    paused.release.set()
    with pytest.raises(MailboxNotFoundError):
        post.get()
    assert again.depth() == 0 and hub.kept_messages(BOX) == []


def test_the_registry_stays_in_sqlite_and_the_writer_remembers_a_bounded_few(
    open_store: Opener, store_path: Path
) -> None:
    boxes = [f"agent://crew{i}/worker" for i in range(6)]
    rt = open_store()
    for box in boxes:
        rt.hub.register_mailbox(box)
    rt.stop()

    rt = open_store(store=StoreConfig(str(store_path), registry_cache=2))
    hub = durable(rt)
    assert len(hub.mailbox_store.registry) == 0  # nothing of the registry loaded at boot
    sender = hub.bind("sender", "s")
    for box in boxes:
        assert hub.is_registered(box)
        sender.post(box, box)  # every registered address accepts posts, cached or not
    assert len(hub.mailbox_store.registry) == 2
    assert not hub.is_registered("agent://crew/never-registered")
    with pytest.raises(MailboxNotFoundError):
        sender.post("agent://crew/never-registered", "x")
    for box in boxes:
        assert drain(hub.register_mailbox(box)) == [box]


def test_a_closed_registration_refuses_posts_even_when_it_was_cached(open_store: Opener) -> None:
    rt = open_store()
    hub = durable(rt)
    reg = hub.register_mailbox(BOX)
    sender = hub.bind("sender", "s")
    sender.post(BOX, "kept")
    reg.close()
    assert not hub.is_registered(BOX)
    with pytest.raises(MailboxNotFoundError):
        sender.post(BOX, "after close")


def test_a_registration_rolled_back_with_its_transaction_is_forgotten(open_store: Opener) -> None:
    rt = open_store()
    hub = durable(rt)
    address = "agent://crew/rolled-back"

    def fail_commit(point: str) -> None:
        if point == "writer.before_commit":
            raise OSError("injected I/O error")

    faults.install(fail_commit)
    try:
        with pytest.raises(StoreWriteError, match="nothing of it was written"):
            hub.register_mailbox(address)
    finally:
        faults.uninstall()
    assert not hub.is_registered(address)
    with pytest.raises(MailboxNotFoundError):
        hub.bind("sender", "s").post(address, "x")
    with pytest.raises(MailboxNotFoundError):  # the writer's own check, past the pre-check
        hub.writer.execute_in(hub.mailbox_store.insert_group, (address, ()))
