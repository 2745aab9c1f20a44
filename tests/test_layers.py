"""The layering docs/architecture.md states, checked on the source: the layer order (each
unit imports only units below it, so no two subpackages import each other), the same by
importing each unit alone in a fresh interpreter, the facade, which subpackage may
import which, and that the lifecycle holds no SQL."""

from __future__ import annotations

import ast
import graphlib
import json
import re
import subprocess
import sys
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
        ("model", ("orkeon_actors.wire",)),
        (
            "wire",  # the formats sit on the model: no layer above it, no adapter
            tuple(
                f"orkeon_actors.{name}"
                for name in ("actors", "hub", "middleware", "acl", "tools", "store", "crew", "lifecycle", "runtime")
            ),
        ),
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


def test_the_lifecycle_modules_import_one_another_without_a_cycle() -> None:
    """The supervisor's transition modules import each other one way and the actor only
    for typing (lifecycle/supervisor_actor.py), so each imports alone, whatever the order."""
    graph = {
        path.stem: {
            module.rsplit(".", 1)[1]
            for module in _runtime_imports(path)
            if module.startswith("orkeon_actors.lifecycle.")
        }
        for path in (PACKAGE / "lifecycle").glob("*.py")
    }
    assert {"sleep_transitions", "wake_transitions", "expiry_wakes", "finish_transitions"} <= graph["supervisor_actor"]
    graphlib.TopologicalSorter(graph).prepare()  # CycleError names the modules of a cycle


def _crew_modules_imported(path: Path) -> set[str]:
    """The ``orkeon_actors.crew`` modules ``path`` imports at run time, including those
    named by ``from orkeon_actors.crew import module``."""
    modules = {m.rsplit(".", 1)[1] for m in _runtime_imports(path) if m.startswith("orkeon_actors.crew.")}
    if "orkeon_actors.crew" in _runtime_imports(path):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module == "orkeon_actors.crew":
                modules.update(alias.name for alias in node.names if (PACKAGE / "crew" / f"{alias.name}.py").exists())
    return modules


def test_the_crew_modules_import_one_another_without_a_cycle() -> None:
    """The crew actor's turn modules import each other one way and the actor only for
    typing (crew/crew_actor.py), so each imports alone, whatever the order."""
    graph = {path.stem: _crew_modules_imported(path) for path in (PACKAGE / "crew").glob("*.py")}
    assert {"mail_routing", "parked_waits", "finishing", "sleep_wake"} <= graph["crew_actor"]
    assert not any("crew_actor" in graph[name] for name in ("mail_routing", "parked_waits", "finishing", "sleep_wake"))
    graphlib.TopologicalSorter(graph).prepare()  # CycleError names the modules of a cycle


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


# -- the layer order ----------------------------------------------------------------------

LAYERS: list[set[str]] = [
    {"errors", "testing", "logs", "lazy", "timed_threads", "loopback"},
    {"guarded_yaml", "http_guard"},
    {"model"},
    {"history"},
    {"wire"},
    {"actors"},
    {"hub"},
    {"tools", "acl"},
    {"middleware"},
    {"crew"},
    {"orchestration", "models", "mcp", "a2a"},
    {"lifecycle"},
    {"store"},
    {"runtime"},
    {"fleet"},
    {"config"},
    {"sim", "studio", "aio", "a2a"},
    {"bench"},
    {"cli"},
]
"""The package's units (a subpackage, or a top-level module such as ``runtime``), lowest
first, as docs/architecture.md and README's Layout draw them. A unit may import units of
strictly lower layers only, so there is no import cycle between subpackages."""

LAYER_OF = {unit: level for level, units in enumerate(LAYERS) for unit in units}

DEFERRED_UPWARD: dict[tuple[str, str], str] = {
    ("runtime", "studio"): "Runtime.start(studio=PORT) starts the Studio, imported on first use",
    ("runtime", "fleet"): "Runtime.start(broker=...) makes the host's hub a fleet's, imported on first use",
    ("runtime", "a2a"): "Runtime.start(a2a=PORT) serves crews over A2A (the a2a extra): imported on first use",
    ("tools", "mcp"): "ok.tools.mcp_tools (an external MCP server's tools) needs the mcp extra: imported on first use",
}
"""The only imports allowed to go up a layer, each deferred (inside a function or under
``TYPE_CHECKING``, so importing the lower unit never loads the upper one), with why."""


def _units() -> list[str]:
    units = [p.name for p in PACKAGE.iterdir() if p.is_dir() and (p / "__init__.py").exists()]
    units += [p.stem for p in PACKAGE.glob("*.py") if p.stem not in ("__init__", "__main__")]
    return sorted(units)


def _target_unit(module: str) -> str | None:
    """The unit ``module`` (or a name of the facade, ``orkeon_actors.Runtime``) belongs to."""
    import orkeon_actors

    parts = module.split(".")
    if parts[0] != "orkeon_actors" or len(parts) < 2:
        return None
    name = parts[1]
    if name in LAYER_OF or name == "__version__":
        return name if name in LAYER_OF else None
    defined_in = orkeon_actors._FACADE.get(name)  # the facade is lazy: where the name lives
    return defined_in.split(".")[1] if defined_in is not None else "model"


def _all_imports(path: Path) -> list[tuple[int, str, bool]]:
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


def _unit_edges() -> dict[tuple[str, str], list[str]]:
    """``(source unit, target unit) -> ["path:line imports module", ...]`` for every import
    between two units (module level, in functions and under ``TYPE_CHECKING``)."""
    edges: dict[tuple[str, str], list[str]] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        relative = path.relative_to(PACKAGE)
        if relative == Path("__init__.py"):
            continue  # the facade names every layer (lazily)
        source = relative.parts[0] if len(relative.parts) > 1 else relative.stem
        if source == "__main__":
            continue
        for line, module, deferred in _all_imports(path):
            target = _target_unit(module)
            if target is None or target == source:
                continue
            if deferred and (source, target) in DEFERRED_UPWARD:
                continue
            edges.setdefault((source, target), []).append(f"{relative}:{line} imports {module}")
    return edges


def test_every_unit_has_a_layer() -> None:
    missing = [unit for unit in _units() if unit not in LAYER_OF]
    assert not missing, f"place {missing} in LAYERS"


def test_no_unit_imports_a_layer_above_it() -> None:
    violations = [
        f"{where} ({source} may not depend on {target})"
        for (source, target), sites in sorted(_unit_edges().items())
        if LAYER_OF[target] >= LAYER_OF[source]
        for where in sites
    ]
    assert not violations, "\n".join(violations)


def test_the_unit_import_graph_has_no_cycle() -> None:
    graph: dict[str, set[str]] = {unit: set() for unit in _units()}
    for source, target in _unit_edges():
        graph[source].add(target)
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(unit: str) -> list[str] | None:
        state[unit] = 1
        path.append(unit)
        for target in sorted(graph[unit]):
            if state.get(target) == 1:
                return [*path[path.index(target) :], target]
            if target not in state and (cycle := visit(target)) is not None:
                return cycle
        path.pop()
        state[unit] = 2
        return None

    for unit in sorted(graph):
        if unit not in state:
            cycle = visit(unit)
            assert cycle is None, " -> ".join(cycle)


@pytest.mark.parametrize(
    ("upper", "lower"),
    [("orchestration", "crew"), ("middleware", "hub"), ("middleware", "acl"), ("store", "lifecycle")],
)
def test_the_pairs_that_once_imported_each_other_now_depend_one_way(upper: str, lower: str) -> None:
    edges = _unit_edges()
    assert (lower, upper) not in edges, edges.get((lower, upper))


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
def test_importing_a_unit_alone_in_a_fresh_interpreter_loads_only_lower_layers(unit: str) -> None:
    result = subprocess.run(
        [sys.executable, "-c", _PROBE, f"orkeon_actors.{unit}"], capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stderr  # no circular import: the unit imports alone
    report = json.loads(result.stdout)
    assert set(report["facade"]) <= {"errors", "model", "logs", "lazy"}, "import orkeon_actors must load only the model"
    loaded = set(report["loaded"]) - set(report["facade"]) - {unit}
    above = sorted(u for u in loaded if LAYER_OF[u] >= LAYER_OF[unit])
    assert not above, f"importing orkeon_actors.{unit} loaded {above}, which are not below it"


def test_the_facade_names_every_user_type_and_no_adapter() -> None:
    import orkeon_actors as ok
    from orkeon_actors import config, crew, lifecycle, orchestration, sim

    assert ok.CrewActor is crew.CrewActor
    assert ok.Agent is crew.Agent
    assert ok.ScriptedModel is crew.ScriptedModel is sim.ScriptedModel
    assert ok.CrewSupervisor is lifecycle.CrewSupervisor
    assert ok.Simulation is sim.Simulation
    assert ok.CrewBuilder is config.CrewBuilder and ok.load_crew is config.load_crew
    for mode in ("Sequential", "Parallel", "Hierarchical", "Consensual", "Graph", "Autonomous"):
        assert getattr(ok, mode) is getattr(orchestration, mode)
        assert mode in ok.__all__
    assert {"crew", "lifecycle", "sim", "orchestration"} <= set(ok.__all__)
    adapters = {
        "InMemoryEventHub",
        "HubCore",
        "SqliteEventHub",
        "SqliteCrewStateStore",
        "SqliteMailboxStore",
        "SqliteWakeIndex",
        "SqliteExpiryIndex",
        "BrokerLink",
    }
    for facade in (ok, crew, lifecycle, sim, orchestration, config):
        assert not adapters & set(facade.__all__), f"{facade.__name__} exports an adapter"
    for name in ok.__all__:
        assert getattr(ok, name) is not None
    with pytest.raises(AttributeError, match="no attribute 'InMemoryEventHub'"):
        _ = ok.InMemoryEventHub


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
