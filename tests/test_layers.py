"""The layering docs/architecture.md states, checked on the source: which subpackage may
import which (at run time; imports for type checking only are not edges), and that the
lifecycle holds no SQL."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "orkeon_actors"


def _runtime_imports(path: Path) -> set[str]:
    """The ``orkeon_actors.*`` modules ``path`` imports outside ``if TYPE_CHECKING:``."""
    tree = ast.parse(path.read_text())
    typing_only: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            typing_only.update(id(inner) for inner in ast.walk(node))
    found: set[str] = set()
    for node in ast.walk(tree):
        if id(node) in typing_only:
            continue
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("orkeon_actors"):
            found.add(node.module)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names if alias.name.startswith("orkeon_actors"))
    return found


def _imports_of(subpackage: str) -> dict[str, set[str]]:
    return {
        str(path.relative_to(PACKAGE)): _runtime_imports(path) for path in sorted((PACKAGE / subpackage).rglob("*.py"))
    }


@pytest.mark.parametrize(
    ("subpackage", "forbidden"),
    [
        ("lifecycle", ("orkeon_actors.store", "orkeon_actors.runtime")),
        ("crew", ("orkeon_actors.orchestration", "orkeon_actors.store", "orkeon_actors.lifecycle")),
        ("orchestration", ("orkeon_actors.lifecycle", "orkeon_actors.store")),
        ("tools", ("orkeon_actors.crew", "orkeon_actors.store")),
        ("hub", ("orkeon_actors.store", "orkeon_actors.crew", "orkeon_actors.lifecycle")),
    ],
)
def test_a_layer_never_imports_a_layer_above_it_or_an_adapter(subpackage: str, forbidden: tuple[str, ...]) -> None:
    offending = {
        module: sorted(m for m in imports if m.startswith(forbidden))
        for module, imports in _imports_of(subpackage).items()
        if any(m.startswith(forbidden) for m in imports)
    }
    assert offending == {}


def test_the_lifecycle_holds_no_sql() -> None:
    statement = re.compile(r"\b(SELECT|INSERT|UPDATE|DELETE)\b.*\b(FROM|INTO|SET)\b")
    with_sql = [
        str(path.relative_to(PACKAGE))
        for path in (PACKAGE / "lifecycle").rglob("*.py")
        if statement.search(path.read_text())
    ]
    assert with_sql == []


def test_the_durable_hub_is_composed_from_the_core_not_the_memory_adapter() -> None:
    from orkeon_actors.hub.memory import HubCore, InMemoryEventHub
    from orkeon_actors.hub.port import DurableEventHub
    from orkeon_actors.store import SqliteEventHub

    assert issubclass(SqliteEventHub, HubCore) and issubclass(SqliteEventHub, DurableEventHub)
    assert not issubclass(SqliteEventHub, InMemoryEventHub)
    overridden = sorted(
        name
        for name, value in vars(SqliteEventHub).items()
        if name.startswith("_") and not name.startswith("__") and callable(value) and hasattr(HubCore, name)
    )
    assert overridden == []  # no hook of the core is overridden: the collaborators carry the durability


def test_the_distributed_hub_adds_collaborators_and_overrides_no_core_hook() -> None:
    from orkeon_actors.fleet.hub import AmqpEventHub
    from orkeon_actors.hub.memory import HubCore, InMemoryEventHub
    from orkeon_actors.store import SqliteEventHub

    assert issubclass(AmqpEventHub, SqliteEventHub) and not issubclass(AmqpEventHub, InMemoryEventHub)
    overridden = sorted(
        name
        for name, value in vars(AmqpEventHub).items()
        if callable(value) and not name.startswith("__") and (hasattr(HubCore, name) or hasattr(SqliteEventHub, name))
    )
    assert overridden == ["stop"]  # the gateway stops first; everything else is the collaborators'
