"""``orkeon bench lifecycle --posts N``: one crew processes ``N`` posts across many
sleeps, and its bookkeeping in the store stays the same size (Orkeon EventHub & Crew
Lifecycle specification, §11.2, §11.4; docs/lifecycle.md "Bookkeeping that does not
grow").

A :class:`~orkeon_actors.lifecycle.CrewSupervisor` on a durable store (a temporary file)
runs one crew, one agent looping on ``receive_message`` forever
(``Agent(max_conversation=4)``: its conversation, and so its snapshot, stays bounded
too). The posts go in *segments* of ``every``: a segment is posted pipelined
(``post_many``, one thread keeps the writer's group commit full; the first post wakes
the crew), the crew's model is given each post, then the crew is put to sleep (the
snapshot's transaction acknowledges the segment and moves the crew's mailbox mark).

The crew keeps its own tally in its conversation (the text of its last model answer,
restored by each wake): how many posts it was given, the last one, and how many came
out of order (a post given twice, or one skipped). At the end it must have been given
every post once, in order.

After a sleep, a :class:`Sample` reads what the store keeps for the crew's bookkeeping:
its ``processed_messages`` rows, its ``mailbox_marks`` rows and their bytes, the
mailbox rows still kept for it, and the pages (``dbstat``) of the bookkeeping tables
and their indexes. Bounded bookkeeping shows every sample equal, after 1 segment as
after a thousand.
"""

from __future__ import annotations

import json
import shutil
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import attrs

from orkeon_actors.bench.context import scratch_directory
from orkeon_actors.crew import Agent, CrewStatus, ModelRequest, ModelResponse, ScriptedModel, call, respond
from orkeon_actors.errors import InvalidArgumentError
from orkeon_actors.lifecycle import CrewBlueprint, CrewSupervisor
from orkeon_actors.orchestration import Sequential, Task
from orkeon_actors.runtime import Runtime
from orkeon_actors.store.durable_hub import SqliteEventHub
from orkeon_actors.testing import wait_until

__all__ = ["PostsRun", "Sample", "Tally", "default_every", "run_posts", "tally_crew"]

CREW = "looper"
ADDRESS = f"agent://{CREW}/a"
STOP = "stop"
BOOKKEEPING_TABLES = ("processed_messages", "mailbox_marks")


@attrs.frozen
class Tally:
    """What a tally crew was given so far: ``count`` posts, the ``last`` one, and
    ``out_of_order`` posts that did not follow the one before (given twice or after a gap)."""

    count: int = 0
    last: int = -1
    out_of_order: int = 0

    def given(self, post: int) -> Tally:
        return Tally(self.count + 1, post, self.out_of_order + (post != self.last + 1))

    def text(self) -> str:
        return "tally " + json.dumps(attrs.asdict(self))

    @classmethod
    def parse(cls, text: str) -> Tally | None:
        return cls(**json.loads(text[6:])) if text.startswith("tally ") else None


class TallyModel:
    """The policy of a tally crew's agent: carry the tally from its last answer (in the
    conversation) to the next, given the post in the last tool result; answer with the
    tally on :data:`STOP`. ``seen`` (for the driver) is the last tally it made."""

    def __init__(self) -> None:
        self.seen = Tally()
        self.changed = threading.Condition()

    def __call__(self, request: ModelRequest) -> ModelResponse:
        tally = next(
            (t for m in reversed(request.messages) if m.role == "assistant" and (t := Tally.parse(m.content))),
            Tally(),
        )
        result = request.last_tool_result()
        if isinstance(result, dict) and "message" in result:
            post = result["message"]["payload"]
            if post == STOP:
                return respond(tally.text())
            tally = tally.given(int(post))
        with self.changed:
            self.seen = tally
            self.changed.notify_all()
        receive = call("receive_message", {"wait_forever": True})
        return ModelResponse(text=tally.text(), tool_calls=receive.tool_calls)

    def wait_for(self, count: int, timeout: float) -> Tally:
        """The tally once ``count`` posts were given (``TimeoutError`` after ``timeout`` s)."""
        with self.changed:
            if not self.changed.wait_for(lambda: self.seen.count >= count, timeout):
                raise TimeoutError(f"the crew was given {self.seen.count} posts of {count} within {timeout} s")
            return self.seen


def tally_crew(model: Callable[[ModelRequest], ModelResponse]) -> CrewBlueprint:
    """One agent looping on ``receive_message`` forever, its conversation bounded."""
    agent = Agent("a", ScriptedModel(policy=model), max_turns=1 << 62, max_conversation=4)
    return CrewBlueprint(agents=[agent], orchestration=Sequential([Task("loop", agent.agent_id)]))


@attrs.frozen
class Sample:
    """The crew's bookkeeping after a sleep."""

    posts: int
    """Posts processed so far."""
    seconds: float
    processed_rows: int
    mark_rows: int
    mark_bytes: int
    """Bytes of the crew's mark rows' values."""
    kept_posts: int
    """Mailbox rows still kept for the crew (consumed, not acknowledged)."""
    bookkeeping_pages: int
    """Pages (dbstat) of ``processed_messages``, ``mailbox_marks`` and their indexes."""
    mailbox_pages: int
    """Pages of ``mailboxes`` and its indexes (the kept posts of every mailbox)."""
    snapshot_bytes: int
    db_bytes: int
    """The store file (the WAL apart)."""
    free_pages: int
    """Pages on the store's freelist (reused before the file grows)."""


@attrs.frozen
class PostsRun:
    posts: int
    every: int
    seconds: float
    cpu_seconds: float
    samples: list[Sample]
    tally: Tally


def default_every(posts: int) -> int:
    """Posts per sleep: a hundred sleeps, at least 1 post and at most 10,000 a segment."""
    return max(1, min(10_000, posts // 100))


def _store(rt: Runtime) -> SqliteEventHub:
    if not isinstance(rt.hub, SqliteEventHub):
        raise InvalidArgumentError("the bookkeeping bench needs a runtime on a durable store")
    return rt.hub


def _pages(rt: Runtime, tables: tuple[str, ...]) -> int:
    marks = ",".join("?" * len(tables))
    rows = _store(rt).readers.query(
        f"SELECT count(*) FROM dbstat WHERE name IN (SELECT name FROM sqlite_master WHERE tbl_name IN ({marks}))",
        tables,
    )
    return int(rows[0][0])


def sample(rt: Runtime, db: Path, posts: int, seconds: float) -> Sample:
    """What the store keeps for :data:`CREW`'s bookkeeping now."""
    one = _store(rt).readers.query
    processed = one("SELECT count(*) FROM processed_messages WHERE crew_id = ?", (CREW,))[0][0]
    marks, mark_bytes = one(
        "SELECT count(*), coalesce(sum(length(crew_id) + length(mailbox_address) + length(message_id) "
        "+ length(processed_at) + 8), 0) FROM mailbox_marks WHERE crew_id = ?",
        (CREW,),
    )[0]
    kept = one("SELECT count(*) FROM mailboxes WHERE mailbox_address = ?", (ADDRESS,))[0][0]
    snapshot = one("SELECT coalesce(sum(length(snapshot)), 0) FROM crew_snapshots WHERE crew_id = ?", (CREW,))[0][0]
    free = one("PRAGMA freelist_count")[0][0]
    return Sample(
        posts,
        seconds,
        int(processed),
        int(marks),
        int(mark_bytes),
        int(kept),
        _pages(rt, BOOKKEEPING_TABLES),
        _pages(rt, ("mailboxes",)),
        int(snapshot),
        db.stat().st_size,
        int(free),
    )


def run_posts(
    posts: int,
    *,
    every: int | None = None,
    samples: int = 20,
    directory: str | None = None,
    report: Callable[[Sample], None] | None = None,
    timeout: float = 600.0,
) -> PostsRun:
    """Drive the tally crew through ``posts`` posts, a sleep after each ``every`` (see
    the module docstring), taking about ``samples`` samples spread over the run (the
    first after the first sleep, the last after the last), each passed to ``report``.
    Raises ``InvalidArgumentError`` for fewer than 1 post, ``TimeoutError`` if a segment
    is not processed within ``timeout`` s, ``RuntimeError`` if a sleep is refused or the
    crew's tally is not every post once, in order."""
    if posts < 1:
        raise InvalidArgumentError(f"--posts {posts}: give at least 1 post")
    every = default_every(posts) if every is None else every
    if every < 1:
        raise InvalidArgumentError(f"posts per sleep must be at least 1, got {every}")
    segments = -(-posts // every)
    sample_at = {segments - 1} | {round(i * (segments - 1) / max(1, samples - 1)) for i in range(samples)}
    root = Path(directory) if directory is not None else Path(scratch_directory("orkeon-bench-posts-"))
    db = root / "posts.db"
    model = TallyModel()
    taken: list[Sample] = []
    try:
        with Runtime.start(store=str(db)) as rt:
            sup = CrewSupervisor(rt, factories={"tally": tally_crew(model)})
            try:
                sup.spawn("tally", CREW)
                wait_until(lambda: sup.status(CREW) is CrewStatus.WAITING, timeout=60, what="the crew waiting")
                client = rt.hub.bind("bench", "poster")
                started, cpu = time.perf_counter(), time.process_time()
                for segment in range(segments):
                    end = min(posts, (segment + 1) * every)
                    client.post_many([(ADDRESS, n) for n in range(segment * every, end)])
                    model.wait_for(end, timeout)
                    wait_until(lambda: sup.status(CREW) is CrewStatus.WAITING, timeout=timeout, what="crew parked")
                    if not sup.sleep(CREW):
                        raise RuntimeError(f"the crew did not sleep after {end} posts")
                    if segment in sample_at:
                        taken.append(sample(rt, db, end, time.perf_counter() - started))
                        if report is not None:
                            report(taken[-1])
                seconds, cpu_seconds = time.perf_counter() - started, time.process_time() - cpu
                client.post(ADDRESS, STOP)
                wait_until(lambda: sup.outcome(CREW) is not None, timeout=60, what="the crew finished")
                outcome = sup.outcome(CREW)
                assert outcome is not None
                tally = Tally.parse(str(outcome.result or ""))
            finally:
                sup.stop()
    finally:
        if directory is None:
            shutil.rmtree(root, ignore_errors=True)
    if tally is None or tally != Tally(posts, posts - 1, 0):
        raise RuntimeError(f"the crew was not given every post once, in order: {tally} (outcome {outcome})")
    return PostsRun(posts, every, seconds, cpu_seconds, taken, tally)


def summary(run: PostsRun) -> dict[str, Any]:
    """The figures of a run: rate, CPU per post, and whether every sample's bookkeeping
    (rows, bytes, pages) equals the first's."""
    first = run.samples[0]
    same = all(
        (s.processed_rows, s.mark_rows, s.mark_bytes, s.kept_posts, s.bookkeeping_pages)
        == (first.processed_rows, first.mark_rows, first.mark_bytes, first.kept_posts, first.bookkeeping_pages)
        for s in run.samples
    )
    return {
        "posts": run.posts,
        "posts_per_sleep": run.every,
        "seconds": round(run.seconds, 2),
        "posts_per_s": round(run.posts / run.seconds, 1),
        "cpu_us_per_post": round(run.cpu_seconds / run.posts * 1e6, 1),
        "bookkeeping_constant": same,
    }
