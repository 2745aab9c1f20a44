"""Send orkeon_actors' logs through the standard ``logging`` module.

The library is silent by default (it logs with loguru and disables itself on import).
An application that configures stdlib ``logging`` routes the runtime's records into that
configuration with one call; from then on ``logging`` levels, handlers and formatters
apply to them like to the application's own records.

Run: python examples/logging_bridge.py
"""

from __future__ import annotations

import logging
import sys
import tempfile
from pathlib import Path

import orkeon_actors as ok


def main() -> None:
    # 1. The application's own logging configuration (any handlers and format you like).
    logging.basicConfig(stream=sys.stdout, level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    logging.getLogger("orkeon_actors.store").setLevel(logging.INFO)  # stdlib levels apply per module

    # 2. The bridge: every orkeon_actors record at DEBUG or above is re-emitted on the stdlib
    #    logger of the same name ("orkeon_actors.store.mailbox_store", ...).
    ok.enable_logging("DEBUG", sink=ok.StdlibPropagateHandler(), format="{message}")

    # 3. Use the runtime as usual; its records now flow through logging.
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "state.db"
        with ok.Runtime.start(store=db) as rt:  # the first run creates the mailbox and keeps a post
            rt.hub.register_mailbox("agent://billing/scorer")
            rt.hub.bind("orders", "planner").post("agent://billing/scorer", {"order": 42})
        with ok.Runtime.start(store=db) as rt:  # reopening logs at DEBUG: below INFO, filtered out
            reg = rt.hub.register_mailbox("agent://billing/scorer")
            with reg.reader() as reader:
                logging.getLogger("app").info("received %s", reader.receive().json())
        logging.getLogger("orkeon_actors.store").setLevel(logging.DEBUG)  # now the same line shows
        with ok.Runtime.start(store=db) as rt:
            rt.hub.register_mailbox("agent://billing/scorer")
            rt.hub.bind("orders", "planner").post("agent://billing/scorer", {"order": 43})
        with ok.Runtime.start(store=db) as rt:
            rt.hub.register_mailbox("agent://billing/scorer")

    ok.disable_logging()  # silent again


if __name__ == "__main__":
    main()
