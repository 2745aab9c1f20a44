"""The Studio's ASGI application: its routes, the token check and its JSON errors.

Served by :class:`~orkeon_actors.studio.server.StudioServer` on uvicorn; built on Starlette's
requests and responses. Every answer that is not the page, an asset or the feed is JSON,
errors included: ``{"error": {"status": N, "message": "..."}}``. An unexpected exception
is logged with its traceback (loguru, component ``orkeon_actors.studio``) and answered
with a 500 that names the exception's type only: no message, path or traceback reaches
the browser.

Nothing here blocks the event loop: reads of the source (the store, the supervisors) run on
the server's small thread pool, and the feed is awaited, not polled from a thread.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from importlib import resources
from typing import TYPE_CHECKING, Any, TypeVar

import pykka
from loguru import logger
from starlette.requests import ClientDisconnect, Request
from starlette.responses import Response
from starlette.types import Message, Receive, Scope, Send

from orkeon_actors.errors import EventHubError, InvalidArgumentError
from orkeon_actors.studio.connections import json_error_body

if TYPE_CHECKING:
    from orkeon_actors.studio.server import StudioServer

__all__ = ["StudioApp"]

_T = TypeVar("_T")
_STATIC = {"studio.js": "text/javascript; charset=utf-8", "studio.css": "text/css; charset=utf-8"}
_SECURITY_HEADERS = {
    "Cache-Control": "no-store",
    "X-Content-Type-Options": "nosniff",
    "Content-Security-Policy": "default-src 'self'; style-src 'self'; img-src 'self' data:",
}
_HEARTBEAT_S = 10.0
_MAX_POST_BYTES = 1 << 20
_log = logger.bind(component="orkeon_actors.studio")


class StudioError(Exception):
    """An answer other than 200: its status and the message the browser reads."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


def _static(name: str) -> bytes:
    return resources.files("orkeon_actors.studio").joinpath("static", name).read_bytes()


_JSON = "application/json; charset=utf-8"


def _json(value: object, status: int = 200) -> Response:
    body = json.dumps(value, ensure_ascii=False).encode()
    return Response(body, status, headers=_SECURITY_HEADERS, media_type=_JSON)


def _error(status: int, message: str) -> Response:
    return Response(json_error_body(status, message), status, headers=_SECURITY_HEADERS, media_type=_JSON)


class StudioApp:
    """The ASGI callable (see the module docstring)."""

    def __init__(self, studio: StudioServer, executor: ThreadPoolExecutor, *, write_timeout: float) -> None:
        self.studio = studio
        self.executor = executor
        self.write_timeout = write_timeout

    async def _blocking(self, call: Callable[[], _T]) -> _T:
        return await asyncio.get_running_loop().run_in_executor(self.executor, call)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        started = False

        async def tracked(message: Message) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self._dispatch(Request(scope, receive), tracked)
        except StudioError as refused:
            if not started:
                await _error(refused.status, refused.message)(scope, receive, send)
        except (ClientDisconnect, ConnectionError):
            return  # the browser went away mid-answer
        except Exception as exc:  # logged with its traceback; the browser learns the type only
            _log.exception("Studio request {} {} failed", scope.get("method"), scope.get("path"))
            if not started:
                message = f"the Studio failed to answer ({type(exc).__name__}); the runtime's log has the details"
                await _error(500, message)(scope, receive, send)

    async def _dispatch(self, request: Request, send: Send) -> None:
        method, path = request.method, request.url.path
        if method == "POST":
            header = request.headers.get("x-studio-token")
            if header is None:
                raise StudioError(401, "a POST carries the access token in the X-Studio-Token header")
            self._check_token(header)
        else:
            self._check_token(request.headers.get("x-studio-token") or request.query_params.get("token"))
        route = self._route(method, path)
        if route is None:
            if self._route("GET", path) is not None or self._route("POST", path) is not None:
                raise StudioError(405, f"{path} does not answer {method}")
            raise StudioError(404, f"no route {path!r}")
        if path == "/api/events":
            await self._stream(request, send)
            return
        response = await route(request)
        await response(request.scope, request.receive, send)

    def _check_token(self, token: str | None) -> None:
        if not self.studio.authorized(token):
            raise StudioError(401, "missing or wrong access token: open the URL the Studio printed")

    def _route(self, method: str, path: str) -> Callable[[Request], Awaitable[Response]] | None:
        if method == "POST":
            return self._post if path == "/api/post" else None
        if method not in ("GET", "HEAD"):
            return None
        if path == "/":
            return self._page
        if path.startswith("/static/"):
            return self._asset
        if path in ("/api/state", "/api/events"):
            return self._state
        if path == "/api/agents":
            return self._agents
        if path.startswith("/api/crews/") and path.endswith("/snapshot"):
            return self._snapshot
        return None

    # -- routes -------------------------------------------------------------------------

    async def _page(self, request: Request) -> Response:
        page = _static("index.html").replace(b"__TOKEN__", self.studio.token.encode())
        if self.studio.source.read_only:  # a read-only page has no post form at all, hidden or not
            start, end = page.index(b"<!--post-->"), page.index(b"<!--/post-->") + len(b"<!--/post-->")
            page = page[:start] + page[end:]
        return Response(page, headers=_SECURITY_HEADERS, media_type="text/html; charset=utf-8")

    async def _asset(self, request: Request) -> Response:
        name = request.url.path.removeprefix("/static/")
        if name not in _STATIC:
            raise StudioError(404, f"no static file {name!r}: the page uses {', '.join(sorted(_STATIC))}")
        return Response(_static(name), headers=_SECURITY_HEADERS, media_type=_STATIC[name])

    async def _state(self, request: Request) -> Response:
        return _json(await self._blocking(self.studio.source.overview))

    async def _agents(self, request: Request) -> Response:
        raw = request.query_params.get("after", "0")
        if not raw.isdigit():
            raise StudioError(400, f"after is the last sequence number seen, a whole number >= 0, not {raw!r}")
        after = int(raw)
        return _json(await self._blocking(lambda: self.studio.source.agent_events(after)))

    async def _snapshot(self, request: Request) -> Response:
        crew = request.url.path.removeprefix("/api/crews/").removesuffix("/snapshot")
        try:
            snapshot = await self._blocking(lambda: self.studio.source.snapshot(crew))
        except pykka.Timeout:
            raise StudioError(503, f"crew {crew!r} is busy and did not answer in time: retry") from None
        except InvalidArgumentError as exc:
            raise StudioError(404, f"no snapshot of crew {crew!r}: {exc}") from None
        if snapshot is None:
            raise StudioError(404, f"no snapshot of crew {crew!r} is visible to the Studio")
        return _json(snapshot)

    async def _post(self, request: Request) -> Response:
        declared = request.headers.get("content-length")
        if declared is not None and int(declared) > _MAX_POST_BYTES:  # h11 checked it is a number
            raise StudioError(413, f"a post from the Studio is at most {_MAX_POST_BYTES} bytes")
        try:
            raw = await asyncio.wait_for(self._body(request), self.write_timeout)
        except TimeoutError:
            raise StudioError(408, f"the request body did not arrive within {self.write_timeout:g} s") from None
        try:
            body = json.loads(raw or b"{}")
            if not isinstance(body, dict):
                raise TypeError(f"the body is a JSON {type(body).__name__}, not an object")
            to, payload = body["to"], body.get("payload")
            if not isinstance(to, str):
                raise TypeError("to must be a mailbox address string")
        except (ValueError, KeyError, TypeError) as exc:
            usage = 'send {"to": "agent://crew/agent", "payload": ...} as JSON'
            raise StudioError(400, f"{usage} ({type(exc).__name__}: {exc})") from None
        try:
            return _json(await self._blocking(lambda: self.studio.source.post(to, payload)))
        except InvalidArgumentError as exc:
            raise StudioError(403, str(exc)) from None
        except EventHubError as exc:
            raise StudioError(422, f"{type(exc).__name__}: {exc}") from None

    async def _body(self, request: Request) -> bytes:
        chunks: list[bytes] = []
        size = 0
        async for chunk in request.stream():
            size += len(chunk)
            if size > _MAX_POST_BYTES:
                raise StudioError(413, f"a post from the Studio is at most {_MAX_POST_BYTES} bytes")
            chunks.append(chunk)
        return b"".join(chunks)

    # -- the feed -------------------------------------------------------------------------

    async def _stream(self, request: Request, send: Send) -> None:
        """Server-sent events until the browser leaves, the server stops, or a write
        stalls for ``write_timeout`` seconds (a browser that stopped reading)."""
        studio = self.studio
        feed = studio.feed
        if feed is not None and len(studio.streams) >= studio.max_streams:
            raise StudioError(503, f"the Studio serves at most {studio.max_streams} event streams at once")
        headers = [(b"content-type", b"text/event-stream; charset=utf-8"), (b"cache-control", b"no-store")]

        async def write(data: bytes, more: bool = True) -> None:
            body: dict[str, Any] = {"type": "http.response.body", "body": data, "more_body": more}
            await asyncio.wait_for(send(body), self.write_timeout)

        await asyncio.wait_for(send({"type": "http.response.start", "status": 200, "headers": headers}), 10)
        if feed is None:  # a store file: nothing is pushed, the page polls the state
            await write(b": no live feed for a store file\n\n", more=False)
            return
        loop = asyncio.get_running_loop()
        ready = asyncio.Event()

        def wake() -> None:  # called from publishing threads
            try:
                loop.call_soon_threadsafe(ready.set)
            except RuntimeError:  # the loop closed: the server stopped and this stream is over
                return

        gone = asyncio.Event()

        async def watch_disconnect() -> None:
            while (await request.receive())["type"] != "http.disconnect":
                continue
            gone.set()
            ready.set()

        subscriber = feed.attach()
        subscriber.on_ready = wake
        studio.streams.add(subscriber)
        watcher = asyncio.create_task(watch_disconnect())
        dropped = 0
        try:
            await write(b"retry: 1000\n: attached\n\n")
            while not subscriber.closed and not gone.is_set():
                try:
                    await asyncio.wait_for(ready.wait(), _HEARTBEAT_S)
                except TimeoutError:
                    pass  # a keepalive below
                ready.clear()
                chunks = []
                if subscriber.dropped != dropped:
                    dropped = subscriber.dropped
                    chunks.append(f"event: dropped\ndata: {dropped}\n\n")
                for item in subscriber.take(0):
                    if studio.source.visible(item):
                        chunks.append(f"id: {item['seq']}\ndata: {json.dumps(item, ensure_ascii=False)}\n\n")
                if not gone.is_set():
                    await write(("".join(chunks) or ": keepalive\n\n").encode())
            if not gone.is_set():
                await write(b"", more=False)
        except TimeoutError:
            _log.info("Studio event stream closed: the browser stopped reading for {} s", self.write_timeout)
        finally:
            watcher.cancel()
            subscriber.on_ready = None
            studio.streams.discard(subscriber)
            subscriber.close()
