"""How one host joins a fleet: :class:`FleetConfig` (broker URI, host id, signing keys,
bounds) and where the keys come from (:func:`load_keys`)."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Final

import attrs

from orkeon_actors.errors import InvalidArgumentError
from orkeon_actors.fleet.signing import HostKeys
from orkeon_actors.hub.amqp.topology import InboxCaps

__all__ = ["KEYS_ENV", "FleetConfig", "load_keys"]

KEYS_ENV: Final = "ORKEON_FLEET_KEYS"
"""The environment variable naming the fleet's key file when no keys are given."""
_HOST_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,62}$")


def load_keys(path: str | os.PathLike[str] | None = None) -> HostKeys:
    """The fleet's signing keys from a JSON file ``{"host-a": "<hex>", ...}`` (each key
    at least 32 random bytes, hex-encoded; every host holds every host's key): ``path``,
    else the file named by ``$ORKEON_FLEET_KEYS``. Raises ``InvalidArgumentError`` saying
    what to provide when neither is there or the file is not such a mapping, or when the
    file is readable by its group or others (it must be mode 600 or stricter)."""
    source = path if path is not None else os.environ.get(KEYS_ENV)
    if source is None:
        raise InvalidArgumentError(
            f"a fleet host needs the fleet's signing keys: pass fleet=FleetConfig(..., keys=HostKeys(...)) or set "
            f"${KEYS_ENV} to a JSON file mapping each host id to a hex key of at least 32 random bytes "
            '(e.g. {"host-a": secrets.token_hex(32), "host-b": ...}), the same file on every host'
        )
    _check_private(Path(source))
    try:
        data = json.loads(Path(source).read_text())
        if not isinstance(data, dict):
            raise ValueError("not a JSON object")
        keys = {str(host): bytes.fromhex(str(key)) for host, key in data.items()}
    except (OSError, ValueError) as exc:
        raise InvalidArgumentError(
            f"cannot read the fleet's keys from {source}: {exc}; it must be a JSON object mapping each host id "
            "to a hex key"
        ) from exc
    return HostKeys(keys)


def _check_private(path: Path) -> None:
    """``InvalidArgumentError`` if the keys file is readable or writable by its group or
    by others (POSIX modes): it holds every host's signing key."""
    try:
        mode = path.stat().st_mode
    except OSError:
        return  # the read below says what is wrong with the path
    if os.name == "posix" and mode & 0o077:
        raise InvalidArgumentError(
            f"the fleet's keys file {path} is open to its group or to others (mode {mode & 0o777:04o}): whoever "
            f"reads it can sign as any host; make it private with: chmod 600 {path}"
        )


def _check_host(_instance: object, _attribute: object, value: str) -> None:
    if not isinstance(value, str) or not _HOST_ID.match(value):
        raise InvalidArgumentError(
            f"host id {value!r} is not valid: use 1-63 letters, digits, '-' or '_' (it is part of queue names "
            "and routing keys), e.g. host_id='host-a'"
        )


@attrs.frozen
class FleetConfig:
    """One host's membership of a fleet.

    ``url``: the broker's AMQP URI (``amqps://`` with TLS options in its query);
    ``host_id``: this host, unique in the fleet; ``keys``: every host's signing key.
    ``prefetch`` bounds the unacknowledged deliveries of each inbox (the inbox cap made
    real); ``presence_interval`` / ``presence_ttl`` time the heartbeats (seconds);
    ``message_ttl`` is how long a post stays valid (its ``expires_at``); ``seen`` bounds
    the replay set; ``kinds`` are the crew kinds this host can spawn;
    ``publish_timeout`` bounds how long a post waits for the broker's confirm
    (``BrokerUnavailableError`` after it); ``delivery_timeout`` bounds how long a
    ``post(..., confirm_delivery=True)`` then waits for the recipient host's DELIVERED
    receipt (``DeliveryNotConfirmedError`` after it); ``connect_timeout`` bounds the
    first connect. ``inbox_caps`` bounds every inbox this host declares (queue
    arguments: :class:`~orkeon_actors.hub.amqp.topology.InboxCaps`, 100,000 messages,
    1 GiB, a 7-day message TTL by default); an inbox found declared otherwise is used as
    it is, with a WARNING naming it and the fix (``orkeon fleet caps --apply``).
    """

    url: str
    host_id: str = attrs.field(validator=_check_host)
    keys: HostKeys
    prefetch: int = 64
    presence_interval: float = 2.0
    presence_ttl: float = 7.0
    message_ttl: float = 3600.0
    seen: int = 100_000
    kinds: tuple[str, ...] = ()
    publish_timeout: float = 10.0
    connect_timeout: float = 10.0
    delivery_timeout: float = 5.0
    inbox_caps: InboxCaps = attrs.field(factory=InboxCaps)

    def __attrs_post_init__(self) -> None:
        if self.keys.key_of(self.host_id) is None:
            raise InvalidArgumentError(
                f"the fleet's keys have no key for this host {self.host_id!r}: add one (every host needs its own, "
                "and every host holds them all)"
            )
        if not self.delivery_timeout > 0:
            raise InvalidArgumentError(
                f"delivery_timeout must be > 0 seconds (how long a confirmed post waits for its receipt), "
                f"got {self.delivery_timeout}"
            )
        if not 0 < self.presence_interval < self.presence_ttl:
            raise InvalidArgumentError(
                f"need 0 < presence_interval < presence_ttl (a few heartbeats per TTL, so one lost heartbeat "
                f"does not drop a host), got {self.presence_interval} and {self.presence_ttl}"
            )
        if not isinstance(self.inbox_caps, InboxCaps):
            raise InvalidArgumentError(
                f"inbox_caps must be an InboxCaps (orkeon_actors.hub.amqp.topology), got {self.inbox_caps!r}"
            )
        if self.prefetch < 1:
            raise InvalidArgumentError(
                f"prefetch must be >= 1 (a bound on unacknowledged deliveries), got {self.prefetch}"
            )
