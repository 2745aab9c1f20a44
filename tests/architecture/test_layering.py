"""The package's layers: each subpackage imports only the layers below it.

Two checks of the same rule. Statically, every ``import`` of the package (module level,
inside functions, under ``TYPE_CHECKING``) names its own subpackage or a lower layer: no
subpackage depends on one above it, so there is no import cycle between subpackages.
Dynamically, importing a subpackage in a fresh interpreter loads no subpackage above it
(what a user who imports only ``orkeon_actors.hub`` pays for).
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest

import orkeon_actors

PACKAGE = Path(orkeon_actors.__file__).parent

LAYERS: list[set[str]] = [
    {"errors", "testing"},
    {"model"},
    {"wire"},
    {"actors"},
    {"hub"},
    {"tools", "acl", "fleet"},
    {"middleware"},
    {"store", "history"},
    {"runtime"},
    {"crew"},
    {"orchestration", "models"},
    {"lifecycle"},
    {"sim", "studio"},
    {"bench"},
    {"cli"},
]
"""Lowest first. A unit (a subpackage, or a top-level module such as ``runtime``) may
import units of strictly lower layers only."""

LAYER_OF = {unit: level for level, units in enumerate(LAYERS) for unit in units}

DEFERRED_UPWARD: dict[tuple[str, str], str] = {
    ("runtime", "studio"): "Runtime.start(studio=PORT) starts the Studio, imported on first use",
    ("runtime", "lifecycle"): "Runtime.supervisors is typed with CrewSupervisor (TYPE_CHECKING only)",
}
"""The only imports allowed to go up a layer, each deferred (inside a function or under
``TYPE_CHECKING``, so importing the lower unit never loads the upper one), with why."""


def _unit_of(module: str) -> str | None:
    parts = module.split(".")
    if parts[0] != "orkeon_actors" or len(parts) < 2:
        return None
    return parts[1]


def _units() -> list[str]:
    units = [p.name for p in PACKAGE.iterdir() if p.is_dir() and (p / "__init__.py").exists()]
    units += [p.stem for p in PACKAGE.glob("*.py") if p.stem not in ("__init__", "__main__")]
    return sorted(units)


def _imports(path: Path) -> list[tuple[int, str, bool]]:
    """``(line, module, deferred)`` of every import in ``path``; ``deferred``: inside a
    function or under ``if TYPE_CHECKING``."""
    tree = ast.parse(path.read_text(), str(path))
    deferred_nodes: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) or (
            isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)
        ):
            deferred_nodes.update(id(inner) for inner in ast.walk(node) if inner is not node)
    found: list[tuple[int, str, bool]] = []
    for node in ast.walk(tree):
        deferred = id(node) in deferred_nodes
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if node.module == "orkeon_actors":
                found += [(node.lineno, f"orkeon_actors.{alias.name}", deferred) for alias in node.names]
            else:
                found.append((node.lineno, node.module, deferred))
        elif isinstance(node, ast.Import):
            found += [(node.lineno, alias.name, deferred) for alias in node.names]
    return found


def test_every_unit_has_a_layer() -> None:
    missing = [unit for unit in _units() if unit not in LAYER_OF]
    assert not missing, f"place {missing} in LAYERS"


def test_no_unit_imports_a_layer_above_it() -> None:
    violations = []
    for path in sorted(PACKAGE.rglob("*.py")):
        relative = path.relative_to(PACKAGE)
        if relative == Path("__init__.py"):
            continue  # the facade re-exports every layer
        source = relative.parts[0] if len(relative.parts) > 1 else relative.stem
        if source == "__main__":
            continue
        for line, module, deferred in _imports(path):
            target = _unit_of(module)
            if target is None or target == source:
                continue
            if deferred and (source, target) in DEFERRED_UPWARD:
                continue
            if LAYER_OF[target] >= LAYER_OF[source]:
                violations.append(f"{relative}:{line} imports {module} ({source} may not depend on {target})")
    assert not violations, "\n".join(violations)


_PROBE = """
import importlib, json, sys
def loaded():
    return sorted({m.split('.')[1] for m in sys.modules if m.startswith('orkeon_actors.')})
import orkeon_actors
facade = loaded()
importlib.import_module(sys.argv[1])
print(json.dumps({"facade": facade, "loaded": loaded()}))
"""


@pytest.mark.parametrize("unit", _units())
def test_importing_a_unit_in_a_fresh_interpreter_loads_only_lower_layers(unit: str) -> None:
    result = subprocess.run(
        [sys.executable, "-c", _PROBE, f"orkeon_actors.{unit}"], capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert set(report["facade"]) <= {"errors", "model"}, "import orkeon_actors must load only the model"
    loaded = set(report["loaded"]) - set(report["facade"]) - {unit}
    above = sorted(u for u in loaded if LAYER_OF[u] >= LAYER_OF[unit])
    assert not above, f"importing orkeon_actors.{unit} loaded {above}, which are not below it"


def test_the_facade_names_every_user_type_and_no_adapter() -> None:
    import orkeon_actors as ok
    from orkeon_actors import crew, lifecycle, orchestration, sim

    assert ok.CrewActor is crew.CrewActor
    assert ok.Agent is crew.Agent
    assert ok.ScriptedModel is crew.ScriptedModel is sim.ScriptedModel
    assert ok.CrewSupervisor is lifecycle.CrewSupervisor
    assert ok.Simulation is sim.Simulation
    for mode in ("Sequential", "Parallel", "Hierarchical", "Consensual", "Graph", "Autonomous"):
        assert getattr(ok, mode) is getattr(orchestration, mode)
        assert mode in ok.__all__
    adapters = {"InMemoryEventHub", "SqliteEventHub", "SqliteCrewStateStore", "DurableWaitScheduler"}
    for facade in (ok, crew, lifecycle, sim, orchestration):
        assert not adapters & set(facade.__all__), f"{facade.__name__} exports an adapter"
    for name in ok.__all__:
        assert getattr(ok, name) is not None
