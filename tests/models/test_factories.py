"""Model references in crew configuration, through the ``orkeon_actors.models`` entry points."""

from __future__ import annotations

import asyncio
from importlib.metadata import entry_points

import pytest

from orkeon_actors.crew.model import ChatMessage, ModelRequest
from orkeon_actors.errors import ModelConfigError
from orkeon_actors.models import AnthropicModel, OpenAIChatModel
from orkeon_actors.models.factories import ENTRY_POINT_GROUP

from .fake_provider import FakeProvider, Step, openai_script


def _factory(name: str):  # type: ignore[no-untyped-def]
    (entry,) = [e for e in entry_points(group=ENTRY_POINT_GROUP) if e.name == name]
    return entry.load()


def test_both_providers_are_registered_entry_points() -> None:
    assert {"openai", "anthropic"} <= {e.name for e in entry_points(group="orkeon_actors.models")}


def test_an_openai_reference_builds_a_working_model(provider: FakeProvider, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LOCAL_LLM_KEY", "sk-local")
    reference = {
        "provider": "openai",
        "model": "qwen2.5-7b-instruct",
        "base_url": f"{provider.url}/v1",
        "api_key_env": "LOCAL_LLM_KEY",
        "max_tokens": 128,
        "max_tokens_parameter": "max_tokens",
        "timeout": 5,
        "retry": {"max_retries": 0},
        "price": {"input": 0.1, "output": 0.2},
    }
    model = _factory("openai")(reference)
    assert isinstance(model, OpenAIChatModel) and model.retry.max_retries == 0 and model.timeout == 5.0
    provider.handler = openai_script(Step("hello"))
    request = ModelRequest("c", "a", "", "", (ChatMessage("user", "hi"),), (), 0)
    assert asyncio.run(model.complete(request)).text == "hello"
    sent = provider.requests[0]
    assert sent.headers["authorization"] == "Bearer sk-local"
    assert sent.body["max_tokens"] == 128 and sent.body["model"] == "qwen2.5-7b-instruct"


def test_an_anthropic_reference(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant")
    model = _factory("anthropic")({"provider": "anthropic", "model": "claude-sonnet-5-5", "max_tokens": 2048})
    assert isinstance(model, AnthropicModel) and model.max_tokens == 2048


@pytest.mark.parametrize(
    ("reference", "message"),
    [
        ({"provider": "openai"}, "needs 'model'"),
        ({"provider": "openai", "model": "m", "temprature": 1}, r"unknown openai model settings \['temprature'\]"),
        ({"provider": "anthropic", "model": "m"}, "was given a reference to provider 'anthropic'"),
        ({"model": "m", "api_key_env": "NO_SUCH_VARIABLE_SET"}, r"\$NO_SUCH_VARIABLE_SET, which is not set"),
        ({"model": "m", "base_url": "http://127.0.0.1:9/v1", "retry": {"tries": 2}}, "unknown retry settings"),
        ({"model": "m", "base_url": "http://127.0.0.1:9/v1", "price": {"input": 1}}, "needs 'input' and 'output'"),
        ({"model": "m", "base_url": "http://127.0.0.1:9/v1", "strict": True, "retry": [1]}, "'retry' is a mapping"),
    ],
)
def test_bad_references_say_what_is_wrong(reference: dict[str, object], message: str) -> None:
    with pytest.raises(ModelConfigError, match=message):
        _factory("openai")(reference)


def test_check_lists_problems_without_building(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NOT_SET_HERE", raising=False)
    openai = _factory("openai")
    assert openai.check({"model": "m", "api_key_env": "NOT_SET_HERE"}) == []  # set where the crew runs
    [problem] = openai.check({"model": "m", "retry": {"max_retries": -1}})
    assert "max_retries must be an int >= 0" in problem
    assert _factory("anthropic").check({"model": "m", "prices": {"other": {"input": 1, "output": 1}}})


def test_create_takes_the_options_and_a_context(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant")
    model = _factory("anthropic").create({"model": "claude-sonnet-5-5"}, object())
    assert isinstance(model, AnthropicModel)


def test_an_anthropic_only_reference_refuses_openai_settings() -> None:
    with pytest.raises(ModelConfigError, match="strict"):
        _factory("anthropic")({"model": "m", "strict": True})
