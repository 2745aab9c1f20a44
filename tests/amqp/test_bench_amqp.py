"""``orkeon bench amqp`` runs end to end on the real broker (its figures, not their values),
raw baselines, the hub's rows between host processes, wake latency and scale-out, and leaves no vhost and no
scratch directory behind."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from pathlib import Path

import pytest

import orkeon_actors.bench.amqp as bench_amqp
from orkeon_actors.cli.main import main
from orkeon_actors.fleet.broker_admin import rabbitmqctl, scratch_vhost

pytestmark = pytest.mark.rabbitmq


def test_orkeon_bench_amqp_measures_the_hub_beside_raw_pika(
    vhost: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    made: list[str] = []  # the bench's own scratch vhosts (other sessions' benches may run beside it)

    @contextlib.contextmanager
    def recorded(prefix: str = "orkeon", *, user: str = "guest") -> Iterator[str]:
        with scratch_vhost(prefix, user=user) as name:
            made.append(name)
            yield name

    monkeypatch.setattr(bench_amqp, "scratch_vhost", recorded)
    main(["bench", "amqp", "--quick", "--json", "--dir", str(tmp_path)])
    figures = json.loads(capsys.readouterr().out)["amqp"]
    keys = {"raw_post_receive_per_s", "raw_rpc_per_s", "post_receive_per_s", "send_reply_per_s"}
    keys |= {"post_receive_vs_raw", "send_reply_vs_raw_rpc", "wake_latency_p50_ms", "wake_latency_p99_ms"}
    keys |= {"wakes_per_s_1_host", "wakes_per_s_2_hosts", "wake_scale_out"}
    keys |= {"expiries_per_s_1_host", "expiries_per_s_2_hosts", "expiry_scale_out"}
    assert keys <= set(figures) and all(figures[key] > 0 for key in keys)
    cpu = {"raw_post_receive_cpu_us", "raw_rpc_cpu_us", "post_receive_cpu_us", "send_reply_cpu_us"}
    cpu |= {"expiry_cpu_us_1_host", "expiry_cpu_us_2_hosts"}
    assert cpu <= set(figures)  # what each side costs per message, beside the rates
    floor = {"amqp_floor_post_us", "amqp_floor_send_us", "amqp_floor_commit_wall_us", "post_receive_hold_batch"}
    floor |= {"raw_post_receive_cores_busy", "post_receive_cores_busy", "post_receive_switches", "send_reply_switches"}
    assert floor <= set(figures) and all(figures[key] > 0 for key in floor)
    bounds = {"post_receive_floor_bound", "send_reply_floor_bound", "send_reply_latency_bound"}
    assert all(0 < figures[key] < 1 for key in bounds)  # a ceiling the mandated work leaves below raw pika
    assert figures["wake_latency_p50_ms"] <= figures["wake_latency_p99_ms"]
    assert made and all(name.startswith("orkeon-bench-") for name in made)
    left = set(made) & set(rabbitmqctl("list_vhosts").split())
    assert left == set()  # its scratch vhosts deleted
    assert list(tmp_path.iterdir()) == []
