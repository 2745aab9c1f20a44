"""A TLS listener on the test run's own RabbitMQ, with certificates the test makes.

:func:`tls_listener` makes a CA, a server certificate for ``127.0.0.1`` / ``localhost``
and one client certificate per host with the ``cryptography`` package, starts an
``amqp/ssl`` listener on a free port of the running broker at runtime
(``rabbit_networking:start_ssl_listener``, RabbitMQ 3.10 on Erlang/OTP 25 here) that
requires a client certificate signed by that CA, creates one broker user per host with
the permissions ``docs/distributed.md`` documents, and undoes all of it on exit. Two
``rabbitmqctl eval`` calls in all (each boots an Erlang VM: seconds on a loaded machine).

It needs ``rabbitmqctl`` and the broker's Erlang cookie (root, or the ``rabbitmq``
user): :func:`tls_missing` says why it cannot run; the tests skip with that reason,
except under ``CI=true`` where they fail (CI runs as root beside the broker).
"""

from __future__ import annotations

import datetime
import ipaddress
import os
import pwd
import secrets
import shutil
import socket
import subprocess
import tempfile
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

import attrs
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from .broker import broker_missing

__all__ = ["TlsBroker", "make_ca", "tls_listener", "tls_missing"]


def tls_missing() -> str | None:
    """Why a TLS listener cannot be started here, or ``None``."""
    missing = broker_missing()
    if missing is not None:
        return missing
    if os.geteuid() != 0:
        return "starting a TLS listener on the broker needs rabbitmqctl as root (the broker's Erlang cookie)"
    try:
        pwd.getpwnam("rabbitmq")
    except KeyError:
        return "no 'rabbitmq' user owns the broker here: its server key cannot be handed to it"
    return None


@attrs.frozen
class _Issuer:
    name: x509.Name
    key: ec.EllipticCurvePrivateKey


def make_ca(directory: Path, name: str) -> tuple[Path, _Issuer]:
    """A self-signed CA: its certificate's PEM file and what signs with it."""
    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    now = datetime.datetime.now(datetime.UTC)
    certificate = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=True,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .sign(key, hashes.SHA256())
    )
    path = directory / f"{name}.pem"
    path.write_bytes(certificate.public_bytes(serialization.Encoding.PEM))
    return path, _Issuer(subject, key)


def _issue(directory: Path, issuer: _Issuer, name: str, *, server: bool) -> tuple[Path, Path]:
    """A certificate signed by ``issuer`` (a server's names ``localhost`` and 127.0.0.1):
    its PEM file and its key's (mode 600)."""
    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.datetime.now(datetime.UTC)
    builder = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)]))
        .issuer_name(issuer.name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(
            x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH if server else ExtendedKeyUsageOID.CLIENT_AUTH]),
            critical=False,
        )
    )
    if server:
        names = [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
        builder = builder.add_extension(x509.SubjectAlternativeName(names), critical=False)
    certificate = builder.sign(issuer.key, hashes.SHA256())
    cert_path, key_path = directory / f"{name}.pem", directory / f"{name}.key"
    cert_path.write_bytes(certificate.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    key_path.chmod(0o600)
    return cert_path, key_path


@attrs.frozen
class TlsBroker:
    """The listener's ``port``, the ``cafile`` that verifies it, the ``directory`` of the
    files, and per host its ``logins`` (user, password) and client ``certificates``
    (certfile, keyfile)."""

    port: int
    cafile: Path
    directory: Path
    logins: dict[str, tuple[str, str]]
    certificates: dict[str, tuple[Path, Path]]

    def uri(self, host: str, vhost: str, *, cafile: Path | None = None) -> str:
        """``host``'s ``amqps://`` URI: its login and client certificate, the CA."""
        user, password = self.logins[host]
        certfile, keyfile = self.certificates[host]
        ca = cafile if cafile is not None else self.cafile
        return (
            f"amqps://{user}:{password}@127.0.0.1:{self.port}/{vhost}?cafile={ca}&certfile={certfile}&keyfile={keyfile}"
        )


def _erlang_string(value: str | Path) -> str:
    """``value`` as an Erlang string literal (backslashes and quotes escaped)."""
    text = str(value).replace("\\", "\\\\").replace('"', '\\"')
    return f'"{text}"'


def _binary(value: str) -> str:
    return f"<<{_erlang_string(value)}>>"


def _eval(expression: str) -> str:
    done = subprocess.run(
        ["rabbitmqctl", "-q", "eval", expression], capture_output=True, text=True, timeout=120, check=False
    )
    if done.returncode != 0:
        raise RuntimeError(f"rabbitmqctl eval failed ({done.returncode}): {done.stderr or done.stdout}")
    return done.stdout.strip()


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@contextmanager
def tls_listener(vhost: str, hosts: Sequence[str], permissions: str) -> Iterator[TlsBroker]:
    """A TLS listener on the running broker and a login per host on ``vhost`` with
    ``permissions`` (configure, write and read), for the block (see the module docstring)."""
    directory = Path(tempfile.mkdtemp(prefix="orkeon-tls-"))
    directory.chmod(0o755)  # the broker (user rabbitmq) reads its files here
    try:
        cafile, ca = make_ca(directory, "fleet-ca")
        server_cert, server_key = _issue(directory, ca, "broker", server=True)
        broker_user = pwd.getpwnam("rabbitmq")
        os.chown(server_key, broker_user.pw_uid, broker_user.pw_gid)
        certificates = {host: _issue(directory, ca, host, server=False) for host in hosts}
        logins = {host: (f"{host}-{uuid.uuid4().hex[:6]}", secrets.token_urlsafe(16)) for host in hosts}
        port = _free_port()
        listener = f'{{"127.0.0.1", {port}}}'
        options = (
            f"[{{cacertfile, {_erlang_string(cafile)}}}, {{certfile, {_erlang_string(server_cert)}}}, "
            f"{{keyfile, {_erlang_string(server_key)}}}, {{verify, verify_peer}}, {{fail_if_no_peer_cert, true}}]"
        )
        steps = [f"ok = rabbit_networking:start_ssl_listener({listener}, {options}, 1)"]
        for user, password in logins.values():
            steps.append(
                f'ok = rabbit_auth_backend_internal:add_user({_binary(user)}, {_binary(password)}, <<"orkeon-test">>)'
            )
            steps.append(
                f"ok = rabbit_auth_backend_internal:set_permissions({_binary(user)}, {_binary(vhost)}, "
                f'{_binary(permissions)}, {_binary(permissions)}, {_binary(permissions)}, <<"orkeon-test">>)'
            )
        _eval(", ".join(steps) + ", done.")
        try:
            yield TlsBroker(port, cafile, directory, logins, certificates)
        finally:
            undo = [f"rabbit_networking:stop_tcp_listener({listener})"]
            undo += [
                f'rabbit_auth_backend_internal:delete_user({_binary(user)}, <<"orkeon-test">>)'
                for user, _ in logins.values()
            ]
            _eval(", ".join(undo) + ", done.")
    finally:
        shutil.rmtree(directory, ignore_errors=True)
