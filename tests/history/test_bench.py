"""``orkeon bench history`` measures what it says (figures only: no thresholds here)."""

from __future__ import annotations

from pathlib import Path

from orkeon_actors.bench.history import (
    agent_post_latency,
    catalog_reads,
    durable_send_rate,
    write_cost_per_send,
    write_costs,
)


def test_the_catalog_read_times_whole_processes_and_the_broken_box_stays_unread(tmp_path: Path) -> None:
    figures = catalog_reads(str(tmp_path), agents=12, sends_per_agent=3, reads=1)
    assert figures["agents"] == 12
    assert figures["sent_p95_s"] > 0 and figures["ls_p95_s"] > 0
    assert figures["unreadable_ls_refused"] == 1.0  # ls of the broken box fails, sent of its owner does not


def test_the_write_cost_is_measured_after_the_prior_rows(tmp_path: Path) -> None:
    assert write_cost_per_send(str(tmp_path), prior=50, measured=5) > 0


def test_the_write_costs_alternate_rounds_between_the_stores(tmp_path: Path) -> None:
    costs = write_costs(str(tmp_path), (5, 50), measured=5, rounds=2)
    assert set(costs) == {5, 50} and all(cost > 0 for cost in costs.values())


def test_the_agent_post_latency_covers_a_mailbox_and_a_topic(tmp_path: Path) -> None:
    latency = agent_post_latency(str(tmp_path), per_round=3, rounds=2)
    assert set(latency) == {"mailbox", "topic"} and all(value > 0 for value in latency.values())


def test_the_send_rate_runs_request_and_reply_between_agent_pairs(tmp_path: Path) -> None:
    assert durable_send_rate(str(tmp_path), True, per_thread=2) > 0
    assert durable_send_rate(str(tmp_path), False, per_thread=2) > 0
