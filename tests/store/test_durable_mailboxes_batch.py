"""The durable hub registers and closes several mailboxes in one transaction each."""

from __future__ import annotations

from pathlib import Path

import orkeon_actors as ok


def test_mailboxes_registered_together_reload_what_each_kept_and_close_together(tmp_path: Path) -> None:
    db = str(tmp_path / "state.db")
    rt = ok.Runtime.start(store=db)
    try:
        hub = rt.hub
        stats = hub.writer.stats  # type: ignore[attr-defined]
        requests = stats.requests
        regs = hub.register_mailboxes(["crew://c", "agent://c/a"])
        assert stats.requests == requests + 1  # one writer request for both new addresses
        hub.park_mailboxes(regs)  # type: ignore[attr-defined]  # asleep: posts are kept
        sender = hub.bind("s", "x")
        kept_crew = [sender.post("crew://c", i).id for i in range(3)]
        kept_agent = [sender.post("agent://c/a", i).id for i in range(2)]
        requests = stats.requests
        crew, agent = hub.register_mailboxes(["crew://c", "agent://c/a"])
        assert stats.requests == requests  # already registered: reopened without the writer
        assert crew.depth() == 3 and agent.depth() == 2  # each reloaded what it kept
        leftovers = hub.close_mailboxes([crew, agent])
        assert stats.requests == requests + 1  # one writer request to close both
        assert [[m.id for m in kept] for kept in leftovers] == [kept_crew, kept_agent]
        for address in ("crew://c", "agent://c/a"):
            assert not hub.is_registered(address)  # type: ignore[attr-defined]
            assert hub.kept_messages(address) == []  # type: ignore[attr-defined]
    finally:
        rt.stop()
