"""Who may talk to ``orkeon mcp --transport http``: the checks before the MCP SDK sees a request.

The tools act as the server's identity (they read its mailbox, post as it), so every
request must prove it comes from someone the operator meant:

* **A bearer token.** ``Authorization: Bearer TOKEN`` on every request; the token is
  generated at start and printed (or given by the operator through ``ORKEON_MCP_TOKEN``).
  Compared in constant time. Missing or wrong: ``401`` and nothing else.
* **Loopback unless told otherwise.** :class:`HttpPolicy` refuses a non-loopback bind
  address without ``allow_remote=True`` (``--allow-remote``), and a wildcard bind
  (``0.0.0.0``, ``::``) without the names clients will use (``--allow-host``).
* **``Host`` and ``Origin`` against the bound address.** ``Host`` must be one of the
  names the server is reached by, *with the bound port* (for a loopback bind:
  ``127.0.0.1``, ``localhost``, ``[::1]``; otherwise the bind address or the
  ``--allow-host`` names; never ``0.0.0.0``). A browser page's ``Origin``, when present,
  must be ``http://`` one of those: a DNS-rebinding page or another site gets ``403``.

Request bodies are bounded by the SDK's session manager (``413`` past the limit).
"""

from __future__ import annotations

import hmac
import ipaddress
import secrets
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import attrs
from starlette.datastructures import Headers
from starlette.responses import JSONResponse

from orkeon_actors.errors import InvalidArgumentError
from orkeon_actors.loopback import is_loopback

__all__ = ["HttpGuard", "HttpPolicy"]

Asgi = Callable[[Any, Any, Any], Awaitable[None]]


def _is_wildcard(host: str) -> bool:
    try:
        return ipaddress.ip_address(host).is_unspecified
    except ValueError:
        return False


def _bracketed(name: str) -> str:
    return f"[{name}]" if ":" in name and not name.startswith("[") else name


@attrs.frozen
class HttpPolicy:
    """Where the HTTP server listens and whom it lets in (see the module docstring).

    ``token``: the bearer token (default: a fresh random one). ``allow_remote``: accept a
    non-loopback ``host``. ``allowed_hosts``: further names (DNS names or addresses,
    without port) clients may put in ``Host``; required for a wildcard bind."""

    host: str = "127.0.0.1"
    token: str = attrs.field(factory=lambda: secrets.token_urlsafe(32))
    allow_remote: bool = False
    allowed_hosts: Sequence[str] = attrs.field(default=(), converter=tuple)

    def __attrs_post_init__(self) -> None:
        if len(self.token) < 16:
            raise InvalidArgumentError(
                "the MCP bearer token is too short: give at least 16 characters (or none, to have one generated)"
            )
        if not is_loopback(self.host) and not self.allow_remote:
            raise InvalidArgumentError(
                f"orkeon mcp would listen on {self.host!r}, reachable from other machines, where anyone holding "
                "the token acts as the served identity; it binds 127.0.0.1 by default: pass --allow-remote "
                "(allow_remote=True) if you really mean to expose it"
            )
        if _is_wildcard(self.host) and not self.allowed_hosts:
            raise InvalidArgumentError(
                f"{self.host!r} listens on every address, so the Host header cannot be checked against it: "
                "name the host clients will use with --allow-host NAME (repeatable)"
            )

    @property
    def host_names(self) -> tuple[str, ...]:
        """The names (no port) a request's ``Host`` may carry."""
        if is_loopback(self.host):
            names: tuple[str, ...] = ("127.0.0.1", "localhost", "[::1]")
            if self.host not in ("127.0.0.1", "localhost", "::1"):
                names = (self.host, *names)
        elif _is_wildcard(self.host):
            names = ()
        else:
            names = (_bracketed(self.host),)
        return (*names, *(_bracketed(name.lower()) for name in self.allowed_hosts))

    @property
    def url_host(self) -> str:
        """The host to print in the URL."""
        return _bracketed(self.allowed_hosts[0] if _is_wildcard(self.host) else self.host)

    def authorized(self, header: str | None) -> bool:
        """Whether an ``Authorization`` header carries this policy's bearer token."""
        if header is None:
            return False
        scheme, _, credential = header.partition(" ")
        if scheme.lower() != "bearer":
            return False
        return hmac.compare_digest(credential.strip().encode(), self.token.encode())


class HttpGuard:
    """The ASGI app in front of the MCP endpoint: ``Host``, ``Origin`` and the token,
    checked before ``app`` sees the request. :meth:`listening` gives the bound port;
    until then every request is refused."""

    def __init__(self, app: Asgi, policy: HttpPolicy) -> None:
        self._app = app
        self.policy = policy
        self._hosts: frozenset[str] = frozenset()
        self._origins: frozenset[str] = frozenset()

    def listening(self, port: int) -> None:
        self._hosts = frozenset(f"{name}:{port}".lower() for name in self.policy.host_names)
        self._origins = frozenset(f"http://{host}" for host in self._hosts)

    def refusal(self, headers: Headers) -> tuple[int, str] | None:
        """``(status, reason)`` for a request that may not pass, else ``None``."""
        host = headers.get("host", "").lower()
        if host not in self._hosts:
            return 421, "the Host header does not name this server's address and port"
        origin = headers.get("origin")
        if origin is not None and origin.lower() not in self._origins:
            return 403, "requests from another origin are refused"
        if not self.policy.authorized(headers.get("authorization")):
            return 401, "missing or wrong bearer token: send 'Authorization: Bearer TOKEN' (printed at start)"
        return None

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        refused = self.refusal(Headers(scope=scope))
        if refused is None:
            await self._app(scope, receive, send)
            return
        status, reason = refused
        extra = {"WWW-Authenticate": "Bearer"} if status == 401 else None
        await JSONResponse({"error": reason}, status_code=status, headers=extra)(scope, receive, send)
