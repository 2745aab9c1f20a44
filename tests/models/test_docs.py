"""docs/models.md: its Python snippet runs and its YAML reference builds a model."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from ruamel.yaml import YAML

from orkeon_actors.models import OpenAIChatModel, openai_model

DOC = Path(__file__).resolve().parents[2] / "docs" / "models.md"


def _blocks(language: str) -> list[str]:
    return re.findall(rf"^```{language}\n(.*?)^```$", DOC.read_text(encoding="utf-8"), re.S | re.M)


def test_the_python_snippet_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-doc")
    namespace: dict[str, object] = {}
    exec(compile(_blocks("python")[0], str(DOC), "exec"), namespace)  # building adapters makes no request
    assert namespace["agent"].model is namespace["claude"]  # type: ignore[attr-defined]


def test_the_yaml_reference_builds_an_openai_model(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-doc")
    reference = YAML(typ="safe").load(_blocks("yaml")[0])["model"]
    model = openai_model(reference)
    assert isinstance(model, OpenAIChatModel) and model.retry.max_retry_after == 120
    assert model.price is not None and model.price.output == 0.60
