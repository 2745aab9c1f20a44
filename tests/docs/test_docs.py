"""The docs a new user follows literally: every Python snippet runs as written (the
blocks of a page in order, in a fresh interpreter and an empty directory), and no page
refers to internal issue numbers, to the spec's file path, or to a missing file. README.md
is also read outside the repository (on the package index): its links are absolute, on
the project's canonical URL, and each names a file of the repository."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tomllib
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
    # As in an activated virtualenv: its scripts (`orkeon`) are on PATH.
    env = {**os.environ, "PATH": os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])}
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=120, env=env
    )
    assert done.returncode == 0, f"{where} failed:\n{done.stderr[-3000:]}"
    assert "Traceback" not in done.stderr, f"{where}:\n{done.stderr[-3000:]}"


NOT_PYTHON = {"bash", "json", "toml", "yaml", "mermaid", "text", ""}
"""The fences whose blocks are not Python (and so not run); a bare fence is text."""
OPENING = re.compile(r"^```(.*)$", re.M)


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_every_code_block_is_either_run_or_not_python(page: Path) -> None:
    """No escape hatch: Python is fenced ``python`` (and so run by the test above); a
    fence such as ``python-sketch``, ``py`` or ``pycon`` would be skipped silently."""
    text = page.read_text()
    fences = [match.group(1).strip() for match in OPENING.finditer(text)][::2]  # openings, not closings
    assert len(OPENING.findall(text)) % 2 == 0, f"{page.name} has an unclosed code block"
    for info in fences:
        language = info.split()[0] if info else ""  # ```json call: the language, then a label
        assert info == "python" or language in NOT_PYTHON, (
            f"{page.name} has a code block fenced {info!r}, which no test runs: make it runnable as written "
            f"and fence it `python`, or use one of {sorted(NOT_PYTHON - {''})} for what is not Python"
        )
    for block in re.findall(r"^```\n(.*?)^```", text, flags=re.S | re.M):
        assert not re.match(r"(import |from \w+ import )", block), (
            f"{page.name}: Python in a bare fence: fence it `python`"
        )


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


def _canonical_url() -> str:
    urls = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["urls"]
    return str(urls["Repository"]).rstrip("/")


def test_readme_links_work_outside_the_repository() -> None:
    """Every link of README.md is absolute (a relative one breaks on the package index);
    one into the repository (``{Repository}/blob|tree/main/PATH``) names a path that exists."""
    base = _canonical_url()
    links = re.findall(r"\]\(([^)\s]+)\)", (ROOT / "README.md").read_text())
    assert links, "README.md has no links: the pattern is wrong"
    relative = [t for t in links if not re.match(r"[a-z]+:", t)]
    assert not relative, f"README.md has relative links (broken outside the repository): {relative}"
    inside = [t for t in links if t.startswith(base + "/")]
    assert len(inside) > 10, f"README.md links its docs on {base}"
    for target in inside:
        found = re.fullmatch(re.escape(base) + r"/(?:blob|tree)/main/([^#?]+)(?:#.*)?", target)
        assert found is not None, f"README.md: {target} is not {base}/blob/main/PATH"
        assert (ROOT / found.group(1)).exists(), f"README.md links to {target}, but {found.group(1)} does not exist"
