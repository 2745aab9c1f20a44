"""The values of the sent history: a completed :class:`SentRecord` (one per successful
post, send or reply of an agent) and a pending :class:`SentIntent` (a send reserved and
not completed yet). Their bytes are the business of :mod:`orkeon_actors.wire.sent_history`.

Both carry ``version`` (:data:`RECORD_VERSION`): it changes whenever the meaning of an
existing field changes or a field is added (sender-owned history requirements,
MESSAGE-R04); a reader refuses a version it does not know instead of guessing.
"""

from __future__ import annotations

import enum
from typing import Final

import attrs

from orkeon_actors.history.endpoint import Endpoint
from orkeon_actors.model.message import Message

__all__ = ["READABLE_VERSIONS", "RECORD_VERSION", "SendKind", "SentIntent", "SentRecord"]

RECORD_VERSION: Final = 2
"""2: each endpoint may carry the crew's readable ``name`` at publication time (left out
of the bytes when there is none)."""

READABLE_VERSIONS: Final = frozenset({1, RECORD_VERSION})
"""The versions a reader decodes: 1 is 2 without endpoint names (its rows and intents
keep their bytes, so the ledger still verifies them)."""


class SendKind(enum.Enum):
    POST = "post"
    SEND = "send"
    REPLY = "reply"


@attrs.frozen
class SentRecord:
    """A completed send as its sender's history holds it. ``metadata`` and ``body`` are
    ``None`` when absent, which is not the same as empty (``{}``, ``b""``)."""

    message_id: str
    kind: SendKind
    sender: Endpoint
    to: Endpoint
    sent_at_ms: int
    topic: str
    correlation_id: str | None
    idempotency_key: str | None
    metadata: dict[str, str] | None
    body: bytes | None
    schema_id: str
    version: int = RECORD_VERSION


@attrs.frozen
class SentIntent:
    """A reserved send: the original ``message`` (its exact bytes are what resumption
    materialises and records), who it is from and to, and its key. ``materialised`` is
    True once the recipient copy is known to exist (completion then only records)."""

    kind: SendKind
    sender: Endpoint
    to: Endpoint
    idempotency_key: str | None
    message: Message
    created_ms: int
    materialised: bool = False
    version: int = RECORD_VERSION

    @property
    def message_id(self) -> str:
        return str(self.message.id)
