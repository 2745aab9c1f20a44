"""Addresses known *not* to be durably registered, so a hot path does not ask SQLite
again and again.

A fleet host posting to a mailbox on another host asks "is it registered here?" several
times per post (the hub core's existence check, the sent history's choice of protocol,
the mailbox store's choice of local append or forward): each is a reader query
(``mailbox_registry``), which under many posting threads also queues them on the reader
pool. :class:`AbsentAddresses` remembers the "no" answers, bounded and least recently
used, and forgets *all* of them whenever a registration starts or commits
(:meth:`AbsentAddresses.registering`): every registration of this store goes through
the mailbox store (the store file is this process's alone), so a "no" remembered here
is as fresh as a new read. Only negative answers are kept: a positive one can be undone
by an unregistration, which needs no invalidation here. Thread-safe.

Race, spelled out: an answer read while a registration is in flight is stored only if
no registration started or committed since the reader took its generation
(:meth:`AbsentAddresses.generation`); the registration bumps the generation before it
is submitted and again once committed, so a "no" read before that commit cannot
outlive it.
"""

from __future__ import annotations

import threading
from collections import OrderedDict

from orkeon_actors.model.address import MailboxAddress

__all__ = ["AbsentAddresses"]


class AbsentAddresses:
    """Negative answers of ``is_registered``, valid until the next registration (see the
    module docstring). ``capacity`` bounds the addresses kept."""

    def __init__(self, capacity: int = 4096) -> None:
        if capacity < 1:
            raise ValueError(f"capacity must be positive, got {capacity}")
        self.capacity = capacity
        self._lock = threading.Lock()
        self._generation = 0
        self._absent: OrderedDict[MailboxAddress, int] = OrderedDict()

    def generation(self) -> int:
        """Take before reading the registry; give it back to :meth:`remember`."""
        with self._lock:
            return self._generation

    def known_absent(self, address: MailboxAddress) -> bool:
        """Whether ``address`` was read unregistered since the last registration."""
        with self._lock:
            generation = self._absent.get(address)
            if generation is None:
                return False
            if generation != self._generation:
                del self._absent[address]
                return False
            self._absent.move_to_end(address)
            return True

    def remember(self, address: MailboxAddress, generation: int) -> None:
        """``address`` was read unregistered by a read that started at ``generation``."""
        with self._lock:
            if generation != self._generation:
                return  # a registration started or committed meanwhile: the answer may be stale
            self._absent[address] = generation
            self._absent.move_to_end(address)
            if len(self._absent) > self.capacity:
                self._absent.popitem(last=False)

    def registering(self) -> None:
        """A registration is about to be submitted, or just committed: forget every answer."""
        with self._lock:
            self._generation += 1
            self._absent.clear()
