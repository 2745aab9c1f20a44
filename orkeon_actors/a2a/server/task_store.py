"""The A2A tasks of exposed crews, kept in the runtime's SQLite store: the SDK's ``TaskStore``.

A task is a crew run (docs/a2a.md), and the crew's state is in the store; so is its
task, so that ``tasks/get`` after a restart of the serving process answers with the
state the task had (``input-required`` while the crew sleeps on its caller, the
artifact once it completed).

* **One row per task** in ``a2a_tasks`` (created by :func:`ensure_table` when the first
  crew is exposed on a store: an A2A-only table, so a store that never served A2A has
  none), the task as its protobuf bytes plus the columns a lookup needs: the exposed
  crew's name, the owner (the caller's name: a caller sees only its own tasks), its
  state.
* **Durable on return**: :meth:`save` returns once the store's writer committed it (the
  SDK answers the caller after the save, so what a caller was told survives a crash).
* **Writes off the event loop**: every statement runs on a worker thread
  (``asyncio.to_thread``), never blocking the server's loop.

:meth:`on_saved` lets the server react to a state the SDK wrote itself (a
``tasks/cancel`` of a task no executor runs: :mod:`orkeon_actors.a2a.server.crew_tasks`
stops its crew there).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Final

import apsw
from a2a.server.context import ServerCallContext
from a2a.server.tasks import TaskStore
from a2a.types import ListTasksRequest, ListTasksResponse, Task

from orkeon_actors.store.durable_hub import SqliteEventHub

__all__ = ["SCHEMA", "SqliteTaskStore", "ensure_table"]

SCHEMA: Final = """
CREATE TABLE IF NOT EXISTS a2a_tasks (
    task_id TEXT PRIMARY KEY,
    crew    TEXT NOT NULL,
    owner   TEXT NOT NULL,
    state   INTEGER NOT NULL,
    task    BLOB NOT NULL
);
CREATE INDEX IF NOT EXISTS a2a_tasks_by_owner ON a2a_tasks (crew, owner);
"""

_UPSERT = (
    "INSERT INTO a2a_tasks (task_id, crew, owner, state, task) VALUES (?, ?, ?, ?, ?) "
    "ON CONFLICT (task_id) DO UPDATE SET state = excluded.state, task = excluded.task"
)
_DEFAULT_PAGE = 50

SavedHook = Callable[[Task], None]


def ensure_table(hub: SqliteEventHub) -> None:
    """Create the ``a2a_tasks`` table on ``hub``'s store if it is not there (blocks
    until committed)."""

    def create(conn: apsw.Connection) -> None:
        conn.execute(SCHEMA)

    hub.writer.execute(create)


def owner_of(context: ServerCallContext) -> str:
    """The caller a request comes from (the guard's identification): its tasks' owner."""
    return context.user.user_name


class SqliteTaskStore(TaskStore):
    """The tasks of the exposed crew ``crew`` on ``hub``'s store (module docstring)."""

    def __init__(self, hub: SqliteEventHub, crew: str) -> None:
        self.hub = hub
        self.crew = crew
        self._hooks: list[SavedHook] = []

    def on_saved(self, hook: SavedHook) -> None:
        """Call ``hook(task)`` after every committed save (on a worker thread)."""
        self._hooks.append(hook)

    # -- the SDK's interface -------------------------------------------------------------

    async def save(self, task: Task, context: ServerCallContext) -> None:
        await asyncio.to_thread(self.put, task, owner_of(context))

    async def get(self, task_id: str, context: ServerCallContext) -> Task | None:
        found = await asyncio.to_thread(self.load, task_id)
        if found is None or found[1] != owner_of(context):
            return None
        return found[0]

    async def list(self, params: ListTasksRequest, context: ServerCallContext) -> ListTasksResponse:
        owner = owner_of(context)
        rows = await asyncio.to_thread(
            self.hub.readers.query,
            "SELECT task FROM a2a_tasks WHERE crew = ? AND owner = ? ORDER BY rowid DESC",
            (self.crew, owner),
        )
        tasks = [Task.FromString(bytes(row[0])) for row in rows]
        if params.context_id:
            tasks = [t for t in tasks if t.context_id == params.context_id]
        if params.status:
            tasks = [t for t in tasks if t.status.state == params.status]
        start = int(params.page_token) if params.page_token.isdigit() else 0
        size = params.page_size or _DEFAULT_PAGE
        page = tasks[start : start + size]
        following = str(start + size) if start + size < len(tasks) else ""
        return ListTasksResponse(tasks=page, next_page_token=following, page_size=size, total_size=len(tasks))

    async def delete(self, task_id: str, context: ServerCallContext) -> None:
        owner = owner_of(context)

        def remove(conn: apsw.Connection) -> None:
            conn.execute("DELETE FROM a2a_tasks WHERE task_id = ? AND owner = ?", (task_id, owner))

        await asyncio.to_thread(self.hub.writer.execute, remove)

    # -- blocking access (worker threads) ------------------------------------------------

    def put(self, task: Task, owner: str) -> None:
        """Write ``task`` for ``owner`` and block until committed; then the hooks."""
        row = (task.id, self.crew, owner, int(task.status.state), task.SerializeToString())

        def write(conn: apsw.Connection) -> None:
            conn.execute(_UPSERT, row)

        self.hub.writer.execute(write)
        for hook in self._hooks:
            hook(task)

    def load(self, task_id: str) -> tuple[Task, str] | None:
        """The task ``task_id`` of this crew and its owner, or ``None``."""
        rows = self.hub.readers.query(
            "SELECT task, owner FROM a2a_tasks WHERE task_id = ? AND crew = ?", (task_id, self.crew)
        )
        if not rows:
            return None
        return Task.FromString(bytes(rows[0][0])), str(rows[0][1])
