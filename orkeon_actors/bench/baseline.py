"""Raw pykka baselines: what one ``tell`` and one ``ask`` cost on this machine, now."""

from __future__ import annotations

import threading
import time

import pykka

__all__ = ["raw_tell_per_second", "raw_ask_per_second"]


class _Counter(pykka.ThreadingActor):
    def __init__(self, expected: int, done: threading.Event) -> None:
        super().__init__()
        self._expected = expected
        self._seen = 0
        self._done = done

    def on_receive(self, message: object) -> object:
        self._seen += 1
        if self._seen == self._expected:
            self._done.set()
        return message


def raw_tell_per_second(messages: int) -> float:
    """Messages/s from one thread ``tell``-ing an actor that counts them, until the
    actor has received the last one."""
    done = threading.Event()
    ref = _Counter.start(messages, done)
    try:
        started = time.perf_counter()
        for i in range(messages):
            ref.tell(i)
        done.wait()
        return messages / (time.perf_counter() - started)
    finally:
        ref.stop()


def raw_ask_per_second(requests: int) -> float:
    """Round trips/s of ``ask`` (tell + the actor completing the caller's future)."""
    ref = _Counter.start(-1, threading.Event())
    try:
        started = time.perf_counter()
        for i in range(requests):
            ref.ask(i)
        return requests / (time.perf_counter() - started)
    finally:
        ref.stop()
