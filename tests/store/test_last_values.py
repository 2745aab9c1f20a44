"""Retained last values survive restarts."""

from __future__ import annotations

from pathlib import Path

import apsw

import orkeon_actors as ok
from tests.store.conftest import Opener


def _retain(key: str, scope: str | None = None) -> ok.PublishOptions:
    return ok.PublishOptions(target_crew_id=scope, retain_as_last_value=True, last_value_key=key)


def test_retained_values_survive_a_restart(open_store: Opener) -> None:
    rt = open_store()
    client = rt.hub.bind("pricing", "quoter")
    client.publish("prices.eur", {"v": 1}, _retain("eur"))
    latest = client.publish("prices.eur", {"v": 2}, _retain("eur"))
    scoped = client.publish("prices.usd", {"v": 3}, _retain("usd", scope="billing"))
    null = client.publish("prices.none", None, _retain("none"))
    client.publish("prices.gbp", {"v": 4})  # not retained
    rt.stop()

    rt = open_store()
    reader = rt.hub.bind("billing", "reader")
    kept = reader.get_last_value("eur")
    assert kept is not None and kept.id == latest.id and kept.json() == {"v": 2}
    assert kept.source_crew_id == "pricing" and kept.source_agent_id == "quoter"
    assert kept.published_at == latest.published_at
    kept_scoped = reader.get_last_value("usd", crew_scope="billing")
    assert kept_scoped == scoped
    assert reader.get_last_value("usd") is None, "the scoped slot is not the global one"
    kept_null = reader.get_last_value("none")
    assert kept_null is not None and kept_null.id == null.id and kept_null.json() is None
    assert reader.get_last_value("gbp") is None


def test_a_retained_value_is_written_before_publish_returns(open_store: Opener, store_path: Path) -> None:
    rt = open_store()
    message = rt.hub.bind("pricing", "quoter").publish("prices.eur", 1, _retain("eur"))
    outsider = apsw.Connection(str(store_path), flags=apsw.SQLITE_OPEN_READONLY)
    try:
        rows = list(outsider.execute("SELECT scope, key, message_id FROM last_values"))
    finally:
        outsider.close()
    assert rows == [("", "eur", message.id)]
