"""Helpers shared by the actor runtime tests."""

from __future__ import annotations

import threading
from typing import Any

import pykka


class Recording(pykka.Actor):
    """Mixin for a test actor: records each message it is told and the thread that
    handled it, where its ``on_start`` ran, and how many threads ran it at once.
    Answers ``"started?"``, ``"started_on"``, ``"seen"``, ``"threads"``, ``"max_running"``."""

    def __init__(self) -> None:
        super().__init__()
        self.seen: list[Any] = []
        self.threads: list[int] = []
        self.started_on: int | None = None
        self.running = 0
        self.max_running = 0
        self.lock = threading.Lock()

    def on_start(self) -> None:
        self.started_on = threading.get_ident()

    def on_receive(self, message: Any) -> Any:
        with self.lock:
            self.running += 1
            self.max_running = max(self.max_running, self.running)
        try:
            if message == "started?":
                return self.started_on is not None
            if message == "started_on":
                return self.started_on
            if message == "seen":
                return list(self.seen)
            if message == "threads":
                return list(self.threads)
            if message == "max_running":
                return self.max_running
            self.seen.append(message)
            self.threads.append(threading.get_ident())
            return None
        finally:
            with self.lock:
                self.running -= 1


def assert_each_senders_messages_in_order_once(ref: pykka.ActorRef[Any], counts: list[int]) -> None:
    """``len(counts)`` threads tell ``ref`` at once, sender ``s`` the messages ``(s, 0)``
    to ``(s, counts[s] - 1)``. The actor (a recorder answering ``"seen"`` with what it
    received and ``"max_running"`` with the most threads that ran it at once) got each
    message once, each sender's in order, one thread at a time."""

    def send(sender: int, count: int) -> None:
        for i in range(count):
            ref.tell((sender, i))

    threads = [threading.Thread(target=send, args=(s, c)) for s, c in enumerate(counts)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    seen = ref.ask("seen", timeout=10)
    assert sorted(seen) == sorted((s, i) for s, c in enumerate(counts) for i in range(c))
    for sender, count in enumerate(counts):
        assert [i for s, i in seen if s == sender] == list(range(count))
    assert ref.ask("max_running", timeout=10) == 1
