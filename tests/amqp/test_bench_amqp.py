"""``orkeon bench amqp`` runs end to end on the real broker (its figures, not their values),
raw baselines and the hub's rows between two host processes, and leaves no vhost and no
scratch directory behind."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from orkeon_actors.cli.main import main
from orkeon_actors.fleet.broker_admin import rabbitmqctl

pytestmark = pytest.mark.rabbitmq


def test_orkeon_bench_amqp_measures_the_hub_beside_raw_pika(
    vhost: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    before = set(rabbitmqctl("list_vhosts").split())
    main(["bench", "amqp", "--quick", "--json", "--dir", str(tmp_path)])
    figures = json.loads(capsys.readouterr().out)["amqp"]
    keys = {"raw_post_receive_per_s", "raw_rpc_per_s", "post_receive_per_s", "send_reply_per_s"}
    keys |= {"post_receive_vs_raw", "send_reply_vs_raw_rpc"}
    assert keys <= set(figures) and all(figures[key] > 0 for key in keys)
    left = {v for v in rabbitmqctl("list_vhosts").split() if v.startswith("orkeon-bench-")} - before
    assert left == set()  # its scratch vhost deleted (other runs' vhosts may come and go)
    assert list(tmp_path.iterdir()) == []
