"""Signed cross-host messages: every gateway signs what it publishes, every gateway
verifies what it receives (cross-host messaging design, §2 invariant 6).

HMAC-SHA256 with one secret key per host, from configuration (:class:`HostKeys`). Chosen
over Ed25519 because a fleet is one operator's hosts sharing one configuration: a
symmetric key per host gives the same guarantee there (only a holder of host H's key can
sign as H; every gateway holds every host's key to verify) with the standard library
only, and costs about a microsecond per message. A fleet whose hosts must not be able to
sign for each other needs asymmetric keys; that is a configuration this module does not
offer yet.

What is signed: the canonical bytes of the signed header subset (:data:`SIGNED_HEADERS`:
message id, sender, recipient, signing host, expiry) followed by the body, so that no
header that authorizes or routes a message can be changed without the signature failing.
The canonical form is JSON with sorted keys and no spaces, each value a string.

:meth:`Verifier.verify` checks, in order, and raises ``SignatureError`` naming the first
that fails (the caller rejects the message to the dead-letter exchange):

1. the signing host is known and the signature is valid for its key;
2. the claimed sender lives on the signing host (``lives_on``, from signed presence);
3. the recipient matches the routing key the message arrived with;
4. the message has not expired (``expires_at``, unix milliseconds);
5. it is not a replay: a bounded set of recent message ids (``seen``), each with the
   :func:`message_digest` of what it carried, refuses a message whose id was seen with
   other content (another sender, recipient, signing host or body) within the window;
   past the window, the expiry bounds it. The set survives a restart: the gateway keeps
   each new entry (:meth:`Verifier.take_new`) in the host's store and gives them back
   at boot (:meth:`Verifier.restore`, :mod:`~orkeon_actors.fleet.seen_store`).

A message whose id *and* digest were seen already is not refused: :meth:`Verifier.verify`
returns ``False`` for it. It is a harmless duplicate, not an attack: the only one who can
produce it is its signer (a link republishing what the broker had not confirmed when the
connection dropped, an outbox forwarding again after a crash, with a fresh expiry) or
someone replaying the exact signed bytes, which the recipient-key check already confines
to the inbox it was meant for, where the receiving store and ``processed_messages``
deduplicate it. The gateway acknowledges and drops it, and counts it
(:class:`~orkeon_actors.fleet.gateway.Gateway`). A delivery the broker itself marks
``redelivered`` (one this gateway had not acknowledged when its connection dropped) is
such a duplicate too, and goes to the receiving store, which deduplicates it by id.
"""

from __future__ import annotations

import hashlib
import hmac
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping
from json.encoder import encode_basestring_ascii
from typing import Final

import attrs

from orkeon_actors.errors import InvalidArgumentError, SignatureError
from orkeon_actors.fleet.seen_store import Seen

__all__ = ["SIGNATURE_HEADER", "SIGNED_HEADERS", "HostKeys", "Signer", "Verifier", "canonical_bytes", "message_digest"]

SIGNED_HEADERS: Final = ("message_id", "from", "to", "host", "expires_at")
"""The headers a signature covers, besides the body."""
SIGNATURE_HEADER: Final = "signature"
_MIN_KEY_BYTES = 32


_CANONICAL_ORDER: Final = tuple(sorted(SIGNED_HEADERS))
_CANONICAL_KEYS: Final = tuple(
    ("{" if index == 0 else ",") + encode_basestring_ascii(name) + ":" for index, name in enumerate(_CANONICAL_ORDER)
)
"""``{"expires_at":``, ``,"from":``, ...: the canonical JSON object's keys, sorted, once."""


def canonical_bytes(headers: Mapping[str, object], body: bytes) -> bytes:
    """The bytes a signature covers: the signed headers as canonical JSON (sorted keys,
    no spaces, every value a string, ASCII escapes: byte for byte what
    ``json.dumps(..., sort_keys=True, separators=(",", ":"))`` writes, built without
    sorting per message), a newline, the body. Raises ``SignatureError`` if a signed
    header is missing."""
    try:
        values = [encode_basestring_ascii(str(headers[name])) for name in _CANONICAL_ORDER]
    except KeyError:
        missing = [name for name in SIGNED_HEADERS if name not in headers]
        raise SignatureError(
            f"the message lacks the signed header(s) {', '.join(missing)}: it cannot be verified"
        ) from None
    line = "".join([key + value for key, value in zip(_CANONICAL_KEYS, values, strict=True)]) + "}"
    return line.encode() + b"\n" + body


_DIGEST_BYTES = 16
_DIGEST_HEADERS: Final = ("host", "from", "to")


def message_digest(headers: Mapping[str, object], body: bytes) -> bytes:
    """What a message *is*, for the seen-set: a 16-byte SHA-256 digest of its signing
    host, sender, recipient and body (the body holds the message id and every field of
    the message). Its expiry is left out: the signer may sign the same message again with
    a fresh one (an outbox forwarding it again after a crash), and nobody else can."""
    digest = hashlib.sha256(body)
    for name in _DIGEST_HEADERS:
        digest.update(b"\n" + str(headers.get(name, "")).encode())
    return digest.digest()[:_DIGEST_BYTES]


@attrs.frozen
class HostKeys:
    """Every host's signing key: ``{host_id: key bytes}`` (at least 32 bytes each)."""

    keys: Mapping[str, bytes] = attrs.field()

    @keys.validator
    def _check(self, _attribute: object, value: Mapping[str, bytes]) -> None:
        for host, key in value.items():
            if not isinstance(key, bytes) or len(key) < _MIN_KEY_BYTES:
                raise InvalidArgumentError(
                    f"the signing key of host {host!r} must be at least {_MIN_KEY_BYTES} random bytes "
                    "(e.g. secrets.token_bytes(32)), shared with every host of the fleet"
                )

    def key_of(self, host: str) -> bytes | None:
        return self.keys.get(host)


class Signer:
    """Signs what one host publishes."""

    def __init__(self, host: str, keys: HostKeys) -> None:
        key = keys.key_of(host)
        if key is None:
            raise InvalidArgumentError(f"no signing key for this host {host!r}: add it to the fleet's keys")
        self.host = host
        self._key = key

    def sign(self, headers: dict[str, object], body: bytes) -> dict[str, object]:
        """``headers`` with ``host`` set to this host and the signature added."""
        signed = dict(headers)
        signed["host"] = self.host
        signed[SIGNATURE_HEADER] = hmac.new(self._key, canonical_bytes(signed, body), hashlib.sha256).hexdigest()
        return signed


class Verifier:
    """Verifies what a gateway receives (see the module docstring for the order).

    ``lives_on(sender) -> host | None`` answers where a sender lives according to signed
    presence; ``now_ms()`` is the clock (unix milliseconds); ``seen`` bounds the replay
    set (most recent message ids).
    """

    def __init__(
        self,
        keys: HostKeys,
        lives_on: Callable[[str], str | None],
        now_ms: Callable[[], int],
        *,
        seen: int = 100_000,
    ) -> None:
        self._keys = keys
        self._lives_on = lives_on
        self._now_ms = now_ms
        self._seen: OrderedDict[str, tuple[bytes, int]] = OrderedDict()
        """Recent message ids, the :func:`message_digest` each came with, its expiry."""
        self._seen_max = seen
        self._new: list[Seen] = []

    def restore(self, entries: Iterable[Seen]) -> None:
        """Take back the seen-set kept in the host's store (:mod:`~orkeon_actors.fleet.seen_store`),
        before anything is verified; the most recent ``seen`` entries are kept."""
        for entry in entries:
            self._seen[entry.message_id] = (entry.digest, entry.expires_at_ms)
            if len(self._seen) > self._seen_max:
                self._seen.popitem(last=False)

    def take_new(self) -> list[Seen]:
        """The ids seen the first time since the last call (to keep in the store)."""
        new, self._new = self._new, []
        return new

    def signing_host(self, headers: Mapping[str, object], body: bytes) -> str:
        """Check 1 alone, and the expiry: the host whose key signed the message. What
        presence messages need (they announce where senders live, so check 2 cannot
        apply to them)."""
        host = self.signer_of(headers, body)
        expires = int(str(headers["expires_at"]))
        if expires <= self._now_ms():
            raise SignatureError(f"message {headers['message_id']} expired at {expires} (unix ms): dropped")
        return host

    def signer_of(self, headers: Mapping[str, object], body: bytes) -> str:
        """Check 1 alone: the host whose key signed the message, expired or not (what a
        dead-letter report needs: an expired message is still authentically its
        sender's)."""
        host = str(headers.get("host", ""))
        key = self._keys.key_of(host)
        if key is None:
            raise SignatureError(f"signed by unknown host {host!r}: refused")
        given = headers.get(SIGNATURE_HEADER)
        expected = hmac.new(key, canonical_bytes(headers, body), hashlib.sha256).hexdigest()
        if not isinstance(given, str | bytes) or not hmac.compare_digest(
            given.encode() if isinstance(given, str) else given, expected.encode()
        ):
            raise SignatureError(f"bad signature for host {host!r}: the message was altered or forged")
        return host

    def verify(self, headers: Mapping[str, object], body: bytes, routing_key_recipient: str) -> bool:
        """Run the checks (module docstring); ``True`` for a message seen the first time,
        ``False`` for a duplicate of one seen already (same id, same digest). Raises
        ``SignatureError`` naming the first check that failed; a replay (a seen id with
        other content) among them. Not thread-safe: one caller at a time."""
        host = self.signing_host(headers, body)
        sender = str(headers["from"])
        home = self._lives_on(sender)
        if home != host:
            raise SignatureError(
                f"sender {sender} lives on {home!r} by presence, but host {host!r} signed the message: refused"
            )
        if str(headers["to"]) != routing_key_recipient:
            raise SignatureError(
                f"the message is for {headers['to']} but arrived keyed for {routing_key_recipient}: "
                "a captured message replayed into another inbox"
            )
        return self.first_sight(headers, body)

    def knows(self, host: str) -> bool:
        """Whether this fleet's keys hold a key for ``host``."""
        return self._keys.key_of(host) is not None

    def has_seen(self, message_id: str) -> bool:
        """Whether ``message_id`` is in the seen-set (not thread-safe, as :meth:`verify`)."""
        return message_id in self._seen

    def first_sight(self, headers: Mapping[str, object], body: bytes) -> bool:
        """Check 5 alone, for a message verified otherwise (a control request): ``True``
        the first time its id is seen (it is remembered), ``False`` for a duplicate;
        ``SignatureError`` for a seen id with other content."""
        message_id = str(headers["message_id"])
        digest = message_digest(headers, body)
        seen = self._seen.get(message_id)
        if seen is not None:
            if seen[0] != digest:
                raise SignatureError(
                    f"message {message_id} was already received with other content: a replay under a seen id"
                )
            return False
        expires = int(str(headers["expires_at"]))
        self._seen[message_id] = (digest, expires)
        self._new.append(Seen(message_id, digest, expires))
        if len(self._seen) > self._seen_max:
            self._seen.popitem(last=False)
        return True
