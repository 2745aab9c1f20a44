"""The Studio's local web server: the page, its JSON reads and the pushed event feed.

Served by uvicorn (an ASGI server) on one event-loop thread of its own, with the routes in
:mod:`orkeon_actors.studio.app` (Starlette requests and responses) and the connection bounds
of :mod:`orkeon_actors.studio.connections`. Both come with the ``studio`` extra
(``pip install "orkeon-actors[studio]"``). The feed is pushed as server-sent events
(``EventSource`` in the browser reconnects by itself; one direction is all the feed needs).

Routes (every one needs the access token, ``?token=...``, or for ``POST`` the
``X-Studio-Token`` header, so that a page on another origin cannot post through a
browser that has the URL open):

``GET /``                       the page
``GET /static/{file}``          its script and style sheet (package data, no CDN)
``GET /api/state``              :meth:`StudioSource.overview` as JSON
``GET /api/events``             the feed, as ``text/event-stream`` (live runtimes)
``GET /api/crews/{id}/snapshot``  one crew's snapshot tree
``GET /api/agents?after=SEQ``   the agent events after ``SEQ`` (the agent view)
``POST /api/post``              ``{"to": address, "payload": json}``, as ``client://studio``
                                (only when posting was allowed)

Guarantees: it binds 127.0.0.1 unless told otherwise, and a non-loopback address needs
``allow_remote=True``; a request without the right token gets 401 and learns nothing;
every error is JSON; a slow browser never slows the hub (its queue drops old events, see
:mod:`orkeon_actors.studio.feed`); :meth:`StudioServer.stop` ends every stream.

Bounds (``docs/studio.md``): threads, one event loop plus at most ``io_threads`` for reads of
the source, whatever the number of connections; connections, at most ``max_connections``
(an idle one that never sent a request makes room for a new one) and each must send its
request head within ``header_timeout`` seconds; at most ``max_streams`` event streams; a
request body or a stream write that stalls for ``write_timeout`` seconds ends its request.
"""

from __future__ import annotations

import hmac
import importlib
import secrets
import socket
import threading
from concurrent.futures import ThreadPoolExecutor

from loguru import logger

from orkeon_actors.errors import ExtraNotInstalledError, InvalidArgumentError
from orkeon_actors.loopback import is_loopback
from orkeon_actors.studio.feed import FeedSubscriber, StudioFeed
from orkeon_actors.studio.sources import StudioSource

__all__ = ["StudioServer", "missing_extra"]

STUDIO_EXTRA = 'pip install "orkeon-actors[studio]"'


def missing_extra() -> str | None:
    """What the Studio's server needs and is not installed (``None``: nothing)."""
    missing = []
    for module in ("starlette", "uvicorn", "h11"):
        try:
            importlib.import_module(module)
        except ImportError:
            missing.append(module)
    if not missing:
        return None
    return f"the Studio needs {' and '.join(missing)}, not installed here: {STUDIO_EXTRA}"


def _listen(host: str, port: int) -> socket.socket:
    family, kind, proto, _, address = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0]
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
    except OSError as exc:
        sock.close()
        raise InvalidArgumentError(f"the Studio cannot listen on {host}:{port}: {exc.strerror or exc}") from exc
    return sock


class StudioServer:
    """Serves one :class:`StudioSource` (and, for a live runtime, its feed).

    ``port=0`` picks a free port; :attr:`url` is the address to open, token included.
    Raises ``InvalidArgumentError`` for a non-loopback ``host`` without ``allow_remote``,
    an address it cannot listen on, or a missing ``studio`` extra.
    """

    def __init__(
        self,
        source: StudioSource,
        feed: StudioFeed | None = None,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        allow_remote: bool = False,
        token: str | None = None,
        max_connections: int = 256,
        max_streams: int = 32,
        header_timeout: float = 10.0,
        write_timeout: float = 30.0,
        io_threads: int = 4,
    ) -> None:
        if not is_loopback(host) and not allow_remote:
            raise InvalidArgumentError(
                f"the Studio would listen on {host!r}, reachable from other machines; it binds 127.0.0.1 "
                "by default: pass allow_remote=True (--allow-remote) if you really mean to expose it"
            )
        if min(max_connections, max_streams, io_threads) < 1 or min(header_timeout, write_timeout) <= 0:
            raise InvalidArgumentError(
                "the Studio's bounds must be positive: max_connections, max_streams and io_threads >= 1, "
                f"header_timeout and write_timeout > 0 (got {max_connections}, {max_streams}, {io_threads}, "
                f"{header_timeout}, {write_timeout})"
            )
        problem = missing_extra()
        if problem is not None:
            raise ExtraNotInstalledError(problem, extra="studio")
        import uvicorn  # here: checked just above, and only a Studio pays for the import

        from orkeon_actors.studio.app import StudioApp
        from orkeon_actors.studio.connections import ConnectionBounds, bounded_protocol

        self.source = source
        self.feed = feed
        self.token = token or secrets.token_urlsafe(24)
        self.max_streams = max_streams
        self.streams: set[FeedSubscriber] = set()
        """The event streams open now (one per attached browser)."""
        self.bounds = ConnectionBounds(max_connections=max_connections, header_timeout=header_timeout)
        """The connection limits and what is counted against them (``open``, ``evicted``...)."""
        self._stopping = threading.Event()
        self._executor = ThreadPoolExecutor(max_workers=io_threads, thread_name_prefix="orkeon-studio-io")
        self._socket = _listen(host, port)
        self._address = self._socket.getsockname()
        config = uvicorn.Config(
            StudioApp(self, self._executor, write_timeout=write_timeout),
            http=bounded_protocol(self.bounds),
            ws="none",
            lifespan="off",
            loop="asyncio",
            log_config=None,
            access_log=False,
            timeout_keep_alive=5,
            timeout_graceful_shutdown=2,
            h11_max_incomplete_event_size=16 * 1024,
            backlog=max_connections,
        )
        self._uvicorn = uvicorn.Server(config)
        self._thread = threading.Thread(
            target=self._uvicorn.run, kwargs={"sockets": [self._socket]}, name="orkeon-studio", daemon=True
        )
        self._thread.start()
        while not self._uvicorn.started and self._thread.is_alive():
            self._thread.join(0.01)
        if not self._uvicorn.started:
            self._socket.close()
            self._executor.shutdown(wait=False)
            raise InvalidArgumentError(f"the Studio's server did not start on {host}:{port}: see the log")
        logger.bind(component="orkeon_actors.studio").info("Studio at {}", self.url)

    @property
    def port(self) -> int:
        return int(self._address[1])

    @property
    def url(self) -> str:
        host = str(self._address[0])
        shown = host if ":" not in host else f"[{host}]"
        return f"http://{shown}:{self.port}/?token={self.token}"

    def authorized(self, token: str | None) -> bool:
        return token is not None and hmac.compare_digest(token.encode(), self.token.encode())

    def stop(self) -> None:
        """Stop serving; open event streams end. Idempotent."""
        if self._stopping.is_set():
            return
        self._stopping.set()
        for subscriber in list(self.streams):
            subscriber.close()
        self._uvicorn.should_exit = True
        self._thread.join(timeout=10)
        self._socket.close()
        self._executor.shutdown(wait=False, cancel_futures=True)
