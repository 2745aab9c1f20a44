"""Broker URIs: ``amqp://`` and ``amqps://`` with TLS options and a per-host login
(cross-host messaging design, §8 step 1 and §10.2).

``amqps://LOGIN:PASSWORD@HOST:PORT/VHOST?cafile=...&certfile=...&keyfile=...`` is parsed by
:func:`connection_parameters` into pika's parameters with an ``ssl.SSLContext``:

=====================  ===============================================================
``cafile``             PEM file of the CAs that sign the broker's certificate (default:
                       the system's trust store)
``certfile``           this host's client certificate (PEM), for brokers that require
                       one (``ssl_options.fail_if_no_peer_cert``); needs ``keyfile``
``keyfile``            the private key of ``certfile`` (PEM)
``server_hostname``    the name the broker's certificate must carry (default: HOST)
``verify``             ``true`` (default) or ``false``: checking the broker's
                       certificate and name; ``false`` is for a lab only, never a fleet
=====================  ===============================================================

Every other query parameter is pika's own (``heartbeat``, ``connection_attempts``,
``socket_timeout``, ...). The port defaults to 5671 for ``amqps`` and 5672 for
``amqp``. The login is the URI's user part: give every host its own broker user
(``docs/distributed.md`` shows the ``rabbitmqctl`` commands), so that one host's
credentials can be revoked without touching the others.

Bad input raises ``InvalidArgumentError`` saying what is wrong: an unknown scheme, TLS
options on a plain ``amqp://`` URI, a missing or unreadable certificate file, a
``certfile`` without its ``keyfile``, a login without its password, an unknown parameter. Nothing is contacted here.
"""

from __future__ import annotations

import os
import ssl
import urllib.parse
from typing import Final

import pika

from orkeon_actors.errors import InvalidArgumentError

__all__ = ["TLS_OPTIONS", "connection_parameters", "redacted"]

TLS_OPTIONS: Final = ("cafile", "certfile", "keyfile", "server_hostname", "verify")


def connection_parameters(uri: str) -> pika.URLParameters:
    """pika's parameters for ``uri`` (see the module docstring)."""
    parts = urllib.parse.urlsplit(uri)
    if parts.scheme not in ("amqp", "amqps"):
        raise InvalidArgumentError(
            f"broker URI {redacted(uri)!r} has scheme {parts.scheme!r}: use amqp://HOST:5672/VHOST or "
            "amqps://HOST:5671/VHOST"
        )
    if not parts.hostname:
        raise InvalidArgumentError(f"broker URI {redacted(uri)!r} names no host: amqp://LOGIN:PASSWORD@HOST/VHOST")
    if parts.username is not None and parts.password is None:
        raise InvalidArgumentError(
            f"broker URI {redacted(uri)!r} has a login without a password: amqp://LOGIN:PASSWORD@HOST/VHOST"
        )
    query = urllib.parse.parse_qs(parts.query, keep_blank_values=True)
    tls = {name: values[-1] for name, values in query.items() if name in TLS_OPTIONS}
    rest = [(name, value) for name, values in query.items() if name not in TLS_OPTIONS for value in values]
    if tls and parts.scheme != "amqps":
        raise InvalidArgumentError(
            f"broker URI {redacted(uri)!r} has TLS options ({', '.join(sorted(tls))}) but scheme amqp: "
            "use amqps:// (the broker's TLS port, 5671 by default)"
        )
    pika_uri = urllib.parse.urlunsplit(parts._replace(query=urllib.parse.urlencode(rest)))
    try:
        parameters = pika.URLParameters(pika_uri)
    except ValueError as exc:
        raise InvalidArgumentError(f"broker URI {redacted(uri)!r}: {exc}") from None
    if parts.scheme == "amqps":
        context, hostname = _tls_context(tls, parts.hostname, uri)
        parameters.ssl_options = pika.SSLOptions(context, server_hostname=hostname)
    return parameters


def _tls_context(tls: dict[str, str], host: str, uri: str) -> tuple[ssl.SSLContext, str]:
    verify = tls.get("verify", "true").lower()
    if verify not in ("true", "false"):
        raise InvalidArgumentError(f"broker URI {redacted(uri)!r}: verify must be true or false, got {verify!r}")
    for name in ("cafile", "certfile", "keyfile"):
        path = tls.get(name)
        if path is not None and not os.access(path, os.R_OK):
            raise InvalidArgumentError(
                f"broker URI {redacted(uri)!r}: {name} {path!r} does not exist or is not readable by this process"
            )
    if ("certfile" in tls) != ("keyfile" in tls):
        raise InvalidArgumentError(
            f"broker URI {redacted(uri)!r}: certfile and keyfile go together (the client certificate and its key)"
        )
    try:
        context = ssl.create_default_context(cafile=tls.get("cafile"))
        if "certfile" in tls:
            context.load_cert_chain(tls["certfile"], tls["keyfile"])
    except (ssl.SSLError, ValueError) as exc:
        raise InvalidArgumentError(f"broker URI {redacted(uri)!r}: its TLS files do not load: {exc}") from None
    if verify == "false":
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    return context, tls.get("server_hostname", host)


def redacted(uri: str) -> str:
    """``uri`` without its password and query, for messages and logs."""
    try:
        parts = urllib.parse.urlsplit(uri)
        host = parts.hostname or ""
        port = f":{parts.port}" if parts.port is not None else ""
    except ValueError:
        return "<unparsable broker URI>"
    user = f"{urllib.parse.unquote(parts.username)}@" if parts.username else ""
    return f"{parts.scheme}://{user}{host}{port}{parts.path}"
