"""The live mailboxes of one hub core by address, and the crews that finished there
(to explain a refused post): the part of
:class:`~orkeon_actors.hub.memory.HubCore`'s state its registrations change.

Lock contract: one lock guards every change to the table and to the finished crews
(registering, unregistering, a crew's end); a read of one address (:meth:`get`,
``in``) takes none, a single dict operation being atomic, so delivery takes no lock.
Starting and closing a mailbox actor (the slow part) happen outside the lock, in the
core.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Mapping, Sequence

from orkeon_actors.errors import MailboxNotFoundError
from orkeon_actors.hub.mailbox import MailboxHandle
from orkeon_actors.model.address import MailboxAddress
from orkeon_actors.model.ids import CrewId

__all__ = ["FINISHED_CREWS_REMEMBERED", "LiveMailboxes"]


FINISHED_CREWS_REMEMBERED = 10_000
"""How many finished crews a hub remembers to explain a refused post (see ``crew_finished``)."""


class LiveMailboxes:
    """The table of live mailboxes (address to handle) and the finished crews."""

    def __init__(self) -> None:
        self._mailboxes: dict[MailboxAddress, MailboxHandle] = {}
        self._mailboxes_lock = threading.Lock()
        self._finished_crews: OrderedDict[CrewId, str] = OrderedDict()

    @property
    def table(self) -> Mapping[MailboxAddress, MailboxHandle]:
        """The live table itself (never replaced, changed only under this object's
        lock): a hot path reads it without a call per lookup. Read it, never write it."""
        return self._mailboxes

    def get(self, address: MailboxAddress) -> MailboxHandle | None:
        """The live mailbox at ``address``, if any."""
        return self._mailboxes.get(address)

    def __contains__(self, address: object) -> bool:
        return address in self._mailboxes

    def handles(self) -> list[MailboxHandle]:
        """Every live mailbox (a snapshot)."""
        return list(self._mailboxes.values())

    def crew_finished(self, crew_id: CrewId, status: str) -> None:
        """Remember that ``crew_id`` finished with ``status`` (the last
        :data:`FINISHED_CREWS_REMEMBERED` crews are remembered)."""
        with self._mailboxes_lock:
            self._finished_crews[crew_id] = status
            self._finished_crews.move_to_end(crew_id)
            while len(self._finished_crews) > FINISHED_CREWS_REMEMBERED:
                self._finished_crews.popitem(last=False)

    def missing(self, address: MailboxAddress) -> MailboxNotFoundError:
        """The error for a post or send to ``address``, which has no mailbox (naming its
        crew's end if that crew finished)."""
        finished = None if address.crew_id is None else self._finished_crews.get(address.crew_id)
        return MailboxNotFoundError(address, finished=finished)

    def forget_finished(self, addresses: Sequence[MailboxAddress]) -> None:
        """The crews of ``addresses`` register mailboxes again: their earlier end is history."""
        if self._finished_crews:
            with self._mailboxes_lock:  # the id is used again: its earlier crew's end is history
                for address in addresses:
                    if address.crew_id is not None:
                        self._finished_crews.pop(address.crew_id, None)

    def claim(self, handles: Sequence[MailboxHandle]) -> MailboxAddress | None:
        """Add every one of ``handles``, or none: the first address already taken, if any."""
        with self._mailboxes_lock:
            taken = next((handle.address for handle in handles if handle.address in self._mailboxes), None)
            if taken is None:
                for handle in handles:
                    self._mailboxes[handle.address] = handle
        return taken

    def drop(self, handles: Sequence[MailboxHandle]) -> None:
        """Remove each of ``handles`` still live at its address (not a later registration there)."""
        with self._mailboxes_lock:
            for handle in handles:
                if self._mailboxes.get(handle.address) is handle:
                    del self._mailboxes[handle.address]

    def clear(self) -> list[MailboxHandle]:
        """Remove every live mailbox; the removed handles (for the caller to close)."""
        with self._mailboxes_lock:
            handles = list(self._mailboxes.values())
            self._mailboxes.clear()
        return handles
