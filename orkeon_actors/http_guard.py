"""Who may talk to an HTTP server of the package (``orkeon mcp --transport http``,
``orkeon a2a``): the checks before the protocol SDK sees a request.

The server acts for the callers it lets in (the MCP tools read a mailbox and post as
their identity; an A2A caller starts crew runs as its ``client://`` peer), so every
request must prove it comes from someone the operator meant:

* **A bearer token.** ``Authorization: Bearer TOKEN`` on every request; the token is
  generated at start and printed (or given by the operator through ``ORKEON_MCP_TOKEN``,
  ``ORKEON_A2A_TOKEN``). Compared in constant time. Missing or wrong: ``401`` and nothing
  else. ``HttpPolicy.callers`` gives further named tokens: the request is then made by
  the caller whose token it carries (:meth:`HttpPolicy.identify`), which the guard puts
  in the ASGI scope under :data:`CALLER_SCOPE_KEY`.
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
from collections.abc import Awaitable, Callable, Mapping, Sequence
from types import MappingProxyType
from typing import Any

import attrs
from starlette.datastructures import Headers
from starlette.responses import JSONResponse

from orkeon_actors.errors import InvalidArgumentError
from orkeon_actors.loopback import is_loopback

__all__ = ["CALLER_SCOPE_KEY", "HttpGuard", "HttpPolicy"]

CALLER_SCOPE_KEY = "orkeon.caller"
"""The ASGI scope key under which :class:`HttpGuard` leaves the name of the caller it let in."""

Asgi = Callable[[Any, Any, Any], Awaitable[None]]


def _is_wildcard(host: str) -> bool:
    try:
        return ipaddress.ip_address(host).is_unspecified
    except ValueError:
        return False


def _names(names: Sequence[str]) -> tuple[str, ...]:
    return tuple(names)


def _frozen(callers: Mapping[str, str]) -> Mapping[str, str]:
    return MappingProxyType(dict(callers))


def _bracketed(name: str) -> str:
    return f"[{name}]" if ":" in name and not name.startswith("[") else name


@attrs.frozen
class HttpPolicy:
    """Where the HTTP server listens and whom it lets in (see the module docstring).

    ``token``: the bearer token (default: a fresh random one), whose caller is named
    ``owner``. ``callers``: further callers, name -> token (each at least 16
    characters, all tokens distinct). ``allow_remote``: accept a non-loopback ``host``.
    ``allowed_hosts``: further names (DNS names or addresses, without port) clients may
    put in ``Host``; required for a wildcard bind. ``server`` names the server in the
    errors (``orkeon mcp``)."""

    host: str = "127.0.0.1"
    token: str = attrs.field(factory=lambda: secrets.token_urlsafe(32))
    allow_remote: bool = False
    allowed_hosts: Sequence[str] = attrs.field(default=(), converter=_names)
    callers: Mapping[str, str] = attrs.field(factory=dict, converter=_frozen)
    owner: str = "owner"
    server: str = "orkeon mcp"

    def __attrs_post_init__(self) -> None:
        for name, token in {self.owner: self.token, **self.callers}.items():
            if len(token) < 16:
                raise InvalidArgumentError(
                    f"the {self.server} bearer token of {name!r} is too short: give at least 16 characters "
                    "(or none, to have one generated)"
                )
        if len({self.token, *self.callers.values()}) != 1 + len(self.callers):
            raise InvalidArgumentError(
                f"two callers of {self.server} share a bearer token: give each its own, or the server cannot "
                "tell who is calling"
            )
        if not is_loopback(self.host) and not self.allow_remote:
            raise InvalidArgumentError(
                f"{self.server} would listen on {self.host!r}, reachable from other machines, where anyone holding "
                "a token acts as its caller; it binds 127.0.0.1 by default: pass --allow-remote "
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
        """Whether an ``Authorization`` header carries one of this policy's bearer tokens."""
        return self.identify(header) is not None

    def identify(self, header: str | None) -> str | None:
        """The caller whose bearer token an ``Authorization`` header carries (``owner``
        for :attr:`token`), or ``None``. Every token is compared, in constant time."""
        if header is None:
            return None
        scheme, _, credential = header.partition(" ")
        if scheme.lower() != "bearer":
            return None
        given = credential.strip().encode()
        found: str | None = None
        for name, token in ((self.owner, self.token), *self.callers.items()):
            if hmac.compare_digest(given, token.encode()):
                found = name
        return found


class HttpGuard:
    """The ASGI app in front of the endpoint: ``Host``, ``Origin`` and the token,
    checked before ``app`` sees the request, which then finds the caller's name in its
    scope (:data:`CALLER_SCOPE_KEY`). :meth:`listening` gives the bound port; until then
    every request is refused."""

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
        if self.policy.identify(headers.get("authorization")) is None:
            return 401, "missing or wrong bearer token: send 'Authorization: Bearer TOKEN' (printed at start)"
        return None

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        headers = Headers(scope=scope)
        refused = self.refusal(headers)
        if refused is None:
            await self._app(
                {**scope, CALLER_SCOPE_KEY: self.policy.identify(headers.get("authorization"))}, receive, send
            )
            return
        status, reason = refused
        extra = {"WWW-Authenticate": "Bearer"} if status == 401 else None
        await JSONResponse({"error": reason}, status_code=status, headers=extra)(scope, receive, send)
