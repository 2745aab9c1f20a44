"""The unit of work: processed_messages + state + outbox + acknowledgement, atomically
(§11.2, §11.3); idempotence across restarts; atomicity under an injected failure."""

from __future__ import annotations

import json

import pytest

import orkeon_actors as ok
from orkeon_actors.errors import InvalidArgumentError, MailboxNotFoundError, StoreWriteError
from orkeon_actors.store import CrewState, OutboxState, PendingWaitKind, PendingWaitRecord, faults, outbox
from orkeon_actors.testing import wait_until
from tests.store.conftest import Opener, durable

INBOX = "agent://billing/scorer"
AUDIT = "agent://audit/log"


def _setup(rt: ok.Runtime) -> tuple[ok.MailboxRegistration, ok.MailboxRegistration, ok.Message]:
    inbox = rt.hub.register_mailbox(INBOX)
    audit = rt.hub.register_mailbox(AUDIT)
    message = rt.hub.bind("client", "c").post(INBOX, {"amount": 5})
    return inbox, audit, message


def _take(reg: ok.MailboxRegistration) -> ok.Message:
    with reg.reader() as reader:
        return reader.receive()


def test_commit_writes_state_processed_row_outbox_and_acknowledgement_together(open_store: Opener) -> None:
    rt = open_store()
    hub = durable(rt)
    inbox, audit, _ = _setup(rt)
    message = hub.bind("billing", "scorer").wait_for(ok.WaitOnMailbox(INBOX), 5)
    with hub.unit_of_work("billing", "scorer", consuming=message) as uow:
        assert not uow.already_processed
        uow.save_snapshot({"total": 5}, mode="sequential", schema_version=1)
        sent = uow.post(AUDIT, {"total": 5})
        published = uow.publish("billing.total", {"total": 5})
        assert uow.outgoing == [sent, published]
        assert hub.kept_messages(AUDIT) == [], "nothing leaves before the commit"
    assert sent.source_crew_id == "billing" and sent.source_agent_id == "scorer"
    assert hub.is_processed(message.id, "billing")
    snapshot = hub.load_snapshot("billing")
    assert snapshot is not None and json.loads(snapshot.snapshot) == {"total": 5}
    assert snapshot.state is CrewState.ACTIVE and snapshot.mode == "sequential"
    assert hub.kept_messages(INBOX) == [], "the consumed message is acknowledged by the commit"
    assert _take(audit).id == sent.id
    wait_until(lambda: not hub.outbox_records(pending_only=True), what="the outbox to be dispatched")
    states = {r.message.id: r.state for r in hub.outbox_records()}
    assert states == {sent.id: OutboxState.DISPATCHED, published.id: OutboxState.DISPATCHED}
    assert inbox.depth() == 0


def test_outgoing_publish_reaches_live_subscribers_and_retains(open_store: Opener) -> None:
    rt = open_store()
    hub = durable(rt)
    with hub.bind("watcher", "w").subscribe("billing.*") as subscription:
        with hub.unit_of_work("billing") as uow:
            retained = uow.publish(
                "billing.total", 7, ok.PublishOptions(retain_as_last_value=True, last_value_key="total")
            )
        assert next(subscription).id == retained.id
    wait_until(lambda: hub.system.get_last_value("total") is not None, what="the retained value")
    rt.stop()
    rt = open_store()
    kept = rt.hub.system.get_last_value("total")
    assert kept is not None and kept.id == retained.id and kept.json() == 7


def test_a_message_delivered_twice_is_processed_once_across_restarts(open_store: Opener) -> None:
    rt = open_store()
    hub = durable(rt)
    _, audit, _ = _setup(rt)
    message = hub.bind("billing", "scorer").wait_for(ok.WaitOnMailbox(INBOX), 5)
    with hub.unit_of_work("billing", consuming=message) as uow:
        uow.post(AUDIT, "once")
    with hub.unit_of_work("billing", consuming=message) as uow:
        assert uow.already_processed
        with pytest.raises(InvalidArgumentError, match="already processed"):
            uow.post(AUDIT, "twice")
    rt.stop()

    rt = open_store()
    hub = durable(rt)
    audit = hub.register_mailbox(AUDIT)
    uow = hub.unit_of_work("billing", consuming=message)
    assert uow.already_processed, "idempotence survives the restart"
    assert uow.commit() is False
    other_crew = hub.unit_of_work("fraud", consuming=message)
    assert not other_crew.already_processed, "processed_messages is per crew"
    other_crew.discard()
    assert [m.json() for m in hub.kept_messages(AUDIT)] == ["once"]
    assert audit.depth() == 1


def test_a_race_between_two_units_of_work_applies_one(open_store: Opener) -> None:
    rt = open_store()
    hub = durable(rt)
    _, _, _ = _setup(rt)
    message = hub.bind("billing", "scorer").wait_for(ok.WaitOnMailbox(INBOX), 5)
    first = hub.unit_of_work("billing", consuming=message)
    second = hub.unit_of_work("billing", consuming=message)
    for uow, text in ((first, "first"), (second, "second")):
        uow.save_snapshot({"by": text}, mode="sequential", schema_version=1)
        uow.post(AUDIT, text)
    assert first.commit() is True
    assert second.commit() is False, "the second finds the processed row and applies nothing"
    snapshot = hub.load_snapshot("billing")
    assert snapshot is not None and json.loads(snapshot.snapshot) == {"by": "first"}
    wait_until(lambda: len(hub.kept_messages(AUDIT)) == 1, what="the first post")
    assert [m.json() for m in hub.kept_messages(AUDIT)] == ["first"]


def test_an_injected_failure_mid_transaction_leaves_nothing_half_written(
    open_store: Opener, monkeypatch: pytest.MonkeyPatch
) -> None:
    rt = open_store()
    hub = durable(rt)
    _, _, posted = _setup(rt)
    message = hub.bind("billing", "scorer").wait_for(ok.WaitOnMailbox(INBOX), 5)
    calls = []
    real_insert = outbox.insert_outbox

    def failing_insert(*args: object, **kwargs: object) -> object:
        calls.append(args)
        if len(calls) == 2:  # after the processed row, the snapshot and one outbox row
            raise OSError("injected: disk went away")
        return real_insert(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr("orkeon_actors.store.unit_of_work.insert_outbox", failing_insert)
    uow = hub.unit_of_work("billing", consuming=message)
    uow.save_snapshot({"total": 5}, mode="sequential", schema_version=1)
    uow.post(AUDIT, 1)
    uow.post(AUDIT, 2)
    with pytest.raises(OSError, match="injected"):
        uow.commit()
    assert len(calls) == 2
    assert not hub.is_processed(message.id, "billing")
    assert hub.load_snapshot("billing") is None
    assert hub.outbox_records() == []
    assert [m.id for m in hub.kept_messages(INBOX)] == [posted.id], "still there, to be redelivered"

    monkeypatch.setattr("orkeon_actors.store.unit_of_work.insert_outbox", real_insert)
    retry = hub.unit_of_work("billing", consuming=message)
    assert not retry.already_processed
    retry.save_snapshot({"total": 5}, mode="sequential", schema_version=1)
    assert retry.commit() is True


def test_a_failed_commit_writes_nothing_of_the_whole_batch(open_store: Opener) -> None:
    rt = open_store()
    hub = durable(rt)
    _, _, _ = _setup(rt)
    message = hub.bind("billing", "scorer").wait_for(ok.WaitOnMailbox(INBOX), 5)

    def refuse_commit(point: str) -> None:
        if point == "writer.before_commit":
            raise OSError("injected: fsync failed")

    faults.install(refuse_commit)
    try:
        uow = hub.unit_of_work("billing", consuming=message)
        uow.save_snapshot({"total": 5}, mode="sequential", schema_version=1)
        uow.post(AUDIT, "x")
        with pytest.raises(StoreWriteError, match="rolled back"):
            uow.commit()
    finally:
        faults.uninstall()
    assert not hub.is_processed(message.id, "billing")
    assert hub.load_snapshot("billing") is None
    assert hub.outbox_records() == []
    assert len(hub.kept_messages(INBOX)) == 1


def test_leaving_the_block_with_an_exception_discards(open_store: Opener) -> None:
    rt = open_store()
    hub = durable(rt)
    _, _, _ = _setup(rt)
    message = hub.bind("billing", "scorer").wait_for(ok.WaitOnMailbox(INBOX), 5)
    with pytest.raises(RuntimeError), hub.unit_of_work("billing", consuming=message) as uow:
        uow.post(AUDIT, "never")
        raise RuntimeError("handler bug")
    with pytest.raises(InvalidArgumentError, match="discarded"):
        uow.commit()
    assert hub.outbox_records() == [] and not hub.is_processed(message.id, "billing")


def test_posting_to_an_unknown_mailbox_fails_at_once(open_store: Opener) -> None:
    hub = durable(open_store())
    with hub.unit_of_work("billing") as uow, pytest.raises(MailboxNotFoundError):
        uow.post("agent://nobody/here", 1)


def test_snapshot_and_pending_waits_commit_together_and_completion_deletes_them(open_store: Opener) -> None:
    rt = open_store()
    hub = durable(rt)
    now = rt.clock.now()
    wait = PendingWaitRecord("w1", "billing", PendingWaitKind.ON_TOPIC, now, None, topic="orders.*")
    with hub.unit_of_work("billing") as uow, pytest.raises(InvalidArgumentError, match="belongs to crew"):
        uow.put_pending_wait(PendingWaitRecord("w0", "other", PendingWaitKind.ON_TOPIC, now, None, topic="t"))

    lonely = hub.unit_of_work("billing")
    lonely.put_pending_wait(wait)
    with pytest.raises(InvalidArgumentError, match="no snapshot"):
        lonely.commit()
    assert hub.load_pending_waits("billing") == []

    with hub.unit_of_work("billing") as uow:
        uow.save_snapshot(b"\x00state", mode="graph", schema_version=3, state=CrewState.ASLEEP)
        uow.put_pending_wait(wait)
    assert hub.load_pending_waits("billing") == [wait]
    snapshot = hub.load_snapshot("billing")
    assert snapshot is not None and snapshot.snapshot == b"\x00state" and snapshot.state is CrewState.ASLEEP

    with hub.unit_of_work("billing") as uow:
        uow.delete_pending_wait("w1")
        uow.save_snapshot(b"", mode="graph", schema_version=3, state="Completed")
    assert hub.load_snapshot("billing") is None
    assert hub.load_pending_waits() == []


def test_pending_outbox_rows_are_dispatched_at_boot(open_store: Opener) -> None:
    rt = open_store()
    hub = durable(rt)
    hub.register_mailbox(AUDIT)
    # What a crash between a unit of work's commit and its dispatch leaves: pending rows.
    stamped = [
        hub.stamp(
            ok.CallerContext(ok.CrewId("billing")),
            "_system.post",
            i,
            None,
            ok.CrewId("audit"),
            ok.MailboxAddress.parse(AUDIT),
        )
        for i in range(3)
    ]
    hub.writer.execute(lambda conn: [outbox.insert_outbox(conn, hub.next_seq(), "post", m, None) for m in stamped])
    assert len(hub.outbox_records(pending_only=True)) == 3
    rt.stop()

    rt = open_store()
    hub = durable(rt)
    wait_until(lambda: not hub.outbox_records(pending_only=True), what="boot dispatch")
    audit = hub.register_mailbox(AUDIT)
    with audit.reader() as reader:
        assert [reader.receive().id for _ in range(3)] == [m.id for m in stamped]


def test_an_outbox_post_whose_mailbox_closed_meanwhile_is_marked_failed(open_store: Opener) -> None:
    rt = open_store()
    hub = durable(rt)
    reg = hub.register_mailbox(AUDIT)
    uow = hub.unit_of_work("billing")
    sent = uow.post(AUDIT, 1)
    reg.close()
    uow.commit()
    wait_until(lambda: not hub.outbox_records(pending_only=True), what="the dispatch attempt")
    [record] = hub.outbox_records()
    assert record.message.id == sent.id
    assert record.state is OutboxState.FAILED and record.error is not None and AUDIT in record.error
