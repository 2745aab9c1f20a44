"""The hub's message constructor builds the very Message that ``Message(...)`` builds."""

from __future__ import annotations

import pickle
from datetime import UTC, datetime

import attrs
import pytest
from hypothesis import given
from hypothesis import strategies as st

import orkeon_actors as ok
from orkeon_actors.model.message import FrozenMap, Message, stamped_message

_names = st.from_regex(r"[a-z][a-z0-9]{0,8}", fullmatch=True)
_fields = st.tuples(
    st.builds(lambda: ok.MessageId.new()),
    _names,
    _names.map(ok.CrewId),
    st.datetimes(timezones=st.just(UTC)),
    st.binary(max_size=16),
    st.dictionaries(_names, _names, max_size=3).map(FrozenMap),
    st.none() | _names.map(ok.AgentId),
    st.none() | _names.map(ok.CrewId),
    st.none() | st.builds(ok.MailboxAddress.agent, _names, _names),
    st.none() | st.builds(lambda: ok.CorrelationId.new()),
    _names,
)


@given(_fields)
def test_a_stamped_message_is_the_message_its_fields_make(fields: tuple[object, ...]) -> None:
    built = Message(*fields)  # type: ignore[arg-type]
    stamped = stamped_message(*fields)  # type: ignore[arg-type]
    assert type(stamped) is Message
    assert stamped == built and hash(stamped) == hash(built) and repr(stamped) == repr(built)
    assert attrs.astuple(stamped, recurse=False) == attrs.astuple(built, recurse=False)
    assert pickle.loads(pickle.dumps(stamped)) == built
    assert attrs.evolve(stamped, topic="other") == attrs.evolve(built, topic="other")


def test_a_stamped_message_is_frozen() -> None:
    stamped = stamped_message(
        ok.MessageId.new(), "t", ok.CrewId("c"), datetime.now(UTC), b"", FrozenMap(), None, None, None, None, "_none"
    )
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        stamped.topic = "x"  # type: ignore[misc]
