"""Whether a host name or address reaches only this machine: the one check every server
of the package (the Studio, ``orkeon mcp``) makes before it binds anything but loopback.

:func:`is_loopback` is true for ``localhost``, any ``127.0.0.0/8`` address and ``::1``;
false for every other name (a DNS name may resolve anywhere) and for the wildcard
addresses ``0.0.0.0`` and ``::``, which bind every interface.
"""

from __future__ import annotations

import ipaddress

__all__ = ["is_loopback"]


def is_loopback(host: str) -> bool:
    """Whether ``host`` names only this machine (module docstring)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False
