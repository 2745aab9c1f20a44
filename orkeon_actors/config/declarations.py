"""``EventDeclarations``: the middleware stage that holds crews to their
``event.publish`` declarations (spec §13.3).

A crew whose blueprint declares ``event.publish`` (a list, even empty) may publish only
the topics it lists: a declaration ``{topic: order.processed, target_crew_id: billing}``
allows publishing ``order.processed`` scoped to ``billing``; one without
``target_crew_id`` allows the topic globally *and* scoped; a declared topic may be a
pattern (``orders.*``). Anything else is, per the crew's ``undeclared_publish``:

* ``warn`` (the default): logged (loguru, WARNING, naming crew, agent and topic) and
  published anyway;
* ``refuse``: :class:`~orkeon_actors.errors.UndeclaredPublishError` (an
  ``EventAclError``) to the publisher, and the message reaches nobody. An agent's
  ``publish_event`` tool call gets it as its error result.

A crew that never declared ``event.publish`` is not checked; neither are posts, sends,
replies (mailbox traffic is the ACL's: spec §10) nor the hub's own ``_system.`` topics.

Register the stage with the runtime (``Runtime.start(middleware=[EventDeclarations()])``,
or by its plugin name ``event-declarations``); crews started from a blueprint on that
runtime (:func:`~orkeon_actors.config.start_crew`,
:func:`~orkeon_actors.config.register_blueprint`, ``orkeon crew run``) register their
declarations with it. The check runs in the publisher's thread and reads an immutable
snapshot: no lock on the publish path.
"""

from __future__ import annotations

import threading
import weakref
from typing import Any

from loguru import logger

from orkeon_actors.config.spec import EventSpec
from orkeon_actors.errors import UndeclaredPublishError
from orkeon_actors.hub.pipeline import MiddlewareContext, Next, current_operation
from orkeon_actors.hub.routing import topic_matches
from orkeon_actors.model.ids import CrewId
from orkeon_actors.model.message import Message

__all__ = ["EventDeclarations", "declarations_of"]

_BY_HUB: weakref.WeakKeyDictionary[Any, EventDeclarations] = weakref.WeakKeyDictionary()
_BY_HUB_LOCK = threading.Lock()


def declarations_of(hub: object) -> EventDeclarations | None:
    """The :class:`EventDeclarations` stage attached to ``hub``'s runtime, if any."""
    with _BY_HUB_LOCK:
        return _BY_HUB.get(hub)


class EventDeclarations:
    """The stage (see the module docstring)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._crews: dict[CrewId, tuple[str, EventSpec]] = {}
        self._view: dict[CrewId, tuple[str, EventSpec]] = {}

    # -- the runtime's hooks -------------------------------------------------------------

    def attach(self, context: MiddlewareContext) -> None:
        with _BY_HUB_LOCK:
            _BY_HUB[context.hub] = self

    def detach(self) -> None:
        with _BY_HUB_LOCK:
            for hub in [h for h, stage in _BY_HUB.items() if stage is self]:
                del _BY_HUB[hub]

    # -- registrations -------------------------------------------------------------------

    def register(self, crew_id: CrewId | str, crew_name: str, event: EventSpec) -> None:
        """Hold crew ``crew_id`` to ``event.publish`` (nothing to hold when ``None``)."""
        with self._lock:
            if event.publish is None:
                self._crews.pop(CrewId(crew_id), None)
            else:
                self._crews[CrewId(crew_id)] = (crew_name, event)
            self._view = dict(self._crews)

    def unregister(self, crew_id: CrewId | str) -> None:
        with self._lock:
            self._crews.pop(CrewId(crew_id), None)
            self._view = dict(self._crews)

    def declared(self, crew_id: CrewId | str) -> EventSpec | None:
        """The declarations crew ``crew_id`` is held to, or ``None``."""
        entry = self._view.get(CrewId(crew_id))
        return None if entry is None else entry[1]

    # -- the stage -----------------------------------------------------------------------

    def on_publish(self, message: Message, next: Next) -> Message:
        """Pass ``message`` on, after warning about or refusing an undeclared topic."""
        entry = self._view.get(message.source_crew_id) if self._view else None
        if entry is None or current_operation() != "publish" or message.topic.startswith("_system."):
            return next(message)
        name, event = entry
        target = None if message.target_crew_id is None else str(message.target_crew_id)
        if any(
            topic_matches(d.topic, message.topic) and (d.target_crew_id is None or d.target_crew_id == target)
            for d in event.publish or ()
        ):
            return next(message)
        scope = "globally" if target is None else f"to crew {target}"
        declared = ", ".join(
            d.topic + ("" if d.target_crew_id is None else f" -> {d.target_crew_id}") for d in event.publish or ()
        )
        text = (
            f"crew {name!r} ({message.source_crew_id}, agent {message.source_agent_id}) published {message.topic!r} "
            f"{scope}, which its event.publish does not declare (declared: {declared or 'nothing'}); "
            "add it to event.publish"
        )
        if event.undeclared_publish == "refuse":
            raise UndeclaredPublishError(
                text, source=str(message.source_crew_id), target=target or "", rule="undeclared_publish"
            )
        logger.warning("{}; published anyway (undeclared_publish: warn)", text)
        return next(message)

    def on_receive(self, message: Message, next: Next) -> Message:
        """Receiving is never checked."""
        return next(message)

    def __repr__(self) -> str:
        return f"EventDeclarations({len(self._view)} crews)"
