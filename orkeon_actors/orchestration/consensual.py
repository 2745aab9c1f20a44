"""Consensual: voters vote on a proposal in rounds until a rule is met or the round
limit is reached (spec §8.2: voting round, votes already cast, current proposal).

A voter answers ``approve`` or ``reject`` (first word, case-insensitive; the rest is its
reason) or ``{"vote": "approve"|"reject", "reason": ...}``. When a round fails and a
``proposer`` is set, the proposer revises the proposal from the round's reasons.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from fractions import Fraction
from typing import TYPE_CHECKING

import attrs

from orkeon_actors.crew.orchestration import Orchestration, OrchestrationError
from orkeon_actors.crew.orchestration_state import ConsensualState, ProposalState, Vote
from orkeon_actors.model.ids import AgentId

if TYPE_CHECKING:
    from orkeon_actors.crew.crew_actor import CrewActor

__all__ = ["Consensual", "RULES", "parse_vote"]

RULES = {"majority": Fraction(1, 2), "supermajority": Fraction(2, 3), "unanimity": Fraction(1)}


def parse_vote(output: str) -> tuple[bool, str]:
    """``(approve, reason)`` from a voter's answer; raises ``OrchestrationError``."""
    text = output.strip()
    try:
        data = json.loads(text)
    except ValueError:
        data = None
    if isinstance(data, dict) and data.get("vote") in ("approve", "reject"):
        return data["vote"] == "approve", str(data.get("reason", ""))
    word, _, rest = text.partition(" ")
    if word.lower().strip(".,:") in ("approve", "reject"):
        return word.lower().strip(".,:") == "approve", rest.strip()
    raise OrchestrationError(f"a vote must start with 'approve' or 'reject', got {text[:80]!r}")


class Consensual(Orchestration):
    """``rule``: majority (more than half approve), supermajority (at least two thirds),
    unanimity. After ``max_rounds`` rounds without agreement the crew completes with
    ``{"decision": "no_consensus", ...}``; on agreement with ``"accepted"``."""

    mode = "consensual"

    def __init__(
        self,
        voters: Sequence[str],
        proposal: str,
        *,
        rule: str = "majority",
        max_rounds: int = 3,
        proposer: str | None = None,
    ) -> None:
        if rule not in RULES:
            raise ValueError(f"rule must be one of {sorted(RULES)}, got {rule!r}")
        if not voters or max_rounds < 1:
            raise ValueError("a Consensual crew needs voters and max_rounds >= 1")
        self.voters = tuple(AgentId(v) for v in voters)
        self.proposal, self.rule, self.max_rounds = proposal, rule, max_rounds
        self.proposer = None if proposer is None else AgentId(proposer)

    def agent_ids(self) -> Sequence[AgentId]:
        return [*self.voters, *([self.proposer] if self.proposer else [])]

    def initial_state(self) -> ConsensualState:
        return ConsensualState(1, (), ProposalState(self.proposal, self.proposer))

    def start(self, crew: CrewActor) -> None:
        self._open_round(crew)

    def _open_round(self, crew: CrewActor) -> None:
        state: ConsensualState = crew.orchestration  # type: ignore[assignment]
        prompt = json.dumps({"round": state.round, "proposal": state.proposal.text}, sort_keys=True)
        for voter in self.voters:
            crew.assign(voter, f"vote:{state.round}", prompt)

    def _passes(self, approvals: int) -> bool:
        share = Fraction(approvals, len(self.voters))
        threshold = RULES[self.rule]
        return share > threshold if self.rule == "majority" else share >= threshold

    def on_task_done(self, crew: CrewActor, agent_id: AgentId, task_id: str, output: str) -> None:
        state: ConsensualState = crew.orchestration  # type: ignore[assignment]
        if task_id.startswith("revise:"):
            proposal = ProposalState(output, agent_id)
            crew.set_orchestration(attrs.evolve(state, proposal=proposal), f"round {state.round} proposal revised")
            self._open_round(crew)
            return
        approve, reason = parse_vote(output)
        votes = (*state.cast_votes, Vote(state.round, agent_id, approve, reason))
        state = attrs.evolve(state, cast_votes=votes)
        this_round = [v for v in votes if v.round == state.round]
        crew.set_orchestration(state, f"round {state.round}: {agent_id} votes {'approve' if approve else 'reject'}")
        if len(this_round) < len(self.voters):
            return
        approvals = sum(v.approve for v in this_round)
        if self._passes(approvals):
            self._decide(crew, state, "accepted", approvals)
        elif state.round >= self.max_rounds:
            self._decide(crew, state, "no_consensus", approvals)
        else:
            state = attrs.evolve(state, round=state.round + 1)
            crew.set_orchestration(state, f"round {state.round} opens")
            if self.proposer is not None:
                reasons = [v.reason for v in this_round if not v.approve]
                prompt = json.dumps({"proposal": state.proposal.text, "objections": reasons}, sort_keys=True)
                crew.assign(self.proposer, f"revise:{state.round}", prompt)
            else:
                self._open_round(crew)

    def _decide(self, crew: CrewActor, state: ConsensualState, status: str, approvals: int) -> None:
        state = attrs.evolve(state, proposal=attrs.evolve(state.proposal, status=status))
        crew.set_orchestration(state, f"decision {status}")
        crew.complete(
            json.dumps(
                {"decision": status, "round": state.round, "approvals": approvals, "proposal": state.proposal.text},
                sort_keys=True,
            )
        )
