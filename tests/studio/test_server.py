"""The Studio's server: the token guards every route, it stays on loopback unless told,
the feed streams as server-sent events, the ACL decides what it shows, and a store file
another process runs is read without its lock."""

from __future__ import annotations

import http.client
import json
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

import orkeon_actors as ok
from orkeon_actors.acl import AclMiddleware, AclRegistry, CrewLink, RestrictiveCrewLinkPolicy
from orkeon_actors.errors import InvalidArgumentError
from orkeon_actors.studio import StoreFileSource, StudioServer
from orkeon_actors.testing import wait_until

CHILD = Path(__file__).with_name("store_child.py")


def _get(server: StudioServer, path: str, *, token: str | None = "ok", **headers: str) -> tuple[int, Any]:
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
    query = (
        "" if token is None else ("&" if "?" in path else "?") + "token=" + (server.token if token == "ok" else token)
    )
    conn.request("GET", path + query, headers=headers)
    response = conn.getresponse()
    body = response.read()
    conn.close()
    kind = response.getheader("Content-Type") or ""
    return response.status, json.loads(body) if kind.startswith("application/json") else body


def _post(server: StudioServer, body: object, token: str | None) -> tuple[int, Any]:
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
    headers = {"Content-Type": "application/json"}
    if token is not None:
        headers["X-Studio-Token"] = token
    conn.request("POST", "/api/post", body=json.dumps(body), headers=headers)
    response = conn.getresponse()
    parsed = json.loads(response.read())
    conn.close()
    return response.status, parsed


@pytest.fixture
def rt() -> Iterator[ok.Runtime]:
    with ok.Runtime.start(studio=0, studio_post=True) as runtime:
        yield runtime


@pytest.mark.parametrize("path", ["/", "/static/studio.js", "/api/state", "/api/events", "/api/crews/x/snapshot"])
@pytest.mark.parametrize("token", [None, "wrong"])
def test_every_route_refuses_a_request_without_the_token(rt: ok.Runtime, path: str, token: str | None) -> None:
    assert rt.studio is not None
    status, body = _get(rt.studio, path, token=token)
    assert status == 401
    assert body == {
        "error": {"status": 401, "message": "missing or wrong access token: open the URL the Studio printed"}
    }


def test_the_page_and_its_assets_are_served_from_the_package(rt: ok.Runtime) -> None:
    assert rt.studio is not None
    assert rt.studio.url.startswith(f"http://127.0.0.1:{rt.studio.port}/?token=")
    status, page = _get(rt.studio, "/")
    assert status == 200 and b"<title>orkeon Studio</title>" in page
    assert rt.studio.token.encode() in page  # the asset links carry it
    for asset in ("studio.js", "studio.css"):
        status, body = _get(rt.studio, f"/static/{asset}")
        assert status == 200 and len(body) > 1000
    for asset in ("/", "/static/studio.js", "/static/studio.css"):  # nothing loads from elsewhere: it works offline
        body = _get(rt.studio, asset)[1].replace(b"http://www.w3.org/2000/svg", b"")
        assert b"http://" not in body and b"https://" not in body and b"//cdn" not in body


def test_a_non_loopback_address_needs_an_explicit_flag(rt: ok.Runtime) -> None:
    assert rt.studio is not None
    with pytest.raises(InvalidArgumentError, match="allow_remote=True"):
        StudioServer(rt.studio.source, host="0.0.0.0")


def test_posting_needs_the_token_header_and_the_flag(rt: ok.Runtime) -> None:
    assert rt.studio is not None
    box = rt.hub.register_mailbox("agent://c/a")
    assert _post(rt.studio, {"to": "agent://c/a", "payload": 1}, token=None)[0] == 401
    assert _post(rt.studio, {"to": "agent://c/a", "payload": 1}, token="wrong")[0] == 401
    status, body = _post(rt.studio, {"to": "agent://c/a", "payload": {"hi": 1}}, token=rt.studio.token)
    assert status == 200
    message = rt.hub.bind("c", "a").wait_for(ok.WaitOnMailbox("agent://c/a"), timeout=5)
    assert (message.json(), str(message.source_crew_id), str(message.id)) == ({"hi": 1}, "studio", body["message_id"])
    status, body = _post(rt.studio, {"to": "agent://nobody/here", "payload": 1}, token=rt.studio.token)
    assert status == 422 and body["error"]["message"].startswith("MailboxNotFoundError")
    box.close()
    with ok.Runtime.start(studio=0) as read_only:
        assert read_only.studio is not None
        status, body = _post(read_only.studio, {"to": "agent://c/a"}, token=read_only.studio.token)
        assert status == 403 and "studio_post=True" in body["error"]["message"]


def _stream(server: StudioServer, events: list[dict[str, Any]], stop: threading.Event) -> None:
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
    conn.request("GET", "/api/events?token=" + server.token)
    response = conn.getresponse()
    assert response.getheader("Content-Type", "").startswith("text/event-stream")
    while not stop.is_set():
        line = response.fp.readline()
        if not line:
            return
        if line.startswith(b"data: {"):
            events.append(json.loads(line[len(b"data: ") :]))
    conn.close()


def test_the_feed_streams_as_server_sent_events(rt: ok.Runtime) -> None:
    assert rt.studio is not None
    events: list[dict[str, Any]] = []
    stop = threading.Event()
    reader = threading.Thread(target=_stream, args=(rt.studio, events, stop), daemon=True)
    reader.start()
    wait_until(lambda: rt.studio is not None and len(rt.studio.streams) == 1, what="the browser attached")
    rt.hub.bind("c", "a").publish("orders.created", {"id": 1})
    wait_until(lambda: any(e["kind"] == "publish" for e in events), what="the publish streamed")
    stop.set()
    assert events[0]["topic"] == "orders.created" and events[0]["seq"] >= 1


def test_the_acl_decides_which_crews_the_studio_sees() -> None:
    registry = AclRegistry()
    registry.register_crew("open", "open", links=[CrewLink.client("studio", "outbound")])
    registry.register_crew("closed", "closed", links=[])
    with ok.Runtime.start(studio=0, middleware=[AclMiddleware(RestrictiveCrewLinkPolicy(registry))]) as rt:
        assert rt.studio is not None
        source = rt.studio.source
        assert source.visible({"crew": "open"})
        assert not source.visible({"crew": "closed"})
        assert not source.visible({"crew": "open", "to_crew": "closed"})
        assert not source.visible({"crew": "never-registered"})  # restrictive: no grant
        graph = _get(rt.studio, "/api/state")[1]["acl"]
        assert {"from": "open", "to": "client:studio", "direction": "outbound", "topics": []} in graph["edges"]
        assert {n["id"] for n in graph["nodes"]} == {"open", "closed", "client:studio"}
    with ok.Runtime.start(studio=0) as permissive:
        assert permissive.studio is not None and permissive.studio.source.visible({"crew": "anyone"})


@pytest.fixture
def running_store(tmp_path: Path) -> Iterator[Path]:
    db = tmp_path / "other.db"
    child = subprocess.Popen(
        [sys.executable, str(CHILD), str(db)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    assert child.stdout is not None and child.stdin is not None
    try:
        assert child.stdout.readline().strip() == "ready"
        yield db
    finally:
        child.stdin.close()
        child.wait(30)


def test_a_store_another_process_runs_is_read_without_its_lock(running_store: Path) -> None:
    server = StudioServer(StoreFileSource(running_store))
    try:
        status, state = _get(server, "/api/state")
        assert status == 200 and state["mode"] == "store" and state["read_only"] is True
        (crew,) = state["crews"]
        assert (crew["id"], crew["name"], crew["state"], crew["mode"], crew["agents"]) == (
            "napper",
            "sleeper",
            "Asleep",
            "sequential",
            ["a"],
        )
        (wait,) = state["waits"]
        assert (wait["crew"], wait["kind"], wait["target"], wait["expires_at"]) == (
            "napper",
            "on_mailbox",
            "agent://napper/a",
            None,
        )
        assert {"address": "agent://napper/a", "depth": 0} in state["mailboxes"]
        status, snapshot = _get(server, "/api/crews/napper/snapshot")
        assert status == 200 and snapshot["id"] == "napper" and snapshot["agents"][0]["agent_id"] == "a"
        assert _get(server, "/api/crews/nobody/snapshot")[0] == 404
        assert _post(server, {"to": "agent://napper/a"}, token=server.token)[0] == 403
    finally:
        server.stop()


def test_a_missing_store_file_is_a_typed_error(tmp_path: Path) -> None:
    with pytest.raises(InvalidArgumentError, match="no store at"):
        StoreFileSource(tmp_path / "absent.db")
    assert not (tmp_path / "absent.db").exists()


def test_stop_ends_open_streams(rt: ok.Runtime) -> None:
    assert rt.studio is not None
    events: list[dict[str, Any]] = []
    reader = threading.Thread(target=_stream, args=(rt.studio, events, threading.Event()), daemon=True)
    reader.start()
    wait_until(lambda: rt.studio is not None and len(rt.studio.streams) == 1, what="the browser attached")
    rt.studio.stop()
    reader.join(10)
    assert not reader.is_alive()
    assert urlsplit(rt.studio.url).port == rt.studio.port


def test_orkeon_studio_serves_a_store_until_interrupted(running_store: Path) -> None:
    command = [sys.executable, "-m", "orkeon_actors.cli", "studio", "--store", str(running_store)]
    child = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert child.stdout is not None
    try:
        first = child.stdout.readline()
        assert first.startswith(f"Studio for {running_store} (read-only): http://127.0.0.1:")
        url = urlsplit(first.split(": ", 1)[1].strip())
        conn = http.client.HTTPConnection("127.0.0.1", url.port, timeout=10)
        conn.request("GET", "/api/state?" + url.query)
        state = json.loads(conn.getresponse().read())
        assert [crew["id"] for crew in state["crews"]] == ["napper"]
    finally:
        child.send_signal(signal.SIGINT)
        out, err = child.communicate(timeout=30)
    assert child.returncode == 0, err
    assert "stopped" in out and "Traceback" not in err


def test_orkeon_studio_explains_a_missing_store(tmp_path: Path) -> None:
    command = [sys.executable, "-m", "orkeon_actors.cli", "studio", "--store", str(tmp_path / "nope.db")]
    done = subprocess.run(command, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert done.stderr.startswith("orkeon studio: no store at") and "Traceback" not in done.stderr


def test_orkeon_crew_run_serves_the_studio_until_interrupted(tmp_path: Path) -> None:
    crew = Path(__file__).parents[2] / "examples" / "crews" / "autonomous.yaml"
    command = [sys.executable, "-m", "orkeon_actors.cli", "crew", "run", str(crew), "--studio"]
    command += ["--store", str(tmp_path / "run.db")]
    child = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert child.stdout is not None
    try:
        first = child.stdout.readline()
        assert first.startswith("Studio: http://127.0.0.1:"), first
        url = urlsplit(first.split(": ", 1)[1].strip())
        lines: list[str] = []
        while not lines or "the Studio stays up" not in lines[-1]:
            line = child.stdout.readline()
            assert line, f"the run ended without serving the Studio: {lines}"
            lines.append(line)
        assert any(line.startswith("-> ") for line in lines), lines
        conn = http.client.HTTPConnection("127.0.0.1", url.port, timeout=10)
        conn.request("GET", "/api/state?" + url.query)
        state = json.loads(conn.getresponse().read())
        assert state["mode"] == "live" and state["read_only"] is True
    finally:
        child.send_signal(signal.SIGINT)
        out, err = child.communicate(timeout=30)
    assert child.returncode == 0, err
    assert "stopped" in out and "Traceback" not in err
