"""Where the Studio learns what happens in a live runtime.

:class:`StudioTap` is a middleware stage and a hub wait observer:

* on the publish path it turns every publish, post, send and reply into a feed event
  stamped with the message's ``published_at`` (when it was posted, not when the chain
  returned: a consumer on another thread may receive it first, and the page orders events
  by ``at``), a reply with the requesting agent (``to_agent``, from the request's ``send``
  seen while watching), and an ACL refusal (an ``EventAclError`` raised further down the chain) into an
  ``acl_refused`` event before re-raising it unchanged;
* on the receive path it records a ``receive`` event with the message's latency
  (from ``published_at`` to the consumer);
* the hub's timeouts become ``timeout`` events;
* as the hub's ``wait_observer`` it keeps the table of pending waits the waits view
  shows, each with its deadline.

Cost: :meth:`install` makes it the hub's wait observer (a wait costs one dictionary
insert and one removal) and puts the stage in front of the hub's chain only while a
browser watches (``feed.on_watching``, ``InMemoryEventHub.set_tap``): with nobody
watching, a message runs the exact chain the runtime was started with. The stage never
changes, delays or drops a message, and refusals reach the caller exactly as without it.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable
from datetime import datetime
from typing import Any

from orkeon_actors.errors import EventAclError
from orkeon_actors.hub.observe import WaitInfo
from orkeon_actors.hub.pipeline import Next, current_operation
from orkeon_actors.model.clock import Clock, SystemClock
from orkeon_actors.model.message import Message
from orkeon_actors.studio.feed import StudioFeed, event
from orkeon_actors.wire.studio_feed import feed_message_fields

__all__ = ["StudioTap", "message_fields"]

_REQUESTERS = 4_096
"""Requests whose requesting agent the tap remembers for the reply's lane (oldest forgotten)."""


def message_fields(message: Message) -> dict[str, Any]:
    """The feed fields describing ``message``: ids, parties, topic and a payload preview
    (at most 240 bytes, decoded leniently), in the feed's wire format
    (:mod:`orkeon_actors.wire.studio_feed`)."""
    return feed_message_fields(message)


class StudioTap:
    """The Studio's stage and wait observer (see the module docstring)."""

    def __init__(self, feed: StudioFeed) -> None:
        self.feed = feed
        self.clock: Clock = SystemClock()
        self._waits: dict[str, WaitInfo] = {}
        self._waits_lock = threading.Lock()
        self._hub: Any = None
        self._previous_timeout_hook: Callable[[Message], None] | None = None
        self._requesters: OrderedDict[str, str] = OrderedDict()
        self._requesters_lock = threading.Lock()

    # -- installation ---------------------------------------------------------------------

    def install(self, hub: Any, clock: Clock) -> None:
        """Observe ``hub`` (an in-memory or durable hub): its waits from now on, its
        timeouts, and its messages while :attr:`feed` has a subscriber."""
        self.clock = clock
        self._hub = hub
        hub.wait_observer = self
        self._previous_timeout_hook = hub.on_wait_timed_out
        hub.on_wait_timed_out = self._timed_out
        self.feed.on_watching = lambda watching: hub.set_tap(self if watching else None)

    def uninstall(self) -> None:
        """Stop observing (idempotent)."""
        hub, self._hub = self._hub, None
        if hub is None:
            return
        self.feed.on_watching = None
        hub.set_tap(None)
        hub.wait_observer = None
        hub.on_wait_timed_out = self._previous_timeout_hook

    def _timed_out(self, message: Message) -> None:
        if self._previous_timeout_hook is not None:
            self._previous_timeout_hook(message)
        self.on_wait_timed_out(message)

    # -- the stage ----------------------------------------------------------------------

    def on_publish(self, message: Message, next: Next) -> Message:
        feed = self.feed
        if not feed.watching:
            return next(message)
        try:
            sent = next(message)
        except EventAclError as refusal:
            fields = message_fields(message)
            fields["detail"] = str(refusal)
            fields["rule"] = refusal.rule
            fields["operation"] = current_operation()
            feed.emit(event("acl_refused", self.clock.now(), **fields))
            raise
        operation = current_operation()
        fields = message_fields(sent)
        self._note_requester(operation, sent, fields)
        feed.emit(event(operation, sent.published_at, **fields))
        return sent

    def _note_requester(self, operation: str, sent: Message, fields: dict[str, Any]) -> None:
        """Remember a request's agent; name it on the reply (``to_agent``)."""
        correlation = None if sent.correlation_id is None else str(sent.correlation_id)
        if correlation is None:
            return
        with self._requesters_lock:
            if operation == "send" and sent.source_agent_id is not None:
                self._requesters[correlation] = str(sent.source_agent_id)
                if len(self._requesters) > _REQUESTERS:
                    self._requesters.popitem(last=False)
            elif operation == "reply":
                agent = self._requesters.pop(correlation, None)
                if agent is not None:
                    fields["to_agent"] = agent

    def on_receive(self, message: Message, next: Next) -> Message:
        feed = self.feed
        if not feed.watching:
            return next(message)
        received = next(message)
        now = self.clock.now()
        fields = message_fields(received)
        fields["latency_ms"] = round((now - received.published_at).total_seconds() * 1000, 3)
        fields["operation"] = current_operation()
        feed.emit(event("receive", now, **fields))
        return received

    def on_wait_timed_out(self, message: Message) -> None:
        if not self.feed.watching:
            return
        fields = message_fields(message)
        fields["crew"] = fields.pop("to_crew", None)  # the waiter's crew; the source is the hub
        fields["agent"] = None
        fields["waited_for"] = message.metadata.get("original_topic")
        fields["wait_id"] = message.metadata.get("original_wait_id")
        self.feed.emit(event("timeout", self.clock.now(), **fields))

    # -- the wait observer --------------------------------------------------------------

    def wait_started(self, info: WaitInfo) -> None:
        with self._waits_lock:
            self._waits[info.wait_id] = info

    def wait_ended(self, wait_id: str) -> None:
        with self._waits_lock:
            self._waits.pop(wait_id, None)

    def waits(self) -> list[WaitInfo]:
        """The pending waits now, soonest deadline first (``FOREVER`` waits last)."""
        with self._waits_lock:
            pending = list(self._waits.values())
        return sorted(pending, key=_deadline_key)


def _deadline_key(info: WaitInfo) -> tuple[int, datetime | str]:
    return (0, info.expires_at) if info.expires_at is not None else (1, info.wait_id)
