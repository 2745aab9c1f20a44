from __future__ import annotations

import json
from datetime import UTC, timedelta

import pytest

import orkeon_actors as ok
from orkeon_actors.errors import EventHubError, InvalidArgumentError


@pytest.mark.parametrize("bad", [0, -1, 0.0, -0.5, float("nan"), float("inf"), timedelta(0), timedelta(seconds=-1)])
def test_finite_timeout_rejects_non_positive_durations(bad: object) -> None:
    with pytest.raises(InvalidArgumentError, match="positive"):
        ok.FiniteWaitTimeout.of(bad)  # type: ignore[arg-type]


def test_finite_timeout_accepts_seconds_and_timedelta() -> None:
    assert ok.FiniteWaitTimeout.of(1.5).seconds == 1.5
    assert ok.FiniteWaitTimeout.of(timedelta(milliseconds=250)).duration == timedelta(milliseconds=250)


def test_invalid_arguments_are_value_errors_and_hub_errors() -> None:
    with pytest.raises(ValueError):
        ok.FiniteWaitTimeout.of(0)
    with pytest.raises(EventHubError):
        ok.FiniteWaitTimeout.of(0)
    with pytest.raises(InvalidArgumentError):
        ok.FiniteWaitTimeout.of("5")  # type: ignore[arg-type]


def test_forever_is_a_singleton_value() -> None:
    assert ok.FOREVER == ok.ForeverWaitTimeout()
    assert repr(ok.FOREVER) == "FOREVER"


def test_retain_requires_a_key() -> None:
    with pytest.raises(InvalidArgumentError, match="last_value_key"):
        ok.PublishOptions(retain_as_last_value=True)
    assert ok.PublishOptions(retain_as_last_value=True, last_value_key="k").last_value_key == "k"


def test_publish_options_coerce_crew_ids_and_freeze_metadata() -> None:
    options = ok.PublishOptions(target_crew_id="billing", metadata={"a": "1"})
    assert isinstance(options.target_crew_id, ok.CrewId)
    assert options.metadata == {"a": "1"}
    with pytest.raises(InvalidArgumentError, match="strings"):
        ok.PublishOptions(metadata={"a": 1})  # type: ignore[dict-item]


def test_wait_descriptors_validate_their_arguments() -> None:
    assert ok.WaitOnTopic("orders.*").topic == "orders.*"
    assert ok.WaitOnTopic("orders.#", metadata_match={"k": "v"}).metadata_match == {"k": "v"}
    with pytest.raises(InvalidArgumentError, match="pattern"):
        ok.WaitOnTopic("orders.*x")
    with pytest.raises(InvalidArgumentError):
        ok.WaitOnTopic("")
    assert ok.WaitOnMailbox("agent://c/a").address == ok.MailboxAddress.parse("agent://c/a")
    with pytest.raises(ok.errors.InvalidMailboxAddressError):
        ok.WaitOnMailbox("nope")
    with pytest.raises(ok.errors.InvalidIdError):
        ok.WaitOnReply("nope")


def test_message_json_and_immutability() -> None:
    from datetime import datetime

    message = ok.Message(ok.MessageId.new(), "t", ok.CrewId("c"), datetime.now(UTC), json.dumps({"a": [1]}).encode())
    assert message.json() == {"a": [1]}
    assert message.schema_id == ok.NO_DECLARED_SCHEMA_ID == "_none"
    assert message.metadata == {}
    with pytest.raises(AttributeError):
        message.topic = "x"  # type: ignore[misc]
    with pytest.raises(TypeError):
        message.metadata["x"] = "y"  # type: ignore[index]
    assert message.with_metadata({"k": "v"}).metadata == {"k": "v"}
    assert hash(message) == hash(message)
