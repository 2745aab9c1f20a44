"""Broker URIs: amqps:// with TLS options and a per-host login become pika parameters with
a real ``ssl.SSLContext``; bad input is a typed error saying what is wrong. (No TLS broker
runs on this machine: the handshake itself is not exercised here.)"""

from __future__ import annotations

import ssl
import subprocess
from pathlib import Path

import pytest

from orkeon_actors.errors import InvalidArgumentError
from orkeon_actors.hub.amqp.link import BrokerLink
from orkeon_actors.hub.amqp.uri import connection_parameters, redacted


@pytest.fixture(scope="module")
def pem(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A self-signed certificate (it doubles as its own CA) and its key."""
    directory = tmp_path_factory.mktemp("tls")
    cert, key = directory / "host-a.pem", directory / "host-a.key"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=broker.fleet.test",
         "-keyout", str(key), "-out", str(cert)],
        check=True, capture_output=True, timeout=60,
    )  # fmt: skip
    return cert, key


def test_amqps_with_a_ca_and_a_client_certificate(pem: tuple[Path, Path]) -> None:
    cert, key = pem
    uri = f"amqps://host-a:s%40cret@broker.fleet.test/fleet?cafile={cert}&certfile={cert}&keyfile={key}&heartbeat=30"
    parameters = connection_parameters(uri)
    assert parameters.port == 5671 and parameters.host == "broker.fleet.test" and parameters.virtual_host == "fleet"
    assert parameters.credentials.username == "host-a" and parameters.credentials.password == "s@cret"
    assert parameters.heartbeat == 30
    options = parameters.ssl_options
    assert options is not None and options.server_hostname == "broker.fleet.test"
    context = options.context
    assert context.verify_mode is ssl.CERT_REQUIRED and context.check_hostname
    assert [dict(entry[0] for entry in ca["subject"]) for ca in context.get_ca_certs()] == [
        {"commonName": "broker.fleet.test"}
    ]


def test_the_certificate_name_and_verification_can_be_set(pem: tuple[Path, Path]) -> None:
    cert, _ = pem
    named = connection_parameters(f"amqps://h:p@10.0.0.5:6000/v?cafile={cert}&server_hostname=broker.fleet.test")
    assert named.port == 6000 and named.ssl_options is not None
    assert named.ssl_options.server_hostname == "broker.fleet.test"
    lab = connection_parameters("amqps://h:p@10.0.0.5/v?verify=false")
    assert lab.ssl_options is not None and lab.ssl_options.context.verify_mode is ssl.CERT_NONE


def test_plain_amqp_has_no_tls() -> None:
    parameters = connection_parameters("amqp://guest:guest@127.0.0.1/%2F")
    assert parameters.ssl_options is None and parameters.port == 5672 and parameters.virtual_host == "/"


@pytest.mark.parametrize(
    ("uri", "says"),
    [
        ("http://h/v", "has scheme 'http'"),
        ("amqp:///v", "names no host"),
        ("amqp://h/v?cafile=/etc/hostname", "has TLS options (cafile) but scheme amqp"),
        ("amqps://h/v?cafile=/nonexistent/ca.pem", "cafile '/nonexistent/ca.pem' does not exist"),
        ("amqps://h/v?verify=maybe", "verify must be true or false"),
        ("amqp://h/v?colour=blue", "Unknown URL parameter: 'colour'"),
        ("amqp://host-a@h/v", "has a login without a password"),
    ],
)
def test_bad_uris_are_typed_errors_that_say_what_is_wrong(uri: str, says: str) -> None:
    with pytest.raises(InvalidArgumentError, match=says.replace("(", r"\(").replace(")", r"\)")):
        connection_parameters(uri)


def test_a_client_certificate_needs_its_key(pem: tuple[Path, Path]) -> None:
    cert, _ = pem
    with pytest.raises(InvalidArgumentError, match="certfile and keyfile go together"):
        connection_parameters(f"amqps://h/v?certfile={cert}")


def test_a_file_that_is_not_a_certificate_does_not_load(tmp_path: Path) -> None:
    bogus = tmp_path / "ca.pem"
    bogus.write_text("not a certificate")
    with pytest.raises(InvalidArgumentError, match="its TLS files do not load"):
        connection_parameters(f"amqps://h/v?cafile={bogus}")


def test_messages_never_show_the_password() -> None:
    assert redacted("amqps://host-a:s3cret@broker:5671/fleet?cafile=/x") == "amqps://host-a@broker:5671/fleet"
    with pytest.raises(InvalidArgumentError) as raised:
        connection_parameters("amqp://host-a:s3cret@broker/v?colour=blue")
    assert "s3cret" not in str(raised.value)


def test_the_link_refuses_a_bad_uri_before_starting() -> None:
    with pytest.raises(InvalidArgumentError, match="has scheme 'redis'"):
        BrokerLink("redis://h/v")
