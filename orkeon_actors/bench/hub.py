"""``orkeon bench hub``: post→receive and send→reply through the in-memory hub, beside
raw pykka ``tell`` and ``ask`` measured in the same run.

* post→receive: one thread posts N messages to a mailbox; another drains it through a
  held reader (consume-and-hold); timed until the last message is received.
* send→reply: one thread sends M requests (each a blocking ``send``); a responder drains
  the mailbox and replies to each.

Targets (issue #2): post→receive ≥ 40% of raw tell, send/reply ≥ 50% of raw ask.

The ``live_cursor_*`` figures (:mod:`orkeon_actors.bench.live_cursor`): what a live
supervised crew's durable cursor costs the publisher on a durable store, beside the
same cursor opted out (``durable=False``).

With the five middleware stages on (issue #4; see :mod:`orkeon_actors.bench.middleware`):

* post→receive through logging (loguru, one discarding sink), telemetry (OTel SDK: spans
  to an in-memory exporter through a batch processor, metrics to an in-memory reader),
  ACL (permissive policy, both crews registered), idempotency and validation. Target:
  ≥ 20% of raw tell in the same run.
* each stage's own cost, in µs per message (its publish and receive halves), timed in
  isolation.
"""

from __future__ import annotations

import statistics
import threading
import time
from collections.abc import Callable, Sequence

from orkeon_actors.bench.baseline import raw_ask_per_second, raw_tell_per_second
from orkeon_actors.bench.context import progress
from orkeon_actors.bench.live_cursor import live_cursor_figures
from orkeon_actors.bench.middleware import STAGE_NAMES, FiveStages, stage_costs_us
from orkeon_actors.bench.registry import BenchResult, register
from orkeon_actors.middleware.pipeline import EventHubMiddleware
from orkeon_actors.runtime import Runtime

__all__ = ["post_receive_per_second", "send_reply_per_second"]


def post_receive_per_second(
    messages: int, middleware: Sequence[EventHubMiddleware] = (), settle: Callable[[], None] | None = None
) -> float:
    """Messages/s posted by one thread and received by another through a held reader;
    ``settle`` (if given) runs after the last receive and before the clock stops, to
    finish work the middleware's sinks deferred (span export, metric collection)."""
    with Runtime.start(middleware=middleware) as rt:
        sender = rt.hub.bind("bench-sender", "producer")
        registration = rt.hub.register_mailbox("agent://bench-receiver/consumer")
        done = threading.Event()

        def consume() -> None:
            with registration.reader() as reader:
                for _ in range(messages):
                    reader.receive()
            done.set()

        consumer = threading.Thread(target=consume, name="bench-consumer")
        consumer.start()
        payload = b'{"n":1}'
        started = time.perf_counter()
        for _ in range(messages):
            sender.post("agent://bench-receiver/consumer", payload)
        done.wait()
        if settle is not None:
            settle()
        elapsed = time.perf_counter() - started
        consumer.join()
        return messages / elapsed


def send_reply_per_second(requests: int, middleware: Sequence[EventHubMiddleware] = ()) -> float:
    with Runtime.start(middleware=middleware) as rt:
        requester = rt.hub.bind("bench-sender", "requester")
        responder_client = rt.hub.bind("bench-receiver", "responder")
        registration = rt.hub.register_mailbox("agent://bench-receiver/responder")

        def respond() -> None:
            with registration.reader() as reader:
                for _ in range(requests):
                    request = reader.receive()
                    assert request.correlation_id is not None
                    responder_client.reply(request.correlation_id, b'{"ok":true}')

        responder = threading.Thread(target=respond, name="bench-responder")
        responder.start()
        started = time.perf_counter()
        for _ in range(requests):
            requester.send("agent://bench-receiver/responder", b'{"n":1}', timeout=30)
        elapsed = time.perf_counter() - started
        responder.join()
        return requests / elapsed


@register("hub")
def bench_hub(quick: bool) -> BenchResult:
    messages = 20_000 if quick else 100_000
    requests = 4_000 if quick else 20_000
    repeats = 2 if quick else 3
    rounds = 3 if quick else 7
    # Interleave the baselines and the hub in rounds and take medians (of the figures and
    # of the per-round ratios): on a shared 2-core machine the GIL's thread hand-offs make
    # any single measurement swing by 2-3x, and a ratio taken within one round cancels
    # most of the drift between rounds.
    staged_messages = 4_000 if quick else 20_000
    samples: dict[str, list[float]] = {"tell": [], "post": [], "ask": [], "send": [], "staged": []}
    with FiveStages() as five:
        for index in range(rounds):
            progress(f"round {index + 1}/{rounds}")
            samples["tell"].append(raw_tell_per_second(messages))
            samples["post"].append(post_receive_per_second(messages))
            samples["ask"].append(raw_ask_per_second(requests))
            samples["send"].append(send_reply_per_second(requests))
            samples["staged"].append(post_receive_per_second(staged_messages, five.stages, settle=five.settle))
            exported = five.take_exported_spans()
            if exported != 2 * staged_messages:
                raise RuntimeError(f"{exported} spans exported for {staged_messages} posts: expected two per message")
        costs = stage_costs_us(five.stages, staged_messages, repeats, five.settle)
        five.take_exported_spans()
    tell, post, ask, send, staged = (statistics.median(samples[k]) for k in ("tell", "post", "ask", "send", "staged"))
    post_ratio = statistics.median(p / t for p, t in zip(samples["post"], samples["tell"], strict=True))
    send_ratio = statistics.median(s / a for s, a in zip(samples["send"], samples["ask"], strict=True))
    staged_ratio = statistics.median(s / t for s, t in zip(samples["staged"], samples["tell"], strict=True))
    figures = {
        "raw_tell_per_s": tell,
        "raw_ask_per_s": ask,
        "post_receive_per_s": post,
        "send_reply_per_s": send,
        "post_receive_vs_tell": post_ratio,
        "send_reply_vs_ask": send_ratio,
        "post_receive_all_stages_per_s": staged,
        "post_receive_all_stages_vs_tell": staged_ratio,
    }
    units = {
        "raw_tell_per_s": "msg/s",
        "raw_ask_per_s": "round trips/s",
        "post_receive_per_s": "msg/s",
        "send_reply_per_s": "round trips/s",
        "post_receive_vs_tell": "ratio (target >= 0.40)",
        "send_reply_vs_ask": "ratio (target >= 0.50)",
        "post_receive_all_stages_per_s": "msg/s",
        "post_receive_all_stages_vs_tell": "ratio (target >= 0.20)",
    }
    for name in (*STAGE_NAMES, "passthrough"):
        figures[f"stage_cost_us_{name}"] = costs[name]
        units[f"stage_cost_us_{name}"] = "µs/msg (publish + receive)"
    progress("publishes to a live crew's durable cursor")
    live, live_units = live_cursor_figures(quick)
    figures.update(live)
    units.update(live_units)
    return BenchResult(
        "hub",
        figures,
        units,
        notes=(
            f"medians of {rounds} interleaved rounds ({messages} posts, {requests} requests without middleware, "
            f"{staged_messages} posts through the five stages, each run timed until its spans were flushed and "
            f"its metrics collected, all {2 * staged_messages} spans exported every round); "
            f"stage costs timed in isolation, minus the pass-through stage, best of {repeats}; "
            "live_cursor_*: publishes on a topic a live supervised crew's cursor reads, on a durable store, "
            "durable (a cursor_events row committed per publish) vs durable=False, 1 and 4 publisher threads"
        ),
    )
