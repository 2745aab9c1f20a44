"""``orkeon bench amqp``: the distributed hub on RabbitMQ beside raw pika, in one run.

Needs a RabbitMQ broker and ``rabbitmqctl`` (it makes a scratch vhost, deleted
afterwards): the broker URI is ``$ORKEON_BENCH_BROKER``, default
``amqp://guest:guest@127.0.0.1:5672/`` (its vhost part is replaced by the scratch one).
Without them the suite raises ``BrokerError``/``BrokerUnavailableError`` saying so.

Rounds interleave the baselines and the hub's figures (raw post, hub post, raw RPC, hub
send), so every ratio compares two figures measured under the same load; ratios are the
median of the per-round ratios (the ``hub`` suite's reasoning, ``docs/bench.md``).

* ``raw_post_receive_per_s`` / ``raw_rpc_per_s``: :mod:`orkeon_actors.bench.amqp_raw`
  (two processes; confirms with a window of :data:`WINDOW`, as many unconfirmed
  publishes as the hub's poster keeps in flight; consumer prefetch :data:`PREFETCH`,
  the gateway's own). ``raw_post_receive_wide_per_s``: the same publisher with
  :data:`WIDE_WINDOW` unconfirmed, what the broker takes from a publisher that never
  waits (``post_receive_vs_raw_wide`` beside it).
* ``post_receive_per_s``: host A (a child process, own store) posts N messages from
  :data:`~orkeon_actors.bench.amqp_fleet.POST_THREADS` threads to a mailbox of host B
  (another child process, own store), drained there through a held reader; from A's first post to B's last delivery.
* ``send_reply_per_s``: A makes M sequential ``send``\\ s to a mailbox of B, whose thread
  ``reply``-s to each.
* ``wake_latency_p50/p99_ms``: crews asleep on host B, each woken in turn by a post from
  host A (:func:`~orkeon_actors.bench.amqp_fleet.wake_latency_ms`).
* scale-out: wakes by posts from A, and expiries at one instant, of crews shared by one,
  then two worker hosts (fresh hosts and stores each time); ``*_scale_out`` is two over one
  (:func:`~orkeon_actors.bench.amqp_fleet.wake_rate`, :func:`~orkeon_actors.bench.amqp_fleet.expiry_rate`).
* ``*_cpu_us``: CPU microseconds per message (per round trip, per expired crew) of the
  processes involved together, the broker's excepted: raw pika's publisher and consumer
  (client and server), hosts A and B, the worker hosts. On a machine whose cores are
  shared, they say where a rate is bound: by work per message, or by the cores.
"""

from __future__ import annotations

import inspect
import os
import shutil
import statistics
import tempfile
import urllib.parse
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from orkeon_actors.bench.amqp_fleet import (
    POST_THREADS,
    HubFigures,
    MachineWatch,
    expiry_rate,
    hub_rows,
    wake_latency_ms,
    wake_rate,
)
from orkeon_actors.bench.amqp_floor import floor_us
from orkeon_actors.bench.amqp_raw import raw_post_receive_per_s, raw_rpc_per_s
from orkeon_actors.bench.context import progress, scratch_directory
from orkeon_actors.bench.registry import BenchResult, register
from orkeon_actors.fleet.broker_admin import scratch_vhost
from orkeon_actors.runtime import Runtime

__all__ = ["PREFETCH", "WIDE_WINDOW", "WINDOW", "broker_url", "bench_amqp"]

PREFETCH = 64
"""The consumer prefetch of the raw baseline: the gateway's inbox prefetch (its default)."""
WINDOW = POST_THREADS
"""Unconfirmed publishes the raw publisher keeps in flight: as many as the hub's poster
(each of its threads waits for its post's confirm), so the ratio compares like with like."""
WIDE_WINDOW = 512
"""The raw publisher's window for ``raw_post_receive_wide_per_s``."""


def broker_url(vhost: str) -> str:
    """``$ORKEON_BENCH_BROKER`` (default the local broker as guest) with vhost ``vhost``."""
    base = os.environ.get("ORKEON_BENCH_BROKER", "amqp://guest:guest@127.0.0.1:5672/")
    parts = urllib.parse.urlsplit(base)
    return urllib.parse.urlunsplit(parts._replace(path="/" + urllib.parse.quote(vhost, safe="")))


@contextmanager
def _removed(directory: Path) -> Iterator[Path]:
    try:
        yield directory
    finally:
        shutil.rmtree(directory, ignore_errors=True)


def _median_ratio(ours: list[float], raw: list[float]) -> float:
    return statistics.median(o / r for o, r in zip(ours, raw, strict=True))


HubRows = Callable[[str, Path, int, int], HubFigures]
"""``(url, directory, N, M) -> HubFigures`` of the hub."""


def _hub_rows() -> HubRows | None:
    """The hub's own rows, when this build's runtime takes a broker (the distributed hub
    adapter); ``None`` otherwise, and the result's notes say so."""
    if "broker" not in inspect.signature(Runtime.start).parameters:
        return None
    return hub_rows


@register("amqp")
def bench_amqp(quick: bool) -> BenchResult:
    count = 3_000 if quick else 20_000
    requests = 300 if quick else 2_000
    rounds = 1 if quick else 3
    raw_post: list[float] = []
    raw_wide: list[float] = []
    raw_rpc: list[float] = []
    raw_post_cpu: list[float] = []
    raw_rpc_cpu: list[float] = []
    post: list[float] = []
    send: list[float] = []
    post_cpu: list[float] = []
    send_cpu: list[float] = []
    raw_busy: list[float] = []
    raw_broker: list[float] = []
    hubs: list[HubFigures] = []
    hub_rows = _hub_rows()
    directory = Path(scratch_directory("orkeon-bench-amqp-"))
    with scratch_vhost("orkeon-bench") as vhost, _removed(directory):
        url = broker_url(vhost)
        for index in range(rounds):
            progress(f"round {index + 1}/{rounds}")
            watch = MachineWatch()
            rate, cpu = raw_post_receive_per_s(url, count, prefetch=PREFETCH, window=WINDOW, watch=watch)
            raw_post.append(rate)
            raw_post_cpu.append(cpu)
            raw_busy.append(watch.cores_busy)
            raw_broker.append(watch.broker_cpu_s / count * 1e6)
            raw_wide.append(raw_post_receive_per_s(url, count, prefetch=PREFETCH, window=WIDE_WINDOW)[0])
            rate, cpu = raw_rpc_per_s(url, requests)
            raw_rpc.append(rate)
            raw_rpc_cpu.append(cpu)
            if hub_rows is not None:
                hub = hub_rows(url, Path(tempfile.mkdtemp(dir=directory)), count, requests)
                post.append(hub.post_per_s)
                send.append(hub.send_per_s)
                post_cpu.append(hub.post_cpu_us)
                send_cpu.append(hub.send_cpu_us)
                hubs.append(hub)
    figures = {
        "raw_post_receive_per_s": statistics.median(raw_post),
        "raw_post_receive_wide_per_s": statistics.median(raw_wide),
        "raw_rpc_per_s": statistics.median(raw_rpc),
        "raw_post_receive_cpu_us": statistics.median(raw_post_cpu),
        "raw_rpc_cpu_us": statistics.median(raw_rpc_cpu),
        "raw_post_receive_cores_busy": statistics.median(raw_busy),
        "raw_post_receive_broker_cpu_us": statistics.median(raw_broker),
    }
    units = {"raw_post_receive_per_s": "messages/s", "raw_rpc_per_s": "round trips/s"}
    units |= {"raw_post_receive_wide_per_s": "messages/s"}
    units |= {"raw_post_receive_cpu_us": "µs/message", "raw_rpc_cpu_us": "µs/round trip"}
    units |= {"raw_post_receive_cores_busy": "share of cores", "raw_post_receive_broker_cpu_us": "µs/message"}
    notes = f"N={count}, M={requests}, {rounds} round(s), medians; prefetch {PREFETCH}, confirm window {WINDOW}"
    notes += f" (wide: {WIDE_WINDOW})"
    if post:
        figures |= {
            "post_receive_per_s": statistics.median(post),
            "send_reply_per_s": statistics.median(send),
            "post_receive_vs_raw": _median_ratio(post, raw_post),
            "post_receive_vs_raw_wide": _median_ratio(post, raw_wide),
            "send_reply_vs_raw_rpc": _median_ratio(send, raw_rpc),
            "post_receive_cpu_us": statistics.median(post_cpu),
            "send_reply_cpu_us": statistics.median(send_cpu),
        }
        units |= {
            "post_receive_per_s": "messages/s",
            "send_reply_per_s": "round trips/s",
            "post_receive_vs_raw": "ratio",
            "post_receive_vs_raw_wide": "ratio",
            "send_reply_vs_raw_rpc": "ratio",
            "post_receive_cpu_us": "µs/message",
            "send_reply_cpu_us": "µs/round trip",
        }
        floor_figures, floor_units = _floor_rows(hubs, figures, quick)
        figures |= floor_figures
        units |= floor_units
    else:
        notes += "; the hub's rows need the distributed hub adapter, absent from this build"
        return BenchResult("amqp", figures, units, notes)
    sleepers = 20 if quick else 200
    shared = 100 if quick else 1_000
    with scratch_vhost("orkeon-bench") as vhost, _removed(Path(scratch_directory("orkeon-bench-fleet-"))) as scratch:
        url = broker_url(vhost)
        progress("wake latency")
        latencies = sorted(wake_latency_ms(url, _fresh(scratch), sleepers))
        rates: dict[str, float] = {}
        for workers in (1, 2):
            progress(f"wakes on {workers} worker host(s)")
            woken = wake_rate(url, _fresh(scratch), workers, shared)
            rates[f"wake_per_s_{workers}"] = woken.per_s
            rates[f"wake_cpu_us_{workers}"] = woken.worker_cpu_us
            rates[f"wake_poster_cpu_us_{workers}"] = woken.poster_cpu_us
            rates[f"wake_cores_busy_{workers}"] = woken.cores_busy
            progress(f"expiries on {workers} worker host(s)")
            expired = expiry_rate(url, _fresh(scratch), workers, shared)
            rates[f"expiries_per_s_{workers}"], rates[f"expiry_cpu_us_{workers}"] = expired[0], expired[1]
            rates[f"expiry_cores_busy_{workers}"] = expired[2]
    figures |= {
        "wake_latency_p50_ms": statistics.median(latencies),
        "wake_latency_p99_ms": latencies[min(len(latencies) - 1, int(len(latencies) * 0.99))],
        "wakes_per_s_1_host": rates["wake_per_s_1"],
        "wakes_per_s_2_hosts": rates["wake_per_s_2"],
        "wake_scale_out": rates["wake_per_s_2"] / rates["wake_per_s_1"],
        "expiries_per_s_1_host": rates["expiries_per_s_1"],
        "expiries_per_s_2_hosts": rates["expiries_per_s_2"],
        "expiry_scale_out": rates["expiries_per_s_2"] / rates["expiries_per_s_1"],
        "wake_cpu_us_1_host": rates["wake_cpu_us_1"],
        "wake_cpu_us_2_hosts": rates["wake_cpu_us_2"],
        "wake_poster_cpu_us_1_host": rates["wake_poster_cpu_us_1"],
        "wake_poster_cpu_us_2_hosts": rates["wake_poster_cpu_us_2"],
        "wake_cores_busy_1_host": rates["wake_cores_busy_1"],
        "wake_cores_busy_2_hosts": rates["wake_cores_busy_2"],
        "expiry_cores_busy_1_host": rates["expiry_cores_busy_1"],
        "expiry_cores_busy_2_hosts": rates["expiry_cores_busy_2"],
        "expiry_cpu_us_1_host": rates["expiry_cpu_us_1"],
        "expiry_cpu_us_2_hosts": rates["expiry_cpu_us_2"],
    }
    units |= {"wake_latency_p50_ms": "ms", "wake_latency_p99_ms": "ms", "wake_scale_out": "ratio"}
    units |= {"wakes_per_s_1_host": "crews/s", "wakes_per_s_2_hosts": "crews/s", "expiry_scale_out": "ratio"}
    units |= {"expiries_per_s_1_host": "crews/s", "expiries_per_s_2_hosts": "crews/s"}
    units |= {"expiry_cpu_us_1_host": "µs/crew", "expiry_cpu_us_2_hosts": "µs/crew"}
    units |= {"wake_cpu_us_1_host": "µs/crew", "wake_cpu_us_2_hosts": "µs/crew"}
    units |= {"wake_poster_cpu_us_1_host": "µs/post", "wake_poster_cpu_us_2_hosts": "µs/post"}
    units |= {key: "share of cores" for key in figures if "_cores_busy_" in key}
    notes += f"; {sleepers} crews woken one by one, {shared} crews shared by the worker hosts"
    return BenchResult("amqp", figures, units, notes)


FLOOR_MESSAGES = 5_000
"""Messages each operation of the floor is timed over (:mod:`~orkeon_actors.bench.amqp_floor`);
a fifth of that with ``--quick``, and a fifth again for the commits of one row each."""


def _floor_rows(
    hubs: list[HubFigures], figures: dict[str, float], quick: bool
) -> tuple[dict[str, float], dict[str, str]]:
    """The hub's own rows over the post windows (cores busy, the broker's CPU, the hold
    batch) and the floor: the mandated operations timed alone, at the batch host B's
    durable hold reached (and at 1 for the sequential round trips), with the ratios they
    bound if every party is bound by the CPU of the same cores."""
    batch = max(1, round(statistics.median(hub.hold_batch for hub in hubs)))
    messages = FLOOR_MESSAGES // 5 if quick else FLOOR_MESSAGES
    post = floor_us(messages, batch)
    single = floor_us(messages // 5, 1)
    floor_post = post.wire_us + post.store_us
    floor_send = 2 * single.wire_us + single.hold_us + single.consume_us
    raw_rtt_us = 1e6 / figures["raw_rpc_per_s"]
    raw_cpu_us = figures["raw_post_receive_cpu_us"]
    rows = {
        "post_receive_cores_busy": statistics.median(hub.post_cores_busy for hub in hubs),
        "post_receive_broker_cpu_us": statistics.median(hub.post_broker_cpu_us for hub in hubs),
        "post_receive_hold_batch": statistics.median(hub.hold_batch for hub in hubs),
        "post_receive_switches": statistics.median(hub.post_switches for hub in hubs),
        "send_reply_switches": statistics.median(hub.send_switches for hub in hubs),
        "amqp_floor_encode_us": post.encode_us,
        "amqp_floor_sign_us": post.sign_us,
        "amqp_floor_verify_us": post.verify_us,
        "amqp_floor_decode_us": post.decode_us,
        "amqp_floor_hold_us": post.hold_us,
        "amqp_floor_consume_us": post.consume_us,
        "amqp_floor_processed_us": post.processed_us,
        "amqp_floor_post_us": floor_post,
        "amqp_floor_send_us": floor_send,
        "amqp_floor_commit_wall_us": single.hold_wall_us,
        "post_receive_floor_bound": raw_cpu_us / (raw_cpu_us + floor_post),
        "send_reply_floor_bound": figures["raw_rpc_cpu_us"] / (figures["raw_rpc_cpu_us"] + floor_send),
        "send_reply_latency_bound": raw_rtt_us / (raw_rtt_us + single.hold_wall_us),
    }
    units = {key: "µs/message" for key in rows if key.startswith("amqp_floor_")}
    units |= {"amqp_floor_send_us": "µs/round trip", "amqp_floor_commit_wall_us": "µs/commit"}
    units |= {"post_receive_cores_busy": "share of cores", "post_receive_broker_cpu_us": "µs/message"}
    units |= {"post_receive_hold_batch": "messages/commit", "post_receive_switches": "switches/message"}
    units |= {"send_reply_switches": "switches/round trip"}
    units |= {key: "ratio" for key in rows if key.endswith("_bound")}
    return rows, units


def _fresh(scratch: Path) -> Path:
    return Path(tempfile.mkdtemp(dir=scratch))
