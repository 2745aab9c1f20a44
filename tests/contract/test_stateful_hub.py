"""A hypothesis state machine drives the hub with random publish / post / subscribe /
drain / take / timeout / request / reply / wait-on-reply / close sequences and checks
every observation against a plain reference model: nothing lost, nothing duplicated,
FIFO per mailbox and per subscriber, scoping respected, replies accepted exactly once.
"""

from __future__ import annotations

from collections import deque
from pathlib import Path
from tempfile import TemporaryDirectory

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    Bundle,
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

import orkeon_actors as ok
from orkeon_actors.errors import UnknownCorrelationError
from orkeon_actors.hub.routing import topic_matches
from orkeon_actors.testing import wait_until
from tests.conftest import Background
from tests.contract.conftest import CONTRACT_ADAPTERS

CREWS = ["c1", "c2", "c3"]
TOPICS = ["orders.created", "orders.eu.created", "audit.event", "orders"]
PATTERNS = ["orders.*", "orders.#", "#", "audit.event", "*.created"]
MAILBOXES = ["agent://c1/a", "agent://c2/b", "crew://c3"]


class HubMachine(RuleBasedStateMachine):
    adapter = "memory"

    subscriptions = Bundle("subscriptions")
    answered_requests = Bundle("answered")

    @initialize()
    def start(self) -> None:
        self.tmp = TemporaryDirectory()
        self.clock = ok.VirtualClock()
        self.rt = CONTRACT_ADAPTERS[self.adapter](Path(self.tmp.name), self.clock)
        self.hub = self.rt.hub
        self.counter = 0
        self.registrations = {m: self.hub.register_mailbox(m) for m in MAILBOXES}
        self.model_mailboxes: dict[str, deque[int]] = {m: deque() for m in MAILBOXES}
        self.model_subs: list[tuple[ok.Subscription, str, str, deque[int]]] = []
        self.readers: dict[str, ok.MailboxReader] = {}
        self.requests: dict[int, str] = {}  # payload n -> correlation id of a request
        self.recipients: dict[str, str] = {}  # correlation id -> the crew that received it (may reply)
        self.reply_state: dict[str, str] = {}  # correlation -> "pending" | "answered" | "consumed"

    def teardown(self) -> None:
        if hasattr(self, "rt"):
            self.rt.stop()
            self.tmp.cleanup()

    def _next(self) -> int:
        self.counter += 1
        return self.counter

    @rule(target=subscriptions, crew=st.sampled_from(CREWS), pattern=st.sampled_from(PATTERNS))
    def subscribe(self, crew: str, pattern: str) -> int:
        sub = self.hub.bind(crew, "s").subscribe(pattern)
        self.model_subs.append((sub, crew, pattern, deque()))
        return len(self.model_subs) - 1

    @rule(
        crew=st.sampled_from(CREWS),
        topic=st.sampled_from(TOPICS),
        scope=st.sampled_from([None, *CREWS]),
    )
    def publish(self, crew: str, topic: str, scope: str | None) -> None:
        n = self._next()
        self.hub.bind(crew, "p").publish(topic, n, ok.PublishOptions(target_crew_id=scope))
        for _sub, sub_crew, pattern, expected in self.model_subs:
            if topic_matches(pattern, topic) and scope in (None, sub_crew):
                expected.append(n)

    @rule(index=subscriptions)
    def drain(self, index: int) -> None:
        sub, _crew, _pattern, expected = self.model_subs[index]
        got = [m.json() for m in sub.drain()]
        assert got == list(expected)
        expected.clear()

    @rule(crew=st.sampled_from(CREWS), mailbox=st.sampled_from(MAILBOXES))
    def post(self, crew: str, mailbox: str) -> None:
        n = self._next()
        self.hub.bind(crew, "p").post(mailbox, n)
        self.model_mailboxes[mailbox].append(n)

    @rule(mailbox=st.sampled_from(MAILBOXES))
    def open_reader(self, mailbox: str) -> None:
        if mailbox not in self.readers:
            self.readers[mailbox] = self.registrations[mailbox].reader()

    @rule(mailbox=st.sampled_from(MAILBOXES), count=st.integers(min_value=1, max_value=4))
    def reader_take(self, mailbox: str, count: int) -> None:
        reader = self.readers.get(mailbox)
        expected = self.model_mailboxes[mailbox]
        if reader is None:
            return
        for _ in range(min(count, len(expected))):
            got = reader.receive()
            assert got.json() == expected.popleft()
            if got.correlation_id is not None:
                self.requests[got.json()] = got.correlation_id
                self.recipients[got.correlation_id] = str(got.target_crew_id)

    @rule(mailbox=st.sampled_from(MAILBOXES))
    def close_reader(self, mailbox: str) -> None:
        reader = self.readers.pop(mailbox, None)
        if reader is not None:
            reader.close()

    @rule(mailbox=st.sampled_from(MAILBOXES))
    def take(self, mailbox: str) -> None:
        expected = self.model_mailboxes[mailbox]
        if mailbox in self.readers:  # the held reader gets every message: a wait sees none
            job = Background(lambda: self.hub.system.wait_for(ok.WaitOnMailbox(mailbox), 1))
            wait_until(lambda: self.hub.pending_waits()["on_mailbox"] == 1, what="the mailbox wait")
            self.clock.advance(1)
            got = job.get()
            assert isinstance(got, ok.Message) and got.is_timeout
            return
        if expected:
            got = self.hub.system.wait_for(ok.WaitOnMailbox(mailbox), 5)
            assert got.json() == expected.popleft()
            if got.correlation_id is not None:
                self.requests[got.json()] = got.correlation_id
                self.recipients[got.correlation_id] = str(got.target_crew_id)
        else:
            job = Background(lambda: self.hub.system.wait_for(ok.WaitOnMailbox(mailbox), 1))
            wait_until(lambda: self.hub.pending_waits()["on_mailbox"] == 1, what="the mailbox wait")
            self.clock.advance(1)
            got = job.get()
            assert isinstance(got, ok.Message) and got.is_timeout

    @rule(crew=st.sampled_from(CREWS), mailbox=st.sampled_from(MAILBOXES))
    def request(self, crew: str, mailbox: str) -> None:
        n = self._next()
        message = self.hub.bind(crew, "r").request(mailbox, n, timeout=3600)
        assert message.correlation_id is not None
        self.reply_state[message.correlation_id] = "pending"
        self.model_mailboxes[mailbox].append(n)

    @precondition(lambda self: bool(self.requests))
    @rule(target=answered_requests, pick=st.integers(min_value=0, max_value=10_000))
    def reply(self, pick: int) -> str:
        keys = sorted(self.requests)
        correlation = self.requests[keys[pick % len(keys)]]
        state = self.reply_state[correlation]
        responder = self.hub.bind(self.recipients[correlation], "responder")
        if state == "pending":
            responder.reply(correlation, {"answer": correlation})
            self.reply_state[correlation] = "answered"
        else:
            with pytest.raises(UnknownCorrelationError):
                responder.reply(correlation, "again")
        return correlation

    @rule(correlation=answered_requests)
    def wait_reply(self, correlation: str) -> None:
        if self.reply_state[correlation] == "answered":
            got = self.hub.system.wait_for(ok.WaitOnReply(correlation), 5)
            assert got.json() == {"answer": correlation}
            self.reply_state[correlation] = "consumed"
        else:
            with pytest.raises(UnknownCorrelationError):
                self.hub.system.wait_for(ok.WaitOnReply(correlation), 5)

    @rule(mailbox=st.sampled_from(MAILBOXES))
    def close_and_reopen(self, mailbox: str) -> None:
        self.readers.pop(mailbox, None)
        leftovers = [m.json() for m in self.registrations[mailbox].close()]
        assert leftovers == list(self.model_mailboxes[mailbox])
        self.model_mailboxes[mailbox].clear()
        self.registrations[mailbox] = self.hub.register_mailbox(mailbox)

    @invariant()
    def depths_match(self) -> None:
        if hasattr(self, "registrations"):
            for mailbox, registration in self.registrations.items():
                assert registration.depth() == len(self.model_mailboxes[mailbox])


EXAMPLES = {"amqp": 15, "amqp-xhost": 15}
"""Sequences run on the broker's adapters, where each starts its own hosts (three for
``amqp-xhost``: seconds each); 15 of 30 steps still take every rule there many times.
The in-process adapters run 40 (``EXAMPLES_IN_PROCESS``)."""

EXAMPLES_IN_PROCESS = 40


@pytest.mark.parametrize("adapter_name", sorted(CONTRACT_ADAPTERS))
def test_hub_state_machine(adapter_name: str) -> None:
    machine = type(f"HubMachine_{adapter_name}", (HubMachine,), {"adapter": adapter_name})
    run_state_machine_as_test(
        machine,
        settings=settings(
            max_examples=EXAMPLES.get(adapter_name, EXAMPLES_IN_PROCESS),
            stateful_step_count=30,
            deadline=None,
            suppress_health_check=[HealthCheck.too_slow],
        ),
    )
