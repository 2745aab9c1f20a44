"""Issue 29, "Sleep and crashes", with a real process SIGKILLed (``replay_child.py``):
an agent killed between its ``post_message`` tool call and its next model call is
restored from its crew's checkpoint, asks its model again, and the replayed post is the
sent history's keyed retry: exactly one post reaches the recipient, and the agent goes
on to its answer with the original message's id (``docs/crews.md``, "Crashes: what is
replayed")."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.lifecycle.children import run_child, tagged

CHILD = Path(__file__).with_name("replay_child.py")


@pytest.mark.parametrize("ids", ["stable", "fresh"])
def test_a_post_made_before_a_sigkill_is_not_made_again_by_the_replay(tmp_path: Path, ids: str) -> None:
    """``fresh``: the model mints a new call id each time it is asked (as providers do),
    so only the checkpoint taken before the call ran (its conversation holds the call)
    lets the replay find the call's key; ``stable``: a deterministic model."""
    db = tmp_path / "replay.db"
    lines = run_child(CHILD, str(db), "kill", ids, killed=True)
    killed = tagged(lines, "KILLED")  # the post's result, seen by the model asked after it
    result = tagged(run_child(CHILD, str(db), "resume", ids), "RESULT")
    assert result["status"] == "completed" and result["failure"] is None
    assert result["sink"] == [{"order": 7}]  # exactly one post reached the recipient
    [(to, key)] = result["sent"]  # and the agent's sent history holds one send
    assert to == "sink/s" and key is not None and key.startswith("call:")
    assert key.endswith(killed["call_id"])  # the call made before the kill, run again from the checkpoint
    assert result["result"] == f"posted 7 as {killed['message_id']}"  # answered from the original
