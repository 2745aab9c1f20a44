"""``orkeon bench amqp`` runs end to end on the real broker (its figures, not their values)
and leaves no vhost and no scratch directory behind."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from orkeon_actors.cli.main import main
from orkeon_actors.fleet.broker_admin import rabbitmqctl

pytestmark = pytest.mark.rabbitmq


def test_orkeon_bench_amqp_measures_the_raw_baselines(
    vhost: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    before = set(rabbitmqctl("list_vhosts").split())
    main(["bench", "amqp", "--quick", "--json", "--dir", str(tmp_path)])
    figures = json.loads(capsys.readouterr().out)["amqp"]
    assert figures["raw_post_receive_per_s"] > 0 and figures["raw_rpc_per_s"] > 0
    assert set(rabbitmqctl("list_vhosts").split()) == before
    assert list(tmp_path.iterdir()) == []
