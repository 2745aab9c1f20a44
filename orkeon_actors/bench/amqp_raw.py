"""Raw pika baselines of ``orkeon bench amqp``: what the broker costs on this machine, now.

Both run in two child processes (``spawn`` start method), each with one pika
``SelectConnection`` on one I/O thread, the way the hub's own link runs:

* :func:`raw_post_receive_per_s`: a publisher process publishes N persistent messages to
  one durable classic queue with publisher confirms, at most ``window`` unconfirmed at
  once; a consumer process consumes it with manual acks (one ``basic.ack`` per message)
  and ``prefetch`` unacknowledged deliveries at most. Timed from the publisher's first
  publish to the consumer's last delivery (``time.monotonic`` is system-wide on Linux,
  so both processes read one clock).
* :func:`raw_rpc_per_s`: a client process makes M sequential request/reply round trips
  to a server process through direct reply-to (``amq.rabbitmq.reply-to``, consumed with
  auto-ack; requests to a durable queue the server consumes with manual acks). Timed in
  the client.

Each child reports its figures (or the error that stopped it) on a queue; a child that
reports nothing within ``timeout`` seconds is killed and the measurement raises
``RuntimeError``.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import queue as queue_module
import time
from collections.abc import Callable
from typing import Any, Protocol

import pika
import pika.channel
import pika.frame
import pika.spec

__all__ = ["Watch", "declare_queue", "raw_post_receive_per_s", "raw_rpc_per_s"]


class Watch(Protocol):
    """What watches a measured window (:class:`~orkeon_actors.bench.amqp_floor.MachineWatch`)."""

    def start(self) -> None: ...

    def stop(self) -> None: ...


_CONTEXT = multiprocessing.get_context("spawn")
_BODY = b'{"order":42,"amount":"12.50","currency":"EUR"}'


def declare_queue(url: str, name: str) -> None:
    """Declare the durable classic queue ``name`` (empty it if it exists)."""
    with contextlib.closing(pika.BlockingConnection(pika.URLParameters(url))) as connection:
        channel = connection.channel()
        channel.queue_declare(name, durable=True, arguments={"x-queue-type": "classic"})
        channel.queue_purge(name)


def _select(url: str, on_channel: Callable[[pika.SelectConnection, pika.channel.Channel], None]) -> None:
    """Run a SelectConnection until it closes, calling ``on_channel`` once a channel is open."""

    def opened(connection: pika.SelectConnection) -> None:
        connection.channel(on_open_callback=lambda channel: on_channel(connection, channel))

    def failed(connection: pika.SelectConnection, error: BaseException) -> None:
        connection.ioloop.stop()
        raise RuntimeError(f"the bench could not connect to {url}: {error}")

    connection = pika.SelectConnection(
        pika.URLParameters(url),
        on_open_callback=opened,
        on_open_error_callback=failed,
        on_close_callback=lambda conn, _reason: conn.ioloop.stop(),
    )
    connection.ioloop.start()


def _consumer(url: str, name: str, count: int, prefetch: int, ready: Any, results: Any) -> None:
    seen = 0
    cpu = 0.0

    def on_channel(connection: pika.SelectConnection, channel: pika.channel.Channel) -> None:
        def on_message(
            ch: pika.channel.Channel, method: pika.spec.Basic.Deliver, _props: pika.spec.BasicProperties, _body: bytes
        ) -> None:
            nonlocal seen
            ch.basic_ack(method.delivery_tag)
            seen += 1
            if seen == count:
                results.put(("received", time.monotonic()))
                results.put(("consumer_cpu", time.process_time() - cpu))
                connection.close()

        def consuming(_frame: pika.frame.Method) -> None:
            nonlocal cpu
            cpu = time.process_time()
            ready.set()

        channel.basic_qos(
            prefetch_count=prefetch,
            callback=lambda _f: channel.basic_consume(name, on_message, callback=consuming),
        )

    _report_errors(results, lambda: _select(url, on_channel))


def _publisher(url: str, name: str, count: int, window: int, go: Any, results: Any) -> None:
    def on_channel(connection: pika.SelectConnection, channel: pika.channel.Channel) -> None:
        sent = confirmed = 0
        cpu = 0.0
        properties = pika.BasicProperties(delivery_mode=pika.DeliveryMode.Persistent, content_type="application/json")

        def fill() -> None:
            nonlocal sent
            while sent < count and sent - confirmed < window:
                sent += 1
                channel.basic_publish("", name, _BODY, properties)

        def on_confirm(frame: pika.frame.Method) -> None:
            nonlocal confirmed
            method = frame.method
            if isinstance(method, pika.spec.Basic.Nack):
                results.put(("error", f"the broker nacked a publish (tag {method.delivery_tag})"))
                connection.close()
                return
            confirmed = method.delivery_tag  # tags are 1..sent, in order
            if confirmed >= count:
                results.put(("publisher_cpu", time.process_time() - cpu))
                connection.close()
            else:
                fill()

        def start(_frame: pika.frame.Method) -> None:
            nonlocal cpu
            go.wait()
            results.put(("started", time.monotonic()))
            cpu = time.process_time()
            fill()

        channel.confirm_delivery(on_confirm, callback=start)

    _report_errors(results, lambda: _select(url, on_channel))


def _rpc_server(url: str, name: str, ready: Any, results: Any) -> None:
    cpu = 0.0

    def on_channel(connection: pika.SelectConnection, channel: pika.channel.Channel) -> None:
        def on_request(
            ch: pika.channel.Channel, method: pika.spec.Basic.Deliver, props: pika.spec.BasicProperties, body: bytes
        ) -> None:
            if body == b"stop":
                ch.basic_ack(method.delivery_tag)
                results.put(("server_cpu", time.process_time() - cpu))
                connection.close()
                return
            reply = pika.BasicProperties(correlation_id=props.correlation_id)
            ch.basic_publish("", props.reply_to, body, reply)
            ch.basic_ack(method.delivery_tag)

        def consuming(_frame: pika.frame.Method) -> None:
            nonlocal cpu
            cpu = time.process_time()
            ready.set()

        channel.basic_qos(
            prefetch_count=64,
            callback=lambda _f: channel.basic_consume(name, on_request, callback=consuming),
        )

    _report_errors(results, lambda: _select(url, on_channel))


def _rpc_client(url: str, name: str, count: int, results: Any) -> None:
    def on_channel(connection: pika.SelectConnection, channel: pika.channel.Channel) -> None:
        done = 0
        started = 0.0
        cpu = 0.0

        def request() -> None:
            properties = pika.BasicProperties(reply_to="amq.rabbitmq.reply-to", correlation_id=str(done))
            channel.basic_publish("", name, _BODY, properties)

        def on_reply(
            ch: pika.channel.Channel, _method: pika.spec.Basic.Deliver, props: pika.spec.BasicProperties, _b: bytes
        ) -> None:
            nonlocal done
            if props.correlation_id != str(done):
                results.put(("error", f"reply {props.correlation_id} answered request {done}"))
                connection.close()
                return
            done += 1
            if done == count:
                results.put(("elapsed", time.monotonic() - started))
                results.put(("client_cpu", time.process_time() - cpu))
                ch.basic_publish("", name, b"stop")
                connection.close()
            else:
                request()

        def consuming(_frame: pika.frame.Method) -> None:
            nonlocal started, cpu
            started = time.monotonic()
            cpu = time.process_time()
            request()

        channel.basic_consume("amq.rabbitmq.reply-to", on_reply, auto_ack=True, callback=consuming)

    _report_errors(results, lambda: _select(url, on_channel))


def _report_errors(results: Any, run: Callable[[], None]) -> None:
    try:
        run()
    except Exception as exc:  # reported to the parent, which raises it
        results.put(("error", f"{type(exc).__name__}: {exc}"))


def _collect(results: Any, wanted: set[str], timeout: float) -> dict[str, float]:
    figures: dict[str, float] = {}
    deadline = time.monotonic() + timeout
    while wanted - figures.keys():
        try:
            kind, value = results.get(timeout=max(0.0, deadline - time.monotonic()))
        except queue_module.Empty:
            raise RuntimeError(f"the raw pika baseline did not finish within {timeout} s") from None
        if kind == "error":
            raise RuntimeError(f"the raw pika baseline failed: {value}")
        figures[kind] = float(value)
    return figures


def _wait_ready(ready: Any, processes: list[multiprocessing.process.BaseProcess], what: str, timeout: float) -> None:
    """Wait for ``ready``; raise at once if a child died first (it cannot set it then)."""
    deadline = time.monotonic() + timeout
    while not ready.wait(0.05):
        dead = [p for p in processes if not p.is_alive()]
        if dead:
            raise RuntimeError(f"{what} exited with code {dead[0].exitcode} before it was ready")
        if time.monotonic() > deadline:
            raise RuntimeError(f"{what} was not ready within {timeout} s")


def _join(processes: list[multiprocessing.process.BaseProcess]) -> None:
    for process in processes:
        process.join(10)
        if process.is_alive():
            process.kill()
            process.join()


def raw_post_receive_per_s(
    url: str, count: int, *, prefetch: int, window: int, timeout: float = 120.0, watch: Watch | None = None
) -> tuple[float, float]:
    """Messages/s from a confirming publisher process to a consuming process (see the
    module docstring), and the CPU microseconds per message of both processes together
    over the run (each measures its own, from its start signal to its last message).
    ``watch`` is started right before the start signal and stopped after the last
    figure came (the machine's cores and the broker over the run)."""
    name = "bench.raw.post"
    declare_queue(url, name)
    results = _CONTEXT.Queue()
    ready, go = _CONTEXT.Event(), _CONTEXT.Event()
    consumer = _CONTEXT.Process(target=_consumer, args=(url, name, count, prefetch, ready, results), daemon=True)
    publisher = _CONTEXT.Process(target=_publisher, args=(url, name, count, window, go, results), daemon=True)
    processes: list[multiprocessing.process.BaseProcess] = [consumer, publisher]
    try:
        consumer.start()
        publisher.start()
        _wait_ready(ready, processes, "the raw consumer", timeout)
        if watch is not None:
            watch.start()
        go.set()
        figures = _collect(results, {"started", "received", "consumer_cpu", "publisher_cpu"}, timeout)
        if watch is not None:
            watch.stop()
        cpu_us = (figures["consumer_cpu"] + figures["publisher_cpu"]) / count * 1e6
        return count / (figures["received"] - figures["started"]), cpu_us
    finally:
        _join(processes)


def raw_rpc_per_s(url: str, count: int, *, timeout: float = 120.0) -> tuple[float, float]:
    """Sequential round trips/s through direct reply-to between two processes, and the
    CPU microseconds per round trip of both together."""
    name = "bench.raw.rpc"
    declare_queue(url, name)
    results = _CONTEXT.Queue()
    ready = _CONTEXT.Event()
    server = _CONTEXT.Process(target=_rpc_server, args=(url, name, ready, results), daemon=True)
    processes: list[multiprocessing.process.BaseProcess] = [server]
    try:
        server.start()
        _wait_ready(ready, processes, "the raw RPC server", timeout)
        client = _CONTEXT.Process(target=_rpc_client, args=(url, name, count, results), daemon=True)
        processes.append(client)
        client.start()
        figures = _collect(results, {"elapsed", "client_cpu", "server_cpu"}, timeout)
        return count / figures["elapsed"], (figures["client_cpu"] + figures["server_cpu"]) / count * 1e6
    finally:
        _join(processes)
