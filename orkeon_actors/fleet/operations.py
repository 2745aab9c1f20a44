"""``rt.fleet``: what a fleet host runs besides its hub: cross-host spawn and stop
(cross-host messaging design, §5 U4) and the dead-letter reporter (§10.1).

A runtime started with a broker (``Runtime.start(store=..., broker=..., host_id=...)``)
gets a :class:`Fleet` as ``rt.fleet``, sharing the hub's gateway (one connection, one
I/O thread per process). It declares ``control.<host>`` (durable, consumed exclusively:
a second runtime with the same host id fails loudly) and its answers queue, serves
requests with the supervisor given to :meth:`Fleet.serve`, and consumes
``fleet.dlq.reports``.

Guarantees of :meth:`Fleet.spawn`:

* **Fast refusals.** A host that is not on the roster, or whose gateway does not list
  the crew kind, is refused at once (``FleetControlError``) without a request being sent.
* **Ready when it returns.** The target host starts the crew with its supervisor, waits
  (up to 30 s) until the crew's actor reported a status and every mailbox it opened is
  announced, then answers with their addresses; the caller waits until its own roster
  shows each of them on the target host. So a ``post`` to the new crew right after ``spawn`` returns is routable.
* **A bound.** The call returns the crew id or raises within ``timeout`` seconds:
  ``FleetControlError`` (refused remotely, naming the remote error),
  ``FleetTimeoutError`` (no answer, or the crew never appeared on the roster),
  ``BrokerUnavailableError`` (the request could not be published).

Guarantees of :meth:`Fleet.stop`:

* **It ends the crew, whatever its state.** The host announcing the crew ends it with
  ``CrewSupervisor.end``, on the supervisor's own thread: a live or waking crew is told
  :class:`~orkeon_actors.crew.protocol.End` (handled between two turns), one falling
  asleep does not sleep (or, if its actor was already stopping for the sleep, is woken
  once the sleep committed and told then), a sleeping one is woken and told. It fails
  with the cause ``CrewStopped`` (``wait_finished`` there raises ``CrewFailedError``
  saying who stopped it), its outcome is recorded, its snapshot deleted and its
  mailboxes closed: later posts to it fail with ``MailboxNotFoundError``, nothing wakes
  it again.
* **Gone from the roster when it returns.** The host answers once the crew's outcome is
  durable (an event: ``CrewSupervisor.when_finished``, no polling) and its mailboxes are
  closed, after a heartbeat without them; the caller drops them from its own view on the
  answer, so ``where`` says ``None`` at once.
* **A bound.** It returns the crew id or raises within ``timeout`` seconds:
  ``FleetControlError`` (no host or several announce the crew, the host does not know it,
  or refused it, naming the remote error), ``FleetTimeoutError`` (no answer in time, or
  the crew did not end within the host's own bound of 30 s),
  ``BrokerUnavailableError``. Stopping a crew that finished already returns its id.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from typing import TYPE_CHECKING, Final

from orkeon_actors.errors import FleetControlError, FleetTimeoutError, InvalidArgumentError
from orkeon_actors.fleet.cancels import RemoteCancels
from orkeon_actors.fleet.control import ControlPlane
from orkeon_actors.fleet.dead_letters import DeadLetterReporter, DeliveryFailed, mailbox_reporter
from orkeon_actors.fleet.failures import OP as FAILURE_OP
from orkeon_actors.fleet.failures import FailureBook, SenderReports
from orkeon_actors.fleet.last_value_sync import LastValueSync
from orkeon_actors.fleet.roster import GATEWAY
from orkeon_actors.hub.amqp.topology import Declarer
from orkeon_actors.lifecycle.ports import LifecycleState
from orkeon_actors.model.ids import CrewId

if TYPE_CHECKING:
    from orkeon_actors.crew.snapshot import CrewOutcome
    from orkeon_actors.fleet.hub import AmqpEventHub
    from orkeon_actors.lifecycle.supervisor import CrewSupervisor

__all__ = ["STOPPED", "Fleet"]

_POLL = 0.01
_READY_WITHIN = 30.0
"""How long a host waits for a crew it spawned to report a status and open its mailboxes."""
_ENDED_WITHIN = 30.0
"""How long a host waits for a crew it was asked to stop to end (its outcome durable)."""
STOPPED: Final = "CrewStopped"
"""The ``error_type`` of the failure of a crew ended by :meth:`Fleet.stop`."""


class Fleet:
    """One host's fleet operations (see the module docstring)."""

    def __init__(self, hub: AmqpEventHub) -> None:
        self.hub = hub
        self.host_id = hub.host_id
        gateway = hub.gateway
        self._supervisor: CrewSupervisor | None = None
        self.control = ControlPlane(
            self.host_id,
            gateway.link,
            gateway.signer,
            gateway.verifier,
            spawn=self._spawn_here,
            stop=self._stop_here,
            first_sight=gateway.first_sight,
        )
        self.failures = FailureBook()
        """Delivery failures of this host's senders that have no mailbox (:mod:`~orkeon_actors.fleet.failures`)."""
        self.control.ops[FAILURE_OP] = self.failures.served
        self.dead_letters = DeadLetterReporter(
            gateway.link,
            gateway.verifier,
            SenderReports(self.host_id, mailbox_reporter(hub), self.failures, self.control),
        )
        self.last_values = LastValueSync(hub, self.control)
        """The boot exchange of retained last values with the other hosts."""
        self.cancels = RemoteCancels(hub, self.control)
        """A cancelled ``send``'s request withdrawn on the replier's host too."""

    def start(self) -> Fleet:
        """Declare the control queues (now and on every reconnect), serve them, start the
        dead-letter reporter. ``ExclusiveConsumerError`` if this host id already serves."""
        host = self.host_id
        self.hub.gateway.add_topology(lambda declarer: declarer.control(host))
        _declare_now(self.hub, Declarer().control(host))
        self.control.start()
        self.dead_letters.start()
        self.last_values.start()
        return self

    def close(self) -> None:
        """End the dead-letter worker and the last-value exchange (the hub's gateway
        closes the connection)."""
        self.last_values.stop()
        self.dead_letters.stop()

    def delivery_failed(self, message_id: str) -> DeliveryFailed | None:
        """Why message ``message_id``, posted from this host by a sender without a
        mailbox, was dead-lettered (``None``: no failure heard of, or it left the book's
        latest :data:`~orkeon_actors.fleet.failures.KEPT`)."""
        return self.failures.get(str(message_id))

    @property
    def on_delivery_failed(self) -> list[Callable[[DeliveryFailed], None]]:
        """Callbacks told of each such failure (on the reporter's or the control
        plane's worker thread: do not block)."""
        return self.failures.listeners

    def serve(self, supervisor: CrewSupervisor) -> None:
        """Run the spawn and stop requests other hosts send here with ``supervisor``
        (its factories are the kinds this host can spawn: announce them with
        ``FleetConfig(kinds=...)``)."""
        self._supervisor = supervisor

    # -- asking another host ------------------------------------------------------------

    def spawn(self, blueprint: str, *, host: str, crew_id: str | None = None, timeout: float = 30.0) -> str:
        """Start a crew of kind ``blueprint`` on ``host``; its id once it is ready and
        announced (see the module docstring)."""
        deadline = time.monotonic() + timeout
        gateway = next((p for p in self.hub.roster() if p.host == host and p.entity.startswith(GATEWAY)), None)
        if gateway is None:
            raise FleetControlError(
                f"host {host!r} is not on the roster (hosts now: {', '.join(self._hosts()) or 'none'}): "
                "start it, or check the host id"
            )
        if gateway.kinds and blueprint not in gateway.kinds:
            raise FleetControlError(
                f"host {host!r} cannot spawn {blueprint!r}: it announces the kinds {', '.join(gateway.kinds)}"
            )
        crew, entities = self.control.spawn_announced(host, blueprint, crew_id, timeout=timeout)
        self._await_announced(crew, host, entities, deadline)
        return crew

    def stop(self, crew_id: str, *, timeout: float = 30.0) -> str:
        """End crew ``crew_id`` on the host that announces it; its id once it ended and
        left the roster (see the module docstring)."""
        host = self._host_of(crew_id)
        crew, entities = self.control.stop_ended(host, crew_id, timeout=timeout)
        self.hub.gateway.roster.forget(host, entities)
        return crew

    def _hosts(self) -> list[str]:
        return sorted({p.host for p in self.hub.roster()})

    def _host_of(self, crew_id: str) -> str:
        prefixes = (f"agent://{crew_id}/", f"crew://{crew_id}")
        hosts = {p.host for p in self.hub.roster() if p.entity.startswith(prefixes)}
        if len(hosts) != 1:
            where = "no host announces it" if not hosts else f"hosts {', '.join(sorted(hosts))} announce it"
            raise FleetControlError(f"cannot stop crew {crew_id!r}: {where}")
        return hosts.pop()

    def _await_announced(self, crew: str, host: str, entities: list[str], deadline: float) -> None:
        roster = self.hub.gateway.roster
        while not all(roster.lives_on(entity) == host for entity in entities):
            if time.monotonic() > deadline:
                missing = [e for e in entities if roster.lives_on(e) != host]
                raise FleetTimeoutError(
                    f"crew {crew!r} started on {host!r} but {', '.join(missing)} did not reach this host's roster "
                    "in time"
                )
            time.sleep(_POLL)

    # -- serving another host -------------------------------------------------------------

    def _served(self) -> CrewSupervisor:
        if self._supervisor is None:
            raise InvalidArgumentError(
                f"host {self.host_id!r} serves no supervisor: call rt.fleet.serve(supervisor) on it"
            )
        return self._supervisor

    def _spawn_here(self, blueprint: str, crew_id: str | None) -> tuple[str, list[str]]:
        supervisor = self._served()
        if blueprint not in supervisor.factories:
            raise InvalidArgumentError(
                f"no factory registered for blueprint {blueprint!r} on {self.host_id!r}: "
                f"it has {', '.join(sorted(supervisor.factories)) or 'none'}"
            )
        crew = supervisor.spawn(blueprint, crew_id)
        deadline = time.monotonic() + _READY_WITHIN
        while supervisor.status(crew) is None or not self._mailboxes_of(crew):
            if time.monotonic() > deadline:
                raise FleetTimeoutError(
                    f"crew {crew} did not become ready on {self.host_id!r} within {_READY_WITHIN} s"
                )
            time.sleep(_POLL)
        entities = self._mailboxes_of(crew)
        roster = self.hub.gateway.roster
        while not all(roster.lives_on(entity) == self.host_id for entity in entities):
            if time.monotonic() > deadline:
                raise FleetTimeoutError(f"crew {crew}'s mailboxes were not announced on {self.host_id!r}")
            time.sleep(_POLL)
        roster.heartbeat()
        return str(crew), entities

    def _mailboxes_of(self, crew: CrewId) -> list[str]:
        return sorted(str(address) for address in self.hub.durable_mailboxes if address.crew_id == crew)

    def _stop_here(self, crew_id: str, requester: str) -> list[str]:
        """End ``crew_id`` here (asked by host ``requester``); the mailboxes it closed."""
        supervisor = self._served()
        crew = CrewId(crew_id)
        if supervisor.state(crew) is LifecycleState.UNKNOWN:
            raise FleetControlError(f"crew {crew_id!r} is not running, asleep or finished on {self.host_id!r}")
        entities = self._mailboxes_of(crew)
        ended: Future[CrewOutcome] = Future()
        withdraw = supervisor.when_finished(crew, ended.set_result)  # called once
        try:
            # On the supervisor's thread, whatever the crew's state (live, falling asleep, asleep).
            supervisor.end(crew, STOPPED, f"stopped by rt.fleet.stop from host {requester!r}")
            ended.result(_ENDED_WITHIN)
        except FutureTimeout:
            raise FleetTimeoutError(
                f"crew {crew_id!r} did not end on {self.host_id!r} within {_ENDED_WITHIN} s"
            ) from None
        finally:
            withdraw()
        self.hub.gateway.roster.heartbeat()  # the others' views drop its mailboxes with this round
        return entities


def _declare_now(hub: AmqpEventHub, declarer: Declarer, timeout: float = 10.0) -> None:
    done: Future[None] = Future()

    def run() -> None:
        channel = hub.gateway.link.channel
        if channel is None:
            done.set_exception(FleetControlError("the broker link is reconnecting: retry"))
            return
        declarer.run(channel, lambda: done.set_result(None))

    hub.gateway.link.run_on_io_thread(run)
    done.result(timeout)
