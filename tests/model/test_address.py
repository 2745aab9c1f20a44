from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

import orkeon_actors as ok
from orkeon_actors.errors import InvalidMailboxAddressError
from orkeon_actors.model.address import Scheme


@pytest.mark.parametrize(
    ("text", "scheme", "crew", "agent", "name"),
    [
        ("agent://c1/a1", Scheme.AGENT, "c1", "a1", None),
        ("crew://billing-1", Scheme.CREW, "billing-1", None, None),
        ("topic://orders.created", Scheme.TOPIC, None, None, "orders.created"),
        ("client://studio", Scheme.CLIENT, None, None, "studio"),
    ],
)
def test_the_four_schemes_parse(
    text: str, scheme: Scheme, crew: str | None, agent: str | None, name: str | None
) -> None:
    address = ok.MailboxAddress.parse(text)
    assert (address.scheme, address.crew_id, address.agent_id, address.name) == (scheme, crew, agent, name)
    assert str(address) == text
    assert address.target_crew_id == crew


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("", "empty"),
        ("c1/a1", "no scheme"),
        ("http://x", "unknown scheme"),
        ("agent://c1", "missing path segment"),
        ("agent://c1/", "missing path segment"),
        ("agent://c1/a1/x", "extra path segment"),
        ("crew://c1/a1", "extra path segment"),
        ("topic://orders created", "invalid topic"),
        ("topic://orders.*", "invalid topic"),
        ("topic://orders..x", "invalid topic"),
        ("agent://_system/a1", "invalid crew id"),
        ("client://", "missing path segment"),
        ("client://a b", "invalid client name"),
    ],
)
def test_bad_addresses_say_what_is_wrong(text: str, reason: str) -> None:
    with pytest.raises(InvalidMailboxAddressError, match=reason):
        ok.MailboxAddress.parse(text)


def test_non_string_address_is_refused() -> None:
    with pytest.raises(InvalidMailboxAddressError):
        ok.MailboxAddress.parse(42)  # type: ignore[arg-type]


def test_parse_returns_addresses_unchanged_and_constructors_agree() -> None:
    address = ok.MailboxAddress.agent("c1", "a1")
    assert ok.MailboxAddress.parse(address) is address
    assert address == ok.MailboxAddress.parse("agent://c1/a1")
    assert ok.MailboxAddress.crew("c1") == ok.MailboxAddress.parse("crew://c1")
    assert ok.MailboxAddress.topic("t.x") == ok.MailboxAddress.parse("topic://t.x")
    assert ok.MailboxAddress.client("ui") == ok.MailboxAddress.parse("client://ui")
    assert hash(address) == hash(ok.MailboxAddress.parse("agent://c1/a1"))


_name = st.from_regex(r"[A-Za-z0-9][A-Za-z0-9._-]{0,20}", fullmatch=True)
_topic = st.lists(st.from_regex(r"[A-Za-z0-9_-]{1,8}", fullmatch=True), min_size=1, max_size=4).map(".".join)


@given(
    st.one_of(
        st.tuples(_name, _name).map(lambda t: f"agent://{t[0]}/{t[1]}"),
        _name.map(lambda n: f"crew://{n}"),
        _topic.map(lambda t: f"topic://{t}"),
        _name.map(lambda n: f"client://{n}"),
    )
)
def test_parse_and_str_round_trip(text: str) -> None:
    assert str(ok.MailboxAddress.parse(text)) == text
