"""What the browser tests share: Debian's Chromium driven by Playwright, no browser download.

``.ci/run`` installs chromium (``apt-get install -y chromium``) and the ``dev`` extra
installs Playwright; under ``CI=true`` a missing one fails the test instead of skipping it.
"""

from __future__ import annotations

import os
import shutil
from typing import Any

import pytest

__all__ = ["ARGS", "CHROMIUM", "sync_playwright_or_skip"]

CHROMIUM = "/usr/bin/chromium"
ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


def sync_playwright_or_skip() -> Any:
    """Playwright's ``sync_playwright``; skips the test (fails it under ``CI=true``)
    when Playwright or Debian's chromium is missing."""
    missing = []
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        missing.append("the playwright package (pip install -e '.[dev]')")
        sync_playwright = None
    if shutil.which(CHROMIUM) is None:
        missing.append(f"Debian's chromium at {CHROMIUM} (apt-get install chromium)")
    if missing:
        reason = "browser tests need " + " and ".join(missing)
        if os.environ.get("CI") == "true":
            pytest.fail(reason + ": .ci/run installs both")
        pytest.skip(reason)
    return sync_playwright
