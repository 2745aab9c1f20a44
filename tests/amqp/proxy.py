"""A loopback TCP proxy a test controls, to inject broker faults without touching the
machine's broker: :meth:`cut` resets every connection and refuses new ones until
:meth:`restore`; :meth:`stall` stops forwarding bytes (connections stay open) until
:meth:`restore`; :meth:`stall_from_broker` stops only what the broker sends (publishes
reach it, its confirms do not come back)."""

from __future__ import annotations

import contextlib
import socket
import threading


class TcpProxy:
    def __init__(self, target: tuple[str, int]) -> None:
        self.target = target
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port: int = self._listener.getsockname()[1]
        self._lock = threading.Lock()
        self._links: list[tuple[socket.socket, socket.socket]] = []
        self._up = threading.Event()
        self._up.set()
        self._flowing = threading.Event()
        self._flowing.set()
        self._downstream = threading.Event()
        self._downstream.set()
        self._closed = False
        self.accepted = 0
        threading.Thread(target=self._accept, name="test-proxy-accept", daemon=True).start()

    def url(self, vhost: str) -> str:
        return f"amqp://guest:guest@127.0.0.1:{self.port}/{vhost}"

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            if not self._up.is_set():
                _reset(client)
                continue
            try:
                upstream = socket.create_connection(self.target, timeout=5)
            except OSError:
                _reset(client)
                continue
            upstream.settimeout(None)
            with self._lock:
                self._links.append((client, upstream))
                self.accepted += 1
            for source, sink, gate in ((client, upstream, self._flowing), (upstream, client, self._downstream)):
                threading.Thread(target=self._pump, args=(source, sink, gate), daemon=True).start()

    def _pump(self, source: socket.socket, sink: socket.socket, gate: threading.Event) -> None:
        while True:
            try:
                data = source.recv(65536)
            except OSError:
                data = b""
            if not data:
                _reset(sink)
                return
            self._flowing.wait()
            gate.wait()
            try:
                sink.sendall(data)
            except OSError:
                _reset(source)
                return

    def cut(self) -> None:
        """Reset every open connection and refuse new ones."""
        self._up.clear()
        with self._lock:
            links, self._links = self._links, []
        for client, upstream in links:
            _reset(client)
            _reset(upstream)

    def stall(self) -> None:
        self._flowing.clear()

    def stall_from_broker(self) -> None:
        """Hold every byte the broker sends (confirms, deliveries) until :meth:`restore`
        or :meth:`cut`; what the host sends still reaches the broker."""
        self._downstream.clear()

    def restore(self) -> None:
        self._up.set()
        self._flowing.set()
        self._downstream.set()

    def close(self) -> None:
        self._closed = True
        self.cut()
        with contextlib.suppress(OSError):
            self._listener.shutdown(socket.SHUT_RDWR)  # wakes the accept thread: it ends
        self._listener.close()


def _reset(sock: socket.socket) -> None:
    """Abort ``sock``: shut it down first (a thread blocked in ``recv`` on it wakes, and
    the kernel really ends the connection), then close it without lingering (RST)."""
    with contextlib.suppress(OSError):
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
    with contextlib.suppress(OSError):
        sock.shutdown(socket.SHUT_RDWR)
    with contextlib.suppress(OSError):
        sock.close()
