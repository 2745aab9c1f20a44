"""The docs a new user follows literally: every Python snippet runs as written (the
blocks of a page in order, in a fresh interpreter and an empty directory), and no page
refers to internal issue numbers, to the spec's file path, or to a missing file."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
FENCE = re.compile(r"^```python\n(.*?)^```", re.S | re.M)


def _programs() -> list[tuple[str, str]]:
    """Each page's ``python`` blocks, in order, as one program (a page tells one story:
    later blocks use what earlier ones defined)."""
    found = []
    for page in PAGES:
        blocks = [match.group(1) for match in FENCE.finditer(page.read_text())]
        if blocks:
            found.append((str(page.relative_to(ROOT)), "\n".join(blocks)))
    return found


@pytest.mark.parametrize(("where", "code"), _programs(), ids=[w for w, _ in _programs()])
def test_every_python_snippet_runs_as_written(where: str, code: str, tmp_path: Path) -> None:
    if "scratch_vhost" in code:  # a page about the fleet runs on the real broker
        from tests.amqp.broker import require_broker

        require_broker()
    done = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, f"{where} failed:\n{done.stderr[-3000:]}"
    assert "Traceback" not in done.stderr, f"{where}:\n{done.stderr[-3000:]}"


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_no_internal_issue_numbers_or_spec_paths(page: Path) -> None:
    text = page.read_text()
    outside_code = re.sub(r"```.*?```", "", text, flags=re.S)
    assert not re.findall(r"(?<![\w/&])#\d+\b", outside_code), f"{page.name} cites internal issue numbers"
    assert not re.findall(r"\bissues? #?\d+", outside_code, flags=re.I), page.name
    assert "spec/" not in text, f"{page.name}: cite the specification by title and section, not its path"


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_every_relative_link_points_to_a_file_that_exists(page: Path) -> None:
    for target in re.findall(r"\]\(([^)\s]+)\)", page.read_text()):
        if re.match(r"[a-z]+:", target) or target.startswith("#"):
            continue
        path = (page.parent / target.split("#")[0]).resolve()
        assert path.exists(), f"{page.name} links to missing {target}"
