"""Coverage-guided fuzzing (atheris / libFuzzer) of the tool JSON and the YAML loader.

Not part of the pytest run (the hypothesis suites there are); run it for a bounded time
after ``pip install -e ".[fuzz]"``::

    python tests/security/fuzz_atheris.py tools -max_total_time=60
    python tests/security/fuzz_atheris.py yaml -max_total_time=60

``tools`` feeds each input, as JSON text, to every tool through
``EventHubTools.invoke(..., errors="result")`` on an in-memory hub: anything but a dict
that is strict JSON is a crash. ``yaml`` feeds it to ``load_links``: anything but a
``LinksBlock`` or an ``AclConfigError`` is a crash. libFuzzer stops at the first crash
and writes the input to ``crash-*``.
"""

from __future__ import annotations

import json
import sys

import atheris

with atheris.instrument_imports():
    import orkeon_actors as ok
    from orkeon_actors.acl import load_links
    from orkeon_actors.acl.links import AclConfigError
    from orkeon_actors.tools import EventHubTools
    from orkeon_actors.tools.definitions import TOOL_NAMES

_runtime = ok.Runtime.start()
_tools = EventHubTools(_runtime.hub.bind("fuzz", "agent"))
_waiting = {"receive_message", "wait_for_event", "send_request"}


def fuzz_tools(data: bytes) -> None:
    provider = atheris.FuzzedDataProvider(data)
    name = TOOL_NAMES[provider.ConsumeIntInRange(0, len(TOOL_NAMES) - 1)]
    text = provider.ConsumeUnicodeNoSurrogates(provider.remaining_bytes())
    if name in _waiting:  # a valid wait would block: bound it, the rest stays fuzzed
        token = ok.CancelToken()
        token.cancel()
        try:
            result = _tools.invoke(name, text, errors="result", cancel=token)
        except ok.errors.CancelledError:
            return
    else:
        result = _tools.invoke(name, text, errors="result")
    assert isinstance(result, dict)
    json.dumps(result, allow_nan=False)


def fuzz_yaml(data: bytes) -> None:
    text = atheris.FuzzedDataProvider(data).ConsumeUnicodeNoSurrogates(len(data))
    try:
        load_links(text)
    except AclConfigError:
        return


def main() -> None:
    targets = {"tools": fuzz_tools, "yaml": fuzz_yaml}
    if len(sys.argv) < 2 or sys.argv[1] not in targets:
        raise SystemExit(f"usage: {sys.argv[0]} {{tools|yaml}} [libFuzzer options]")
    target = targets[sys.argv.pop(1)]
    atheris.Setup(sys.argv, target)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
