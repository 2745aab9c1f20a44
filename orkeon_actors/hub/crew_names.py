"""The readable names of the crews running on a hub (sender-owned history requirements,
MESSAGE-R02): crew id -> its blueprint's ``name:`` (the YAML ``name:``, a crew class's
``name``), told by each crew actor while its mailboxes are live on the hub.

The names are display-only: a sent row records the name its endpoints had at
publication time, beside their canonical ids, and a reader shows it as historical.
Nothing routes, authorises or replies by a name (the ACL's name registry,
:mod:`orkeon_actors.acl.registry`, is the one that links crews by name).

A crew that is not live here (asleep, on another host, never started in this process)
has no name in the book: :meth:`CrewNames.name_of` returns ``None``; the durable sent
history then reads a sleeping crew's name from its last snapshot
(:mod:`orkeon_actors.store.sent_history`), and otherwise the row keeps its address only.
The book holds one entry per live crew, never one per crew that ever ran, so a host
with a million sleeping crews does not pay for their names.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from orkeon_actors.model.ids import CrewId

__all__ = ["CrewNames"]


class CrewNames:
    """Crew id -> readable name, for the crews live on one hub. Thread-safe; lookups
    take no lock (one dict read)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._names: dict[CrewId, tuple[str, int]] = {}

    def name(self, crew_id: CrewId, name: str) -> Callable[[], None]:
        """Record that ``crew_id`` runs as ``name``; returns the call that withdraws it
        (idempotent). Naming a live id again (an actor replacing its predecessor before
        that one stopped) counts: the name stays until every holder withdrew it, and the
        latest name wins."""
        with self._lock:
            _, holders = self._names.get(crew_id, (name, 0))
            self._names[crew_id] = (name, holders + 1)
        return _Withdrawal(self, crew_id)

    def withdraw(self, crew_id: CrewId) -> None:
        """Withdraw one holder's name of ``crew_id`` (what the call :meth:`name` returned does)."""
        with self._lock:
            current = self._names.get(crew_id)
            if current is None:
                return
            if current[1] <= 1:
                del self._names[crew_id]
            else:
                self._names[crew_id] = (current[0], current[1] - 1)

    def name_of(self, crew_id: CrewId | None) -> str | None:
        """The name ``crew_id`` runs as here, or ``None``."""
        if crew_id is None:
            return None
        found = self._names.get(crew_id)
        return None if found is None else found[0]

    def __len__(self) -> int:
        return len(self._names)


class _Withdrawal:
    """The call :meth:`CrewNames.name` returns: withdraws one holder's name, once (a
    slots object: a closure and its cells were ≈ 0.2 KB per live crew)."""

    __slots__ = ("_crew_id", "_names")

    def __init__(self, names: CrewNames, crew_id: CrewId) -> None:
        self._names: CrewNames | None = names
        self._crew_id = crew_id

    def __call__(self) -> None:
        with _WITHDRAWING:
            names, self._names = self._names, None
        if names is not None:
            names.withdraw(self._crew_id)


_WITHDRAWING = threading.Lock()
"""Makes a :class:`_Withdrawal` take effect once when called from two threads."""
