"""The package metadata a user (and PyPI) reads: an SPDX license matching the LICENSE
file, classifiers, keywords and project URLs; the plugins declare the same license."""

from __future__ import annotations

import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _project(path: Path) -> dict[str, object]:
    data = tomllib.loads(path.read_text())
    project = data["project"]
    assert isinstance(project, dict)
    return project


def test_the_license_is_an_spdx_string_matching_the_license_file() -> None:
    project = _project(ROOT / "pyproject.toml")
    assert project["license"] == "Apache-2.0"  # a string (PEP 639), not the deprecated table
    assert project["license-files"] == ["LICENSE"]
    text = (ROOT / "LICENSE").read_text()
    assert text.split()[:4] == ["Apache", "License", "Version", "2.0,"]
    assert "END OF TERMS AND CONDITIONS" in text


def test_the_project_has_classifiers_keywords_and_urls() -> None:
    project = _project(ROOT / "pyproject.toml")
    classifiers = project["classifiers"]
    assert isinstance(classifiers, list)
    assert "Programming Language :: Python :: 3.11" in classifiers and "Typing :: Typed" in classifiers
    assert not any(c.startswith("License ::") for c in classifiers), "PEP 639: the license expression says it"
    assert project["keywords"]
    urls = project["urls"]
    assert isinstance(urls, dict) and {"Homepage", "Repository", "Documentation", "Issues"} <= set(urls)
    assert all(str(u).startswith("https://") for u in urls.values())


def test_setuptools_is_new_enough_for_an_spdx_license_everywhere() -> None:
    for path in [ROOT / "pyproject.toml", *sorted((ROOT / "plugins").glob("*/pyproject.toml"))]:
        data = tomllib.loads(path.read_text())
        assert data["build-system"]["requires"] == ["setuptools>=77"], path
        assert data["project"]["license"] == "Apache-2.0", path
