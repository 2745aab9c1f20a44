"""The Studio: a local web view of crews, waits, the message flow, the ACL and metrics.

Attach it to a runtime in the same process::

    rt = ok.Runtime.start(store="state.db", studio=0)     # 0: any free port
    print(rt.studio.url)                                   # http://127.0.0.1:PORT/?token=...

or watch a store file another process runs (read-only): ``orkeon studio --store state.db``.
What it shows and how it is built: ``docs/studio.md``. It is the external peer
``client://studio`` (spec §10.2.1): the runtime's ACL decides which crews it sees, and a
post from it (allowed with ``studio_post=True``) passes the ACL like any other.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from orkeon_actors.lazy import lazy_attributes

if TYPE_CHECKING:
    from orkeon_actors.studio.feed import StudioFeed
    from orkeon_actors.studio.server import StudioServer
    from orkeon_actors.studio.sources import STUDIO_CLIENT, LiveSource, StoreFileSource, Visibility
    from orkeon_actors.studio.tap import StudioTap
    from orkeon_actors.studio.watcher import LifecycleWatcher

_DEFINED_IN: dict[str, str] = {
    "StudioFeed": ".feed",
    "StudioServer": ".server",
    "STUDIO_CLIENT": ".sources",
    "LiveSource": ".sources",
    "StoreFileSource": ".sources",
    "Visibility": ".sources",
    "StudioTap": ".tap",
    "LifecycleWatcher": ".watcher",
}
"""Imported on first use: the CLI builds ``orkeon studio``'s parser without loading the
Studio's server and sources."""


__getattr__ = lazy_attributes(__name__, _DEFINED_IN)


__all__ = [
    "STUDIO_CLIENT",
    "LifecycleWatcher",
    "LiveSource",
    "StoreFileSource",
    "StudioFeed",
    "StudioServer",
    "StudioTap",
    "Visibility",
]
