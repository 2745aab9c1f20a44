"""The Studio's local web server: the page, its JSON reads and the pushed event feed.

Built on the standard library (``http.server.ThreadingHTTPServer``): the Studio serves a
handful of routes to one person's browser, so a framework would add a dependency and
nothing the page needs. The feed is pushed as server-sent events (``EventSource`` in the
browser reconnects by itself; one direction is all the feed needs).

Routes (every one needs the access token, ``?token=...``, or for ``POST`` the
``X-Studio-Token`` header, so that a page on another origin cannot post through a
browser that has the URL open):

``GET /``                       the page
``GET /static/{file}``          its script and style sheet (package data, no CDN)
``GET /api/state``              :meth:`StudioSource.overview` as JSON
``GET /api/events``             the feed, as ``text/event-stream`` (live runtimes)
``GET /api/crews/{id}/snapshot``  one crew's snapshot tree
``POST /api/post``              ``{"to": address, "payload": json}``, as ``client://studio``
                                (only when posting was allowed)

Guarantees: it binds 127.0.0.1 unless told otherwise, and a non-loopback address needs
``allow_remote=True``; a request without the right token gets 401 and learns nothing;
a slow browser never slows the hub (its queue drops old events, see
:mod:`orkeon_actors.studio.feed`); :meth:`StudioServer.stop` ends every stream.
"""

from __future__ import annotations

import hmac
import ipaddress
import json
import secrets
import threading
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from importlib import resources
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

from loguru import logger

from orkeon_actors.errors import EventHubError, InvalidArgumentError
from orkeon_actors.studio.feed import FeedSubscriber, StudioFeed
from orkeon_actors.studio.sources import StudioSource

__all__ = ["StudioServer"]

_STATIC_TYPES = {".js": "text/javascript; charset=utf-8", ".css": "text/css; charset=utf-8"}
_HEARTBEAT_S = 10.0
_MAX_POST_BYTES = 1 << 20


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _static(name: str) -> bytes:
    return resources.files("orkeon_actors.studio").joinpath("static", name).read_bytes()


class StudioServer:
    """Serves one :class:`StudioSource` (and, for a live runtime, its feed).

    ``port=0`` picks a free port; :attr:`url` is the address to open, token included.
    Raises ``InvalidArgumentError`` for a non-loopback ``host`` without ``allow_remote``.
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
    ) -> None:
        if not _is_loopback(host) and not allow_remote:
            raise InvalidArgumentError(
                f"the Studio would listen on {host!r}, reachable from other machines; it binds 127.0.0.1 "
                "by default: pass allow_remote=True (--allow-remote) if you really mean to expose it"
            )
        self.source = source
        self.feed = feed
        self.token = token or secrets.token_urlsafe(24)
        self.streams: set[FeedSubscriber] = set()
        """The event streams open now (one per attached browser)."""
        self._stopping = threading.Event()
        self._httpd = ThreadingHTTPServer((host, port), _handler_for(self))
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, name="orkeon-studio", daemon=True
        )
        self._thread.start()
        logger.bind(component="orkeon_actors.studio").info("Studio at {}", self.url)

    @property
    def port(self) -> int:
        return int(self._httpd.server_address[1])

    @property
    def url(self) -> str:
        host = str(self._httpd.server_address[0])
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
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(timeout=5)


def _handler_for(server: StudioServer) -> type[BaseHTTPRequestHandler]:
    class Handler(_StudioHandler):
        studio = server

    return Handler


class _StudioHandler(BaseHTTPRequestHandler):
    studio: StudioServer
    server_version = "orkeon-studio"

    def log_message(self, format: str, *args: Any) -> None:  # the default writes to stderr
        logger.bind(component="orkeon_actors.studio").debug("{} {}", self.address_string(), format % args)

    # -- helpers ------------------------------------------------------------------------

    def _send(self, status: HTTPStatus, body: bytes, content_type: str) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "no-store")
        self.send_header("X-Content-Type-Options", "nosniff")
        self.send_header("Content-Security-Policy", "default-src 'self'; style-src 'self'; img-src 'self' data:")
        self.end_headers()
        self.wfile.write(body)

    def _json(self, value: object, status: HTTPStatus = HTTPStatus.OK) -> None:
        self._send(status, json.dumps(value, ensure_ascii=False).encode(), "application/json; charset=utf-8")

    def _error(self, status: HTTPStatus, message: str) -> None:
        self._json({"error": {"status": status.value, "message": message}}, status)

    def _token_ok(self, query: dict[str, list[str]]) -> bool:
        token = self.headers.get("X-Studio-Token") or next(iter(query.get("token", [])), None)
        if self.studio.authorized(token):
            return True
        self._error(HTTPStatus.UNAUTHORIZED, "missing or wrong access token: open the URL the Studio printed")
        return False

    # -- routes -------------------------------------------------------------------------

    def do_GET(self) -> None:
        try:
            self._get()
        except (BrokenPipeError, ConnectionResetError):
            return  # the browser went away mid-answer
        except Exception as exc:  # reported to the page and logged with its traceback, never swallowed
            logger.bind(component="orkeon_actors.studio").exception("Studio request {} failed", self.path)
            self._error(HTTPStatus.INTERNAL_SERVER_ERROR, f"{type(exc).__name__}: {exc}")

    def _get(self) -> None:
        parts = urlsplit(self.path)
        query = parse_qs(parts.query)
        if not self._token_ok(query):
            return
        path = parts.path
        if path == "/":
            page = _static("index.html").replace(b"__TOKEN__", self.studio.token.encode())
            self._send(HTTPStatus.OK, page, "text/html; charset=utf-8")
        elif path.startswith("/static/"):
            name = path.removeprefix("/static/")
            suffix = name[name.rfind(".") :]
            if "/" in name or suffix not in _STATIC_TYPES:
                self._error(HTTPStatus.NOT_FOUND, f"no static file {name!r}")
                return
            self._send(HTTPStatus.OK, _static(name), _STATIC_TYPES[suffix])
        elif path == "/api/state":
            self._json(self.studio.source.overview())
        elif path == "/api/events":
            self._stream()
        elif path.startswith("/api/crews/") and path.endswith("/snapshot"):
            crew = unquote(path.removeprefix("/api/crews/").removesuffix("/snapshot"))
            snapshot = self.studio.source.snapshot(crew)
            if snapshot is None:
                self._error(HTTPStatus.NOT_FOUND, f"no snapshot of crew {crew!r} is visible to the Studio")
            else:
                self._json(snapshot)
        else:
            self._error(HTTPStatus.NOT_FOUND, f"no route {path!r}")

    def do_POST(self) -> None:
        parts = urlsplit(self.path)
        if self.headers.get("X-Studio-Token") is None or not self._token_ok({}):
            if self.headers.get("X-Studio-Token") is None:
                self._error(HTTPStatus.UNAUTHORIZED, "a POST carries the access token in the X-Studio-Token header")
            return
        if parts.path != "/api/post":
            self._error(HTTPStatus.NOT_FOUND, f"no route {parts.path!r}")
            return
        length = int(self.headers.get("Content-Length") or 0)
        if length > _MAX_POST_BYTES:
            too_large = f"a post from the Studio is at most {_MAX_POST_BYTES} bytes"
            self._error(HTTPStatus.REQUEST_ENTITY_TOO_LARGE, too_large)
            return
        try:
            body = json.loads(self.rfile.read(length) or b"{}")
            to, payload = body["to"], body.get("payload")
            if not isinstance(to, str):
                raise TypeError("to must be a mailbox address string")
        except (ValueError, KeyError, TypeError) as exc:
            self._error(HTTPStatus.BAD_REQUEST, f'send {{"to": "agent://crew/agent", "payload": ...}} as JSON ({exc})')
            return
        try:
            self._json(self.studio.source.post(to, payload))
        except InvalidArgumentError as exc:
            self._error(HTTPStatus.FORBIDDEN, str(exc))
        except EventHubError as exc:
            self._error(HTTPStatus.UNPROCESSABLE_ENTITY, f"{type(exc).__name__}: {exc}")

    def _stream(self) -> None:
        feed = self.studio.feed
        self.send_response(HTTPStatus.OK)
        self.send_header("Content-Type", "text/event-stream; charset=utf-8")
        self.send_header("Cache-Control", "no-store")
        self.end_headers()
        if feed is None:  # a store file: nothing is pushed, the page polls the state
            self.wfile.write(b": no live feed for a store file\n\n")
            self.wfile.flush()
            return
        subscriber = feed.attach()
        self.studio.streams.add(subscriber)
        dropped = 0
        try:
            self.wfile.write(b"retry: 1000\n: attached\n\n")
            self.wfile.flush()
            while not subscriber.closed:
                items = subscriber.take(_HEARTBEAT_S)
                chunks = []
                if subscriber.dropped != dropped:
                    dropped = subscriber.dropped
                    chunks.append(f"event: dropped\ndata: {dropped}\n\n")
                for item in items:
                    if self.studio.source.visible(item):
                        chunks.append(f"id: {item['seq']}\ndata: {json.dumps(item, ensure_ascii=False)}\n\n")
                self.wfile.write(("".join(chunks) or ": keepalive\n\n").encode())
                self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError):
            pass  # the browser went away: detach below
        finally:
            self.studio.streams.discard(subscriber)
            subscriber.close()
