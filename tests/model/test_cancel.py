from __future__ import annotations

import pytest

import orkeon_actors as ok
from orkeon_actors.errors import BudgetExhaustedError, CancelledError


def test_cancel_token_fires_once_and_runs_callbacks() -> None:
    token = ok.CancelToken()
    seen: list[Exception] = []
    unregister_b = token.on_cancel(seen.append)
    token.on_cancel(seen.append)
    unregister_b()
    token.cancel()
    token.cancel(BudgetExhaustedError("ignored: the first error wins"))
    assert len(seen) == 1 and isinstance(seen[0], CancelledError)
    with pytest.raises(CancelledError):
        token.raise_if_cancelled()
    late: list[Exception] = []
    token.on_cancel(late.append)
    assert late == [token.error]


def test_budget_fires_its_token_when_a_limit_is_exceeded() -> None:
    budget = ok.Budget(max_tokens=100, max_tool_calls=2)
    budget.consume(tokens=60, tool_calls=1)
    assert not budget.exhausted
    budget.consume(tokens=60)
    assert budget.exhausted
    with pytest.raises(BudgetExhaustedError, match="token budget"):
        budget.raise_if_exhausted()
    assert not isinstance(budget.token.error, TimeoutError)


def test_budget_wall_time_runs_on_the_given_clock() -> None:
    clock = ok.VirtualClock()
    budget = ok.Budget(max_wall_time=10, clock=clock)
    assert budget.token.deadline == 10
    clock.advance(9)
    assert not budget.exhausted
    clock.advance(1)
    assert budget.exhausted
    assert "wall-time" in (budget.reason or "")


def test_cost_and_tool_call_limits() -> None:
    budget = ok.Budget(max_cost=1.0)
    budget.consume(cost=1.5)
    assert "cost budget" in (budget.reason or "")
    calls = ok.Budget(max_tool_calls=1)
    calls.consume(tool_calls=2)
    assert "tool-call budget" in (calls.reason or "")


def test_a_child_token_fires_with_its_parent_but_not_the_other_way() -> None:
    parent = ok.CancelToken()
    alone = parent.child()
    alone.cancel()
    assert alone.cancelled and not parent.cancelled
    linked = parent.child()
    parent.cancel(BudgetExhaustedError("out"))
    assert isinstance(linked.error, BudgetExhaustedError)
    detached = ok.CancelToken()
    child = detached.child()
    child.detach()
    detached.cancel()
    assert not child.cancelled
    fired_first = parent.child()  # a child of a fired token is born fired
    assert isinstance(fired_first.error, BudgetExhaustedError)


def test_a_child_shares_its_parents_deadline_and_deadline_error() -> None:
    budget = ok.Budget(max_wall_time=5, clock=ok.VirtualClock())
    child = budget.token.child()
    assert child.deadline == budget.token.deadline
    child.fire_deadline()
    assert "wall-time" in str(child.error) and not budget.token.cancelled
