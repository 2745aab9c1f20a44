"""Use the max_payload stage, by name once installed, or as an object.

pip install examples/middleware_plugin     # then:
python examples/middleware_plugin/run.py
"""

from __future__ import annotations

from orkeon_max_payload import MaxPayload, PayloadTooLargeError

import orkeon_actors as ok
from orkeon_actors.middleware import discover


def main() -> None:
    # Installed plugins are listed by name (entry point group orkeon_actors.middleware).
    print("installed stages:", sorted(discover()))
    for stage in ["max_payload", MaxPayload(limit=1_000)]:  # by name, or an object you configure
        with ok.Runtime.start(middleware=[stage]) as rt:
            client = rt.hub.bind("c", "a")
            client.publish("small", {"ok": True})
            try:
                client.publish("big", {"blob": "x" * 5_000})
            except PayloadTooLargeError as refused:
                label = stage if isinstance(stage, str) else "MaxPayload(limit=1_000)"
                print(f"{label}: refused: {refused}")


if __name__ == "__main__":
    main()
