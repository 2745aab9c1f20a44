"""A fleet host in a child process, for tests and ``orkeon bench amqp``: start it with its
own store and host id (on its own vhost when the caller made one), drive it, SIGKILL it,
restart it on the same store.

:class:`HostProcess` runs ``python -m orkeon_actors.fleet.host_main`` (see that module for
the protocol and the ops) and talks to it over pipes. Guarantees:

* :meth:`HostProcess.start` returns once the child's runtime is up (it answered
  ``ready``), or raises ``HostCallError`` with the end of the child's log if it exited
  first or did not come up within the bound.
* :meth:`HostProcess.call` returns the op's value or raises ``HostCallError`` naming the
  remote error's type and message; it never waits past its ``within`` bound
  (``HostCallError`` then too). Calls may run concurrently (:meth:`call_async`): the child
  serves each op on its own thread.
* :meth:`HostProcess.kill` is a real ``SIGKILL``: no ``atexit``, no flush, no goodbye to
  the broker; whatever the child had not committed is gone, which is what crash tests
  need. Calls in flight fail with ``HostCallError``.

The child's standard error (its logs) goes to ``<store>.log`` beside its store, appended
across restarts.
"""

from __future__ import annotations

import json
import os
import secrets
import signal
import subprocess
import sys
import threading
from collections.abc import Sequence
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from pathlib import Path
from typing import IO, Any

from orkeon_actors.errors import EventHubError
from orkeon_actors.fleet.signing import HostKeys

__all__ = ["HostCallError", "HostProcess", "write_keys"]


class HostCallError(EventHubError):
    """A host process failed an op, died, or did not answer in time. ``error`` is the
    remote exception's type name (``"died"`` / ``"timeout"`` for the harness's own)."""

    def __init__(self, message: str, error: str) -> None:
        super().__init__(message)
        self.error = error


def write_keys(path: Path, hosts: Sequence[str]) -> HostKeys:
    """Write a fresh fleet keys file (``{"host": "<hex of 32 bytes>"}``) for ``hosts``."""
    keys = {host: secrets.token_bytes(32) for host in hosts}
    path.write_text(json.dumps({host: key.hex() for host, key in keys.items()}))
    path.chmod(0o600)
    return HostKeys(keys)


class HostProcess:
    """One host in a child process (see the module docstring). ``url`` ``None`` runs a
    host without a broker (its local durable hub only); ``keys_file`` is the fleet's keys
    (:func:`write_keys`); ``presence`` the heartbeat interval and TTL in seconds;
    ``kinds`` the crew kinds it can spawn; ``inbox_max_length`` its inboxes' cap
    (``InboxCaps.max_length``; ``None``: the default)."""

    def __init__(
        self,
        host_id: str,
        store: Path,
        *,
        url: str | None = None,
        keys_file: Path | None = None,
        presence: tuple[float, float] = (2.0, 7.0),
        kinds: Sequence[str] = (),
        inbox_max_length: int | None = None,
    ) -> None:
        self.inbox_max_length = inbox_max_length
        self.host_id = host_id
        self.presence = presence
        self.kinds = tuple(kinds)
        self.store = store
        self.url = url
        self.keys_file = keys_file
        self.log_path = store.with_name(store.name + ".log")
        self.pid: int | None = None
        self._process: subprocess.Popen[str] | None = None
        self._lock = threading.Lock()
        self._waiting: dict[int, Future[Any]] = {}
        self._next_id = 0
        self._ready: Future[dict[str, Any]] = Future()
        self._reader = threading.Thread()

    # -- lifecycle ----------------------------------------------------------------------

    def start(self, timeout: float = 60.0) -> HostProcess:
        command = [sys.executable, "-m", "orkeon_actors.fleet.host_main", "--host-id", self.host_id]
        command += ["--store", str(self.store)]
        if self.url is not None:
            command += ["--url", self.url]
        if self.keys_file is not None:
            command += ["--keys", str(self.keys_file)]
        command += ["--presence-interval", str(self.presence[0]), "--presence-ttl", str(self.presence[1])]
        if self.kinds:
            command += ["--kinds", *self.kinds]
        if self.inbox_max_length is not None:
            command += ["--inbox-max-length", str(self.inbox_max_length)]
        self._ready = Future()
        with open(self.log_path, "a") as log:
            process = subprocess.Popen(
                command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log, text=True, bufsize=1
            )
        self._process = process
        self.pid = process.pid
        self._reader = threading.Thread(
            target=self._read, args=(process,), name=f"host-{self.host_id}-out", daemon=True
        )
        self._reader.start()
        try:
            self._ready.result(timeout)
        except FutureTimeout:
            self.kill()
            raise HostCallError(
                f"host {self.host_id} did not come up within {timeout} s{self._tail()}", "timeout"
            ) from None
        return self

    def kill(self) -> None:
        """SIGKILL the child and wait until it is gone."""
        process = self._process
        if process is None:
            return
        if process.poll() is None:
            os.kill(process.pid, signal.SIGKILL)
        process.wait()
        self._reader.join(10)  # it sees the end of the pipe and fails the calls in flight

    def restart(self, timeout: float = 60.0) -> HostProcess:
        """Start again on the same store, host id and keys (after :meth:`kill` or :meth:`stop`)."""
        if self._process is not None and self._process.poll() is None:
            raise HostCallError(f"host {self.host_id} still runs (pid {self.pid}): kill or stop it first", "running")
        return self.start(timeout)

    def stop(self, timeout: float = 30.0) -> None:
        """Ask the child to stop its runtime and exit; SIGKILL it if it does not in time."""
        process = self._process
        if process is None or process.poll() is not None:
            return
        try:
            self.call("exit", within=timeout)
            process.wait(timeout)
        except (HostCallError, subprocess.TimeoutExpired):
            pass  # not answering: the kill below ends it
        finally:
            self.kill()

    @property
    def alive(self) -> bool:
        return self._process is not None and self._process.poll() is None

    def __enter__(self) -> HostProcess:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- calls ------------------------------------------------------------------------

    def call_async(self, op: str, **args: Any) -> Future[Any]:
        """Send ``op`` and return the future of its value (see :meth:`call`)."""
        process = self._process
        future: Future[Any] = Future()
        if process is None or process.poll() is not None or process.stdin is None:
            future.set_exception(HostCallError(f"host {self.host_id} is not running{self._tail()}", "died"))
            return future
        with self._lock:
            self._next_id += 1
            ident = self._next_id
            self._waiting[ident] = future
        try:
            process.stdin.write(json.dumps({"id": ident, "op": op, "args": args}) + "\n")
            process.stdin.flush()
        except (BrokenPipeError, ValueError, OSError):
            with self._lock:
                self._waiting.pop(ident, None)
            future.set_exception(HostCallError(f"host {self.host_id} died{self._tail()}", "died"))
        return future

    def call(self, op: str, *, within: float = 60.0, **args: Any) -> Any:
        """Run ``op`` with ``args`` on the host and return its value; ``within`` bounds
        the wait in seconds (``args`` may have their own ``timeout``, the op's)."""
        future = self.call_async(op, **args)
        try:
            return future.result(within)
        except FutureTimeout:
            raise HostCallError(f"host {self.host_id} did not answer {op} within {within} s", "timeout") from None

    # -- plumbing -----------------------------------------------------------------------

    def _read(self, process: subprocess.Popen[str]) -> None:
        stdout: IO[str] | None = process.stdout
        assert stdout is not None
        for line in stdout:
            answer = json.loads(line)
            if answer.get("ready"):
                self._ready.set_result(answer)
                continue
            with self._lock:
                future = self._waiting.pop(int(answer["id"]), None)
            if future is None:
                continue
            if answer["ok"]:
                future.set_result(answer["value"])
            else:
                error = str(answer["error"])
                future.set_exception(HostCallError(f"{self.host_id}: {error}: {answer['message']}", error))
        process.wait()
        self._close(process)

    def _close(self, process: subprocess.Popen[str]) -> None:
        with self._lock:
            waiting, self._waiting = self._waiting, {}
        died = HostCallError(f"host {self.host_id} exited ({process.returncode}){self._tail()}", "died")
        for future in waiting.values():
            if not future.done():
                future.set_exception(died)
        if not self._ready.done():
            self._ready.set_exception(died)
        for stream in (process.stdin, process.stdout):
            if stream is not None:
                try:
                    stream.close()
                except OSError:
                    pass  # already closed by the other side's death

    def _tail(self, lines: int = 15) -> str:
        try:
            text = self.log_path.read_text(errors="replace").splitlines()[-lines:]
        except OSError:
            return ""
        return ("; its log ends:\n" + "\n".join(text)) if text else ""
