"""The simulation HTML in a real browser: Debian's chromium driven by Playwright
(``executable_path``, no browser download; see ``tests/browser.py``). Each test saves a
screenshot under its temporary directory."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from orkeon_actors.sim import Simulation
from orkeon_actors.sim.examples import EXAMPLES
from orkeon_actors.sim.html import to_html
from orkeon_actors.sim.spans import spans
from tests.browser import ARGS, CHROMIUM, sync_playwright_or_skip


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    sync_playwright = sync_playwright_or_skip()
    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=CHROMIUM, args=ARGS, headless=True)
        try:
            yield chromium
        finally:
            chromium.close()


def test_the_simulation_html_renders_every_lane_of_a_six_mode_run(browser: Any, tmp_path: Path) -> None:
    with Simulation(seed=4) as sim:
        for build in EXAMPLES.values():
            build(sim)
        assert sim.run().all_completed
        events = sim.trace.events()
    lanes = spans(events).lanes
    page_file = tmp_path / "run.html"
    page_file.write_text(to_html(events, title="six modes, seed 4"), encoding="utf-8")

    page = browser.new_page(viewport={"width": 1600, "height": 1000})
    problems: list[str] = []
    page.on("console", lambda message: problems.append(message.text) if message.type == "error" else None)
    page.on("pageerror", lambda error: problems.append(str(error)))
    page.on("request", lambda request: None if request.url.startswith("file://") else problems.append(request.url))
    page.goto(page_file.as_uri())
    page.wait_for_selector("#gantt")

    headers = page.locator("#sequence .lane-header")
    assert headers.count() == len(lanes)
    drawn = {}
    for i in range(headers.count()):
        header = headers.nth(i)
        box = header.bounding_box()
        assert box is not None and box["width"] > 0 and box["height"] > 0
        drawn[header.get_attribute("data-lane")] = header.text_content()
    assert set(drawn) == set(lanes)
    assert sum(1 for lane in lanes if "/" not in lane) == 6
    assert page.locator("#sequence line.msg").count() > 0  # messages as arrows
    assert page.locator("#sequence rect.wait").count() > 0  # waits as bars
    assert page.locator("#gantt .gantt-lane").count() == sum(1 for lane in lanes if "/" in lane)
    assert page.locator("#gantt rect.turn").count() > 0
    page.screenshot(path=str(tmp_path / "simulation.png"), full_page=True)
    assert (tmp_path / "simulation.png").stat().st_size > 10_000
    assert problems == []  # no console error, no request leaving the file
    page.close()
