"""The floor of ``orkeon bench amqp``: what the fleet's own guarantees cost per message
on top of raw pika, each operation timed alone in this process, and how busy the
machine's cores (the broker's included) were while a rate was measured.

The distributed hub's design (cross-host messaging, §2 invariant 6, §4, §8) mandates, per
cross-host message, work raw pika does not do: the publishing gateway encodes the
:mod:`~orkeon_actors.wire.amqp` envelope and signs it (HMAC-SHA256 over the canonical
signed headers and the body, :mod:`~orkeon_actors.fleet.signing`); the receiving gateway
verifies it (signature, seen-set) and decodes it; it holds the message durably (a
``mailboxes`` row committed, in batches of what the prefetch window brought) before the
``basic.ack``, deletes that row once the message is consumed, and a crew records the
message id in ``processed_messages`` (exactly-once processing). :func:`floor_us` times
each of these with the code the hub runs (the same encoder, signer, verifier and SQL
statements, on a scratch store with the hub's schema and durability), on CPU time
(``time.process_time``: user + system of this process, fsync syscalls included, the
disk's own wait not) and on wall time.

If raw pika and the hub are both bound by the CPU of the same cores, a rate is inversely
proportional to the CPU per message, so ``raw_cpu / (raw_cpu + floor)`` bounds the ratio
the hub can reach however lean the rest of its path becomes: the ``*_floor_bound`` rows.
:class:`~orkeon_actors.bench.amqp_fleet.MachineWatch` tells whether that premise holds: the share of the machine's cores
busy over a measured window (``/proc/stat``) and the CPU the broker's Erlang VM
(``beam.smp``, found by name in ``/proc``) spent per message.
"""

from __future__ import annotations

import os
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import attrs

from orkeon_actors.fleet.signing import HostKeys, Signer, Verifier
from orkeon_actors.model.address import MailboxAddress
from orkeon_actors.model.ids import AgentId, CrewId, MessageId
from orkeon_actors.model.message import Message
from orkeon_actors.store import mailboxes
from orkeon_actors.store.codec import format_time
from orkeon_actors.store.config import StoreConfig
from orkeon_actors.store.connection import open_connection
from orkeon_actors.store.schema import migrate
from orkeon_actors.wire import amqp as wire

__all__ = ["Floor", "floor_us"]

_BODY = b'{"order":42,"amount":"12.50","currency":"EUR"}'
"""The raw baseline's 47-byte payload (:mod:`~orkeon_actors.bench.amqp_raw`)."""
_PROCESSED = "INSERT OR IGNORE INTO processed_messages (message_id, crew_id, processed_at) VALUES (?, ?, ?)"
_TO = MailboxAddress.parse("agent://bench-sink/consumer")


@attrs.frozen
class Floor:
    """CPU microseconds per message of each mandated operation (``*_wall_us``: wall)."""

    encode_us: float
    sign_us: float
    verify_us: float
    decode_us: float
    hold_us: float
    """Insert the ``mailboxes`` row and commit, per message, at the batch size given."""
    hold_wall_us: float
    consume_us: float
    """Delete the held row once consumed and commit, per message, same batch size."""
    processed_us: float
    """Insert the ``processed_messages`` row and commit, per message, same batch size."""
    batch: int

    @property
    def wire_us(self) -> float:
        """Encode, sign, verify and decode: the per-message work of the two gateways."""
        return self.encode_us + self.sign_us + self.verify_us + self.decode_us

    @property
    def store_us(self) -> float:
        """The receiving store's mandated writes: hold, consume, processed id."""
        return self.hold_us + self.consume_us + self.processed_us


def _messages(count: int) -> list[Message]:
    now = datetime.now(UTC)
    crew, agent, to = CrewId("bench-poster"), AgentId("poster-0"), _TO.crew_id
    return [
        Message(MessageId.new(), "", crew, now, _BODY, source_agent_id=agent, target_crew_id=to, target_mailbox=_TO)
        for _ in range(count)
    ]


def _cpu_us(run: Callable[[], object], count: int) -> float:
    started = time.process_time()
    run()
    return (time.process_time() - started) / count * 1e6


def floor_us(count: int, batch: int) -> Floor:
    """Time each mandated operation over ``count`` messages (store writes committed in
    batches of ``batch``, with ``synchronous=FULL``, the hub's default durability)."""
    messages = _messages(count)
    keys = HostKeys({"bench-a": os.urandom(32), "bench-b": os.urandom(32)})
    signer = Signer("bench-a", keys)
    sender = wire.sender_of(messages[0], "_gateway@bench-a")
    verifier = Verifier(keys, lambda _sender: "bench-a", lambda: int(time.time() * 1000), seen=count + 1)
    key = f"mbox.{_TO}"
    expires = int(time.time() * 1000) + 600_000
    encoded: list[tuple[dict[str, object], bytes]] = []
    signed: list[dict[str, object]] = []

    def encode() -> None:
        for message in messages:
            encoded.append(wire.encode(message, kind="post", to=key, sender=sender, expires_at_ms=expires))

    def sign() -> None:
        for headers, body in encoded:
            signed.append(signer.sign(headers, body))

    def verify() -> None:
        for headers, (_, body) in zip(signed, encoded, strict=True):
            verifier.verify(headers, body, key)

    def decode() -> None:
        for headers, (_, body) in zip(signed, encoded, strict=True):
            wire.decode(headers, body)

    encode_us, sign_us = _cpu_us(encode, count), _cpu_us(sign, count)
    verify_us, decode_us = _cpu_us(verify, count), _cpu_us(decode, count)
    hold, hold_wall, consume, processed = _store_us(messages, batch)
    return Floor(encode_us, sign_us, verify_us, decode_us, hold, hold_wall, consume, processed, batch)


def _store_us(messages: list[Message], batch: int) -> tuple[float, float, float, float]:
    with tempfile.TemporaryDirectory(prefix="orkeon-bench-floor-") as directory:
        conn = open_connection(StoreConfig(str(Path(directory) / "floor.db")))
        try:
            migrate(conn, str(Path(directory) / "floor.db"))
            address = str(_TO)
            mailboxes.register(conn, address, datetime.now(UTC))
            rows = [mailboxes.insert_params(address, message) for message in messages]
            chunks = [rows[start : start + batch] for start in range(0, len(rows), batch)]
            seq = iter(range(1, len(rows) + 1))

            def transact(statements: Callable[[list[tuple[Any, ...]]], None]) -> Callable[[], None]:
                def run() -> None:
                    for chunk in chunks:
                        conn.execute("BEGIN IMMEDIATE")
                        statements(chunk)
                        conn.execute("COMMIT")

                return run

            def insert(chunk: list[tuple[Any, ...]]) -> None:
                mailboxes.insert_rows(conn, [(*params, next(seq), params[4]) for params in chunk])

            def delete(chunk: list[tuple[Any, ...]]) -> None:
                mailboxes.delete_messages(conn, [(address, params[1]) for params in chunk])

            now = format_time(datetime.now(UTC))

            def mark(chunk: list[tuple[Any, ...]]) -> None:
                conn.executemany(_PROCESSED, [(params[1], "bench-sink", now) for params in chunk])

            wall = time.perf_counter()
            hold = _cpu_us(transact(insert), len(rows))
            hold_wall = (time.perf_counter() - wall) / len(rows) * 1e6
            return hold, hold_wall, _cpu_us(transact(delete), len(rows)), _cpu_us(transact(mark), len(rows))
        finally:
            conn.close()
