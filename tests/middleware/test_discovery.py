"""Plugin discovery through the entry point group ``orkeon_actors.middleware``.

Each test installs a small plugin distribution into a temporary ``site`` directory (a
``.dist-info`` with ``METADATA`` and ``entry_points.txt``, and its module) and puts it on
``sys.path``: ``importlib.metadata`` finds it exactly as it finds a pip-installed package.
The real plugins in ``plugins/`` are tested, installed, by their own test suites.
"""

from __future__ import annotations

import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

import orkeon_actors as ok
from orkeon_actors.errors import InvalidArgumentError
from orkeon_actors.middleware import ENTRY_POINT_GROUP, discover, load
from tests.middleware.conftest import StartRuntime

STAGE_MODULE = """
from orkeon_actors.middleware import current_operation

JOURNAL = []


class TagStage:
    def __init__(self, tag="plugin"):
        self.tag = tag

    def on_publish(self, message, next):
        JOURNAL.append((self.tag, "publish", current_operation()))
        return next(message.with_metadata({"tagged-by": self.tag}))

    def on_receive(self, message, next):
        JOURNAL.append((self.tag, "receive", current_operation()))
        return next(message)


NOT_CALLABLE = 42


def not_a_stage():
    return object()
"""


class Site:
    """A directory on ``sys.path`` where tests install fake distributions."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def install(self, dist: str, entry_points: dict[str, str], module: str | None = None, source: str = "") -> None:
        info = self.root / f"{dist.replace('-', '_')}-1.0.dist-info"
        info.mkdir()
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: 1.0\n")
        lines = "\n".join(f"{name} = {value}" for name, value in entry_points.items())
        (info / "entry_points.txt").write_text(f"[{ENTRY_POINT_GROUP}]\n{lines}\n")
        if module is not None:
            (self.root / f"{module}.py").write_text(textwrap.dedent(source))


@pytest.fixture
def site(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Site]:
    monkeypatch.syspath_prepend(str(tmp_path))
    yield Site(tmp_path)
    for name in [m for m in sys.modules if m.startswith("fake_orkeon_")]:
        del sys.modules[name]


def test_discover_lists_installed_plugins_without_importing_them(site: Site) -> None:
    site.install("fake-orkeon-tag", {"fake_tag": "fake_orkeon_tag:TagStage"}, "fake_orkeon_tag", STAGE_MODULE)
    plugin = discover()["fake_tag"]
    assert (plugin.name, plugin.value, plugin.distribution, plugin.version) == (
        "fake_tag",
        "fake_orkeon_tag:TagStage",
        "fake-orkeon-tag",
        "1.0",
    )
    assert "fake_orkeon_tag" not in sys.modules


def test_load_instantiates_a_plugin_with_its_configuration(site: Site) -> None:
    site.install("fake-orkeon-tag", {"fake_tag": "fake_orkeon_tag:TagStage"}, "fake_orkeon_tag", STAGE_MODULE)
    stage = load("fake_tag", tag="configured")
    assert type(stage).__name__ == "TagStage" and stage.tag == "configured"  # type: ignore[attr-defined]


def test_a_name_in_the_middleware_list_is_an_installed_plugin_in_its_position(
    site: Site, start_runtime: StartRuntime
) -> None:
    site.install("fake-orkeon-tag", {"fake_tag": "fake_orkeon_tag:TagStage"}, "fake_orkeon_tag", STAGE_MODULE)
    configured = load("fake_tag", tag="second")
    rt = start_runtime(["fake_tag", configured])
    registration = rt.hub.register_mailbox("agent://crew-b/inbox")
    sent = rt.hub.bind("crew-a", "writer").post("agent://crew-b/inbox", 1)
    with registration.reader() as reader:
        reader.receive()
    assert sent.metadata["tagged-by"] == "second"
    journal = sys.modules["fake_orkeon_tag"].JOURNAL
    assert journal == [
        ("plugin", "publish", "post"),
        ("second", "publish", "post"),
        ("second", "receive", "receive"),
        ("plugin", "receive", "receive"),
    ]


def test_an_unknown_name_lists_what_is_installed(site: Site) -> None:
    site.install("fake-orkeon-tag", {"fake_tag": "fake_orkeon_tag:TagStage"}, "fake_orkeon_tag", STAGE_MODULE)
    with pytest.raises(InvalidArgumentError, match=r"no middleware plugin named 'nope'.*fake_tag"):
        load("nope")
    with pytest.raises(InvalidArgumentError):
        ok.Runtime.start(middleware=["nope"])


def test_two_distributions_claiming_one_name_is_an_error(site: Site) -> None:
    site.install("fake-orkeon-one", {"fake_clash": "fake_orkeon_one:TagStage"})
    site.install("fake-orkeon-two", {"fake_clash": "fake_orkeon_two:TagStage"})
    with pytest.raises(InvalidArgumentError, match=r"fake-orkeon-(one|two).*fake-orkeon-(one|two)"):
        discover()


def test_broken_plugins_fail_with_a_clear_error(site: Site) -> None:
    site.install(
        "fake-orkeon-broken",
        {
            "fake_missing": "fake_orkeon_missing_module:Stage",
            "fake_not_callable": "fake_orkeon_broken:NOT_CALLABLE",
            "fake_not_a_stage": "fake_orkeon_broken:not_a_stage",
        },
        "fake_orkeon_broken",
        STAGE_MODULE,
    )
    with pytest.raises(InvalidArgumentError, match="failed to import: ModuleNotFoundError"):
        load("fake_missing")
    with pytest.raises(InvalidArgumentError, match="not callable"):
        load("fake_not_callable")
    with pytest.raises(TypeError, match="no on_publish"):
        load("fake_not_a_stage")
    with pytest.raises(TypeError):
        load("fake_not_a_stage", unexpected="config")
