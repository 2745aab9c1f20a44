"""``orkeon bench amqp``: the distributed hub on RabbitMQ beside raw pika, in one run.

Needs a RabbitMQ broker and ``rabbitmqctl`` (it makes a scratch vhost, deleted
afterwards): the broker URI is ``$ORKEON_BENCH_BROKER``, default
``amqp://guest:guest@127.0.0.1:5672/`` (its vhost part is replaced by the scratch one).
Without them the suite raises ``BrokerError``/``BrokerUnavailableError`` saying so.

Rounds interleave the baselines and the hub's figures (raw post, hub post, raw RPC, hub
send), so every ratio compares two figures measured under the same load; ratios are the
median of the per-round ratios (the ``hub`` suite's reasoning, ``docs/bench.md``).

* ``raw_post_receive_per_s`` / ``raw_rpc_per_s``: :mod:`orkeon_actors.bench.amqp_raw`
  (two processes; confirms with a window of :data:`WINDOW`; consumer prefetch
  :data:`PREFETCH`, the gateway's own).
* ``post_receive_per_s``: host A (a child process, own store) posts N messages from
  :data:`~orkeon_actors.bench.amqp_fleet.POST_THREADS` threads to a mailbox of host B
  (another child process, own store), drained there through a held reader; from A's first post to B's last delivery.
* ``send_reply_per_s``: A makes M sequential ``send``\\ s to a mailbox of B, whose thread
  ``reply``-s to each.
* ``wake_latency_p50/p99_ms`` and the scale-out figures: see :mod:`orkeon_actors.bench.amqp_fleet`.
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

from orkeon_actors.bench.amqp_raw import raw_post_receive_per_s, raw_rpc_per_s
from orkeon_actors.bench.context import progress, scratch_directory
from orkeon_actors.bench.registry import BenchResult, register
from orkeon_actors.fleet.broker_admin import scratch_vhost
from orkeon_actors.runtime import Runtime

__all__ = ["PREFETCH", "WINDOW", "broker_url", "bench_amqp"]

PREFETCH = 64
"""The consumer prefetch of the raw baseline: the gateway's inbox prefetch (its default)."""
WINDOW = 512
"""Unconfirmed publishes the raw publisher keeps in flight."""


def broker_url(vhost: str) -> str:
    """``$ORKEON_BENCH_BROKER`` (default the local broker as guest) with vhost ``vhost``."""
    base = os.environ.get("ORKEON_BENCH_BROKER", "amqp://guest:guest@127.0.0.1:5672/")
    parts = urllib.parse.urlsplit(base)
    return urllib.parse.urlunsplit(parts._replace(path="/" + urllib.parse.quote(vhost, safe="")))


@contextmanager
def _removed(directory: Path) -> Iterator[None]:
    try:
        yield
    finally:
        shutil.rmtree(directory, ignore_errors=True)


def _median_ratio(ours: list[float], raw: list[float]) -> float:
    return statistics.median(o / r for o, r in zip(ours, raw, strict=True))


HubRows = Callable[[str, Path, int, int], tuple[float, float]]
"""``(url, directory, N, M) -> (post_receive_per_s, send_reply_per_s)`` of the hub."""


def _hub_rows() -> HubRows | None:
    """The hub's own rows, when this build's runtime takes a broker (the distributed hub
    adapter); ``None`` otherwise, and the result's notes say so."""
    if "broker" not in inspect.signature(Runtime.start).parameters:
        return None
    from orkeon_actors.bench.amqp_fleet import hub_rows

    return hub_rows


@register("amqp")
def bench_amqp(quick: bool) -> BenchResult:
    count = 3_000 if quick else 20_000
    requests = 300 if quick else 2_000
    rounds = 1 if quick else 3
    raw_post: list[float] = []
    raw_rpc: list[float] = []
    post: list[float] = []
    send: list[float] = []
    hub_rows = _hub_rows()
    directory = Path(scratch_directory("orkeon-bench-amqp-"))
    with scratch_vhost("orkeon-bench") as vhost, _removed(directory):
        url = broker_url(vhost)
        for index in range(rounds):
            progress(f"round {index + 1}/{rounds}")
            raw_post.append(raw_post_receive_per_s(url, count, prefetch=PREFETCH, window=WINDOW))
            raw_rpc.append(raw_rpc_per_s(url, requests))
            if hub_rows is not None:
                hub_post, hub_send = hub_rows(url, Path(tempfile.mkdtemp(dir=directory)), count, requests)
                post.append(hub_post)
                send.append(hub_send)
    figures = {
        "raw_post_receive_per_s": statistics.median(raw_post),
        "raw_rpc_per_s": statistics.median(raw_rpc),
    }
    units = {"raw_post_receive_per_s": "messages/s", "raw_rpc_per_s": "round trips/s"}
    notes = f"N={count}, M={requests}, {rounds} round(s), medians; prefetch {PREFETCH}, confirm window {WINDOW}"
    if post:
        figures |= {
            "post_receive_per_s": statistics.median(post),
            "send_reply_per_s": statistics.median(send),
            "post_receive_vs_raw": _median_ratio(post, raw_post),
            "send_reply_vs_raw_rpc": _median_ratio(send, raw_rpc),
        }
        units |= {
            "post_receive_per_s": "messages/s",
            "send_reply_per_s": "round trips/s",
            "post_receive_vs_raw": "ratio",
            "send_reply_vs_raw_rpc": "ratio",
        }
    else:
        notes += "; the hub's rows need the distributed hub adapter, absent from this build"
    return BenchResult("amqp", figures, units, notes)
