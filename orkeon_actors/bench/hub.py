"""``orkeon bench hub``: post→receive and send→reply through the in-memory hub, beside
raw pykka ``tell`` and ``ask`` and beside autogen-core, measured in the same run.

* post→receive: one thread posts N messages to a mailbox; another drains it through a
  held reader (consume-and-hold); timed until the last message is received.
* send→reply: one thread sends M requests (each a blocking ``send``); a responder drains
  the mailbox and replies to each.

Targets (issue 31, what the hub reached before the security boundaries cost it a
quarter of its one-way rate): post→receive ≥ 0.60 of raw tell, send/reply ≥ 0.75 of
raw ask.

The hub core at 100,000 waits (:mod:`orkeon_actors.bench.hub_scale`): per-wait cost at
100,000 pending over 1,000 pending (≤ 1.5, memory and SQLite hubs), stopping with
100,000 pending waits (< 1 s), the facade's awaited waits at 100,000.

The ``live_cursor_*`` figures (:mod:`orkeon_actors.bench.live_cursor`): what a live
supervised crew's durable cursor costs the publisher on a durable store, beside the
same cursor opted out (``durable=False``).

With the five middleware stages on (issue #16; see :mod:`orkeon_actors.bench.middleware`
for the two profiles):

* production profile (loguru sink at INFO, ``ParentBased(TraceIdRatioBased(0.01))``,
  the §14.2 metrics on): ``post_receive_production_vs_unstaged`` ≥ 0.50 (against
  post→receive with no stage, same round);
* against autogen-core 0.7.5 (the ``bench`` extra) with the same tracer provider:
  request/reply ≥ 1.5x and one-way ≥ 5x, in the production profile and at 100%
  sampling; without autogen-core the peer rows are skipped and the notes say why;
* full fidelity (every DEBUG record formatted, every span exported): reported, not
  targeted, as ``post_receive_all_stages_vs_tell``;
* each stage's own cost, in µs per message (its publish and receive halves), timed in
  isolation, in both profiles; ``stage_cost_us_production_telemetry_metrics`` is what
  the metrics instruments add to the production telemetry stage.
"""

from __future__ import annotations

import statistics
import threading
import time
from collections.abc import Callable, Sequence

from opentelemetry.metrics import NoOpMeterProvider

from orkeon_actors.bench import peer_autogen
from orkeon_actors.bench.baseline import raw_ask_per_second, raw_tell_per_second
from orkeon_actors.bench.context import progress
from orkeon_actors.bench.hub_scale import scale_figures
from orkeon_actors.bench.live_cursor import live_cursor_figures
from orkeon_actors.bench.middleware import (
    FULL,
    PRODUCTION,
    PRODUCTION_FULL_SAMPLING,
    STAGE_NAMES,
    FiveStages,
    stage_costs_us,
)
from orkeon_actors.bench.registry import BenchResult, register
from orkeon_actors.hub.pipeline import EventHubMiddleware
from orkeon_actors.middleware.telemetry import TelemetryMiddleware
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


def send_reply_per_second(
    requests: int, middleware: Sequence[EventHubMiddleware] = (), settle: Callable[[], None] | None = None
) -> float:
    """Round trips/s of blocking ``send`` calls answered by a responder thread;
    ``settle`` (if given) runs after the last reply, before the clock stops."""
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
        if settle is not None:
            settle()
        elapsed = time.perf_counter() - started
        responder.join()
        return requests / elapsed


def _median_ratio(numerators: Sequence[float], denominators: Sequence[float]) -> float:
    return statistics.median(n / d for n, d in zip(numerators, denominators, strict=True))


@register("hub")
def bench_hub(quick: bool) -> BenchResult:
    messages = 20_000 if quick else 100_000
    requests = 4_000 if quick else 20_000
    repeats = 2 if quick else 3
    rounds = 3 if quick else 7
    staged_messages = 4_000 if quick else 20_000
    staged_requests = 1_000 if quick else 4_000
    peer_requests = 500 if quick else 2_000
    peer_messages = 2_000 if quick else 8_000
    skipped = peer_autogen.unavailable()
    # Interleave the baselines, the hub and the peer in rounds and take medians (of the
    # figures and of the per-round ratios): on a shared 2-core machine the GIL's thread
    # hand-offs make any single measurement swing by 2-3x, and a ratio taken within one
    # round cancels most of the drift between rounds.
    samples: dict[str, list[float]] = {}

    def add(key: str, value: float) -> None:
        samples.setdefault(key, []).append(value)

    for index in range(rounds):
        progress(f"round {index + 1}/{rounds}")
        add("tell", raw_tell_per_second(messages))
        add("post", post_receive_per_second(messages))
        add("ask", raw_ask_per_second(requests))
        add("send", send_reply_per_second(requests))
        with FiveStages(FULL) as five:
            add("staged", post_receive_per_second(staged_messages, five.stages, settle=five.settle))
            exported = five.take_exported_spans()
            if exported != 2 * staged_messages:
                raise RuntimeError(f"{exported} spans exported for {staged_messages} posts: expected two per message")
        for profile in (PRODUCTION, PRODUCTION_FULL_SAMPLING):
            with FiveStages(profile) as five:
                add(f"{profile.name}_post", post_receive_per_second(staged_messages, five.stages, settle=five.settle))
                add(f"{profile.name}_send", send_reply_per_second(staged_requests, five.stages, settle=five.settle))
                if skipped is None:
                    provider = five.tracer_provider
                    add(
                        f"{profile.name}_autogen_request_reply",
                        peer_autogen.request_reply_per_second(peer_requests, provider, settle=five.settle),
                    )
                    add(
                        f"{profile.name}_autogen_one_way",
                        peer_autogen.one_way_per_second(peer_messages, provider, settle=five.settle),
                    )
    with FiveStages(FULL) as five:
        costs = stage_costs_us(five.stages, staged_messages, repeats, five.settle)
    with FiveStages(PRODUCTION) as five:
        unmetered = TelemetryMiddleware(five.tracer_provider, NoOpMeterProvider(), publish_latency=False)
        production_costs = stage_costs_us(
            five.stages, staged_messages, repeats, five.settle, extra={"telemetry_without_metrics": unmetered}
        )

    figures: dict[str, float] = {
        "raw_tell_per_s": statistics.median(samples["tell"]),
        "raw_ask_per_s": statistics.median(samples["ask"]),
        "post_receive_per_s": statistics.median(samples["post"]),
        "send_reply_per_s": statistics.median(samples["send"]),
        "post_receive_vs_tell": _median_ratio(samples["post"], samples["tell"]),
        "send_reply_vs_ask": _median_ratio(samples["send"], samples["ask"]),
        "post_receive_all_stages_per_s": statistics.median(samples["staged"]),
        "post_receive_all_stages_vs_tell": _median_ratio(samples["staged"], samples["tell"]),
        "post_receive_production_per_s": statistics.median(samples["production_post"]),
        "send_reply_production_per_s": statistics.median(samples["production_send"]),
        "post_receive_production_vs_unstaged": _median_ratio(samples["production_post"], samples["post"]),
        "send_reply_production_vs_unstaged": _median_ratio(samples["production_send"], samples["send"]),
        "post_receive_full_sampling_per_s": statistics.median(samples["production_full_sampling_post"]),
        "send_reply_full_sampling_per_s": statistics.median(samples["production_full_sampling_send"]),
    }
    units: dict[str, str] = {
        "raw_tell_per_s": "msg/s",
        "raw_ask_per_s": "round trips/s",
        "post_receive_per_s": "msg/s",
        "send_reply_per_s": "round trips/s",
        "post_receive_vs_tell": "ratio (target >= 0.60)",
        "send_reply_vs_ask": "ratio (target >= 0.75)",
        "post_receive_all_stages_per_s": "msg/s (full fidelity)",
        "post_receive_all_stages_vs_tell": "ratio (full fidelity: reported, not targeted)",
        "post_receive_production_per_s": "msg/s",
        "send_reply_production_per_s": "round trips/s",
        "post_receive_production_vs_unstaged": "ratio (target >= 0.50)",
        "send_reply_production_vs_unstaged": "ratio",
        "post_receive_full_sampling_per_s": "msg/s (production, 100% sampling)",
        "send_reply_full_sampling_per_s": "round trips/s (production, 100% sampling)",
    }
    if skipped is None:
        for profile, label in ((PRODUCTION, "production"), (PRODUCTION_FULL_SAMPLING, "full_sampling")):
            request_reply = samples[f"{profile.name}_autogen_request_reply"]
            one_way = samples[f"{profile.name}_autogen_one_way"]
            figures[f"autogen_request_reply_{label}_per_s"] = statistics.median(request_reply)
            figures[f"autogen_one_way_{label}_per_s"] = statistics.median(one_way)
            figures[f"send_reply_{label}_vs_autogen"] = _median_ratio(samples[f"{profile.name}_send"], request_reply)
            figures[f"post_receive_{label}_vs_autogen"] = _median_ratio(samples[f"{profile.name}_post"], one_way)
            units[f"autogen_request_reply_{label}_per_s"] = "round trips/s"
            units[f"autogen_one_way_{label}_per_s"] = "msg/s"
            units[f"send_reply_{label}_vs_autogen"] = "ratio (target >= 1.5)"
            units[f"post_receive_{label}_vs_autogen"] = "ratio (target >= 5)"
    for name in (*STAGE_NAMES, "passthrough"):
        figures[f"stage_cost_us_{name}"] = costs[name]
        units[f"stage_cost_us_{name}"] = "µs/msg (full fidelity, publish + receive)"
    for name in (*STAGE_NAMES, "passthrough"):
        figures[f"stage_cost_us_production_{name}"] = production_costs[name]
        units[f"stage_cost_us_production_{name}"] = "µs/msg (production, publish + receive)"
    figures["stage_cost_us_production_telemetry_metrics"] = (
        production_costs["telemetry"] - production_costs["telemetry_without_metrics"]
    )
    units["stage_cost_us_production_telemetry_metrics"] = "µs/msg (the metrics instruments' share)"
    peer_note = (
        f"autogen-core {peer_autogen.AUTOGEN_VERSION}: {peer_requests} requests and {peer_messages} one-way "
        "messages per round, on the same tracer provider as the five stages"
        if skipped is None
        else skipped
    )
    progress("publishes to a live crew's durable cursor")
    live, live_units = live_cursor_figures(quick)
    figures.update(live)
    units.update(live_units)
    scale, scale_units = scale_figures(quick)
    figures.update(scale)
    units.update(scale_units)
    return BenchResult(
        "hub",
        figures,
        units,
        notes=(
            f"medians of {rounds} interleaved rounds ({messages} posts, {requests} requests without middleware, "
            f"{staged_messages} posts and {staged_requests} requests through the five stages in each profile, "
            f"each staged run timed until its spans were flushed and its metrics collected, all "
            f"{2 * staged_messages} full-fidelity spans exported every round); {peer_note}; "
            f"stage costs timed in isolation, minus the pass-through stage, best of {repeats}; "
            "live_cursor_*: publishes on a topic a live supervised crew's cursor reads, on a durable store, "
            "durable (a cursor_events row committed per publish) vs durable=False, 1 and 4 publisher threads; "
            "wait_cost_*, cancel_all_*, stop_waits_s, aio_waits_s: the hub core at "
            f"{10_000 if quick else 100_000:,} waits (bench/hub_scale.py)"
        ),
    )
