"""Seeded fault injection for a :class:`~orkeon_actors.sim.Simulation`: ``Simulation(seed=N, faults=Faults(...))``.

Every fault is drawn from one :class:`random.Random` seeded with the simulation's seed
(apart from the scheduler's), on the simulation's single thread, so a seed that shows a
failure shows the same failure every time it runs. Each injected fault is recorded in the
trace (kind ``fault``) on the lane of the crew it hit.

What can be injected, and why each is something the port allows (Orkeon EventHub & Crew
Lifecycle specification):

* ``delay``: a delivery to a crew (one turn of the crew actor: the messages its inbox
  holds) is held back by up to ``max_delay`` virtual seconds. The whole inbox waits, so
  mailbox FIFO and per-subscriber topic order (§10.4) still hold; nothing promises a
  delivery latency, and no order holds across mailboxes and topics.
* ``drop_replies``: a reply to a ``send_request`` is lost on its way (the replier's call
  succeeds, the requester never sees it): the requester's mandatory timeout (§9.3) turns
  it into ``timed_out: true``, exactly as for a responder that never answered. Posts and
  topic deliveries are never dropped: the port promises no loss for them.
* ``model_errors``: a model call raises :class:`SimulatedModelError` (a provider outage):
  the agent fails, and with it the crew, with that cause.
* ``budget_exhaustion``: a model call finds the agent's budget spent
  (:class:`~orkeon_actors.errors.BudgetExhaustedError`, §9.4).
* ``crashes``: a crew that has just parked every agent (the point where the lifecycle
  writes its snapshot) crashes, and is restored from that snapshot as a wake after a
  restart would: pending waits re-armed with their remaining time, an expired one
  delivered as its ``WaitTimedOutMessage``. Every snapshot point gets a draw: the first
  park and each later one (a re-armed wait, each turn of a ``receive_message`` loop),
  not the park a restored crew resumes. Crash points are these snapshot points only:
  a crash between two snapshots loses, with the durable store, only what the crew's
  next snapshot would have recorded, and an in-memory simulation cannot keep the
  mailbox contents the store would redeliver.

Probabilities are per opportunity: per crew delivery, per reply, per model call, per
snapshot point.
"""

from __future__ import annotations

import random
from collections.abc import Callable

import attrs

from orkeon_actors.crew.model import AnyModel, ModelRequest, ModelResponse
from orkeon_actors.errors import BudgetExhaustedError, InvalidArgumentError
from orkeon_actors.hub.pipeline import Next, current_operation
from orkeon_actors.model.message import Message

__all__ = ["FaultInjector", "Faults", "FaultyModel", "SimulatedModelError"]


def _probability(_instance: object, attribute: attrs.Attribute[float], value: float) -> None:
    if not 0.0 <= value <= 1.0:
        raise ValueError(f"Faults.{attribute.name} is a probability between 0 and 1, got {value!r}")


@attrs.frozen
class Faults:
    """Which faults to inject and how often (module docstring). All zero: none."""

    delay: float = attrs.field(default=0.0, validator=_probability)
    max_delay: float = 5.0
    drop_replies: float = attrs.field(default=0.0, validator=_probability)
    model_errors: float = attrs.field(default=0.0, validator=_probability)
    budget_exhaustion: float = attrs.field(default=0.0, validator=_probability)
    crashes: float = attrs.field(default=0.0, validator=_probability)

    def __attrs_post_init__(self) -> None:
        if self.max_delay <= 0:
            raise ValueError(f"Faults.max_delay must be > 0 virtual seconds, got {self.max_delay!r}")

    @classmethod
    def parse(cls, text: str) -> Faults:
        """``"delay=0.2,model_errors=0.05"`` (the CLI's ``--faults``)."""
        values: dict[str, float] = {}
        names = [f.name for f in attrs.fields(cls)]
        for part in filter(None, (p.strip() for p in text.split(","))):
            name, sep, raw = part.partition("=")
            if not sep or name.strip() not in names:
                raise ValueError(
                    f"--faults takes name=probability pairs with names among {', '.join(names)}; got {part!r}"
                )
            try:
                values[name.strip()] = float(raw)
            except ValueError:
                raise ValueError(f"--faults {name.strip()}: {raw!r} is not a number") from None
        return cls(**values)


class SimulatedModelError(RuntimeError):
    """A model call failed by fault injection (a simulated provider outage)."""


Record = Callable[[str, str | None, str], None]
"""``record(crew_id, agent_id, detail)``: report an injected fault to the trace."""


class FaultInjector:
    """Draws the faults of one simulation from its seed. Also the middleware stage that
    loses replies (``on_publish`` for the ``reply`` operation)."""

    def __init__(self, faults: Faults, seed: int, record: Record) -> None:
        self.faults = faults
        self._rng = random.Random(f"orkeon-faults:{seed}")
        self._record = record
        self.injected = 0

    def draw(self, probability: float) -> bool:
        """One Bernoulli draw (no draw at all when ``probability`` is 0, so enabling one
        kind of fault does not shift the draws of a run without it)."""
        return probability > 0 and self._rng.random() < probability

    def delay_seconds(self) -> float:
        return round(self._rng.uniform(0.0, self.faults.max_delay), 6) or self.faults.max_delay

    def note(self, crew_id: str, agent_id: str | None, detail: str) -> None:
        self.injected += 1
        self._record(crew_id, agent_id, detail)

    # -- replies (a middleware stage) ---------------------------------------------------

    def on_publish(self, message: Message, next: Next) -> Message:
        if current_operation() == "reply" and self.draw(self.faults.drop_replies):
            crew = str(message.target_crew_id) if message.target_crew_id is not None else str(message.source_crew_id)
            self.note(crew, None, f"reply from {message.source_crew_id} lost")
            return message  # accepted from the replier, never delivered
        return next(message)

    def on_receive(self, message: Message, next: Next) -> Message:
        return next(message)

    # -- models -------------------------------------------------------------------------

    def model_fault(self, request: ModelRequest) -> BaseException | None:
        if self.draw(self.faults.model_errors):
            self.note(request.crew_id, request.agent_id, "model call failed")
            return SimulatedModelError(f"simulated model outage at turn {request.turn} of {request.agent_id}")
        if self.draw(self.faults.budget_exhaustion):
            self.note(request.crew_id, request.agent_id, "budget exhausted")
            return BudgetExhaustedError(f"simulated: the budget of {request.agent_id} ran out at turn {request.turn}")
        return None


class FaultyModel:
    """Wraps an agent's model: each call may fail as the injector draws."""

    def __init__(self, model: AnyModel, injector: FaultInjector) -> None:
        self.model = model
        self._injector = injector

    def complete(self, request: ModelRequest) -> ModelResponse:
        fault = self._injector.model_fault(request)
        if fault is not None:
            raise fault
        response = self.model.complete(request)
        if not isinstance(response, ModelResponse):  # an async model's coroutine
            raise InvalidArgumentError(
                f"simulated model faults wrap synchronous models only, not {type(self.model).__name__}"
            )
        return response
