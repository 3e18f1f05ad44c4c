"""The layout keeps its promises: one composition root, a pure judge, front ends that only consume."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "trainpulse_otel"
#: "Small modules": past this a module is doing more than one job.
MAX_MODULE_LINES = 400
#: A module's docstring says what it promises, with an example where it helps; the method, its numbers and
#: their history belong in docs/ (signals.md, performance.md, instrumentation.md …).
MAX_DOCSTRING_LINES = 25
#: The composition root's modules, ``__init__`` counted: assembly, engine, window, session, replay, plugins,
#: garbage collection and logs. A tenth is a driver or a tool that belongs in a package beside it.
MAX_RUNTIME_MODULES = 9
#: What ``trainpulse eval`` may use: the root's replay, the judge, the simulator and its traces, the samples.
EVALUATION_USES = (
    "trainpulse_otel.evaluation",
    "trainpulse_otel.runtime",
    "trainpulse_otel.diagnose",
    "trainpulse_otel.collect.sim",
    "trainpulse_otel.collect.trace",
    "trainpulse_otel.samples",
    "trainpulse_otel.config",
)


def modules() -> dict[str, ast.Module]:
    """Every module of the package, by dotted name."""
    out = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        out[name] = ast.parse(path.read_text(), str(path))
    return out


def imported(name: str, tree: ast.Module) -> set[str]:
    """The absolute names of the modules (and names) ``tree`` imports."""
    package = (
        name if name.count(".") == 0 or (PACKAGE.parent / name.replace(".", "/")).is_dir() else name.rpartition(".")[0]
    )
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            found.add(module)
            found |= {f"{module}.{alias.name}" for alias in node.names}
    return found


def loaded_after_import(module: str) -> list[str]:
    """The modules a fresh interpreter has loaded after ``import module``."""
    code = f"import json, sys; import {module}; print(json.dumps(sorted(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return json.loads(out.stdout)


def test_exactly_one_module_constructs_the_engine():
    constructing = sorted(
        name
        for name, tree in modules().items()
        for node in ast.walk(tree)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "Engine"
    )
    assert constructing == ["trainpulse_otel.runtime.assemble"]


def test_importing_the_judge_loads_no_collection_telemetry_api_dashboard_or_nvml():
    loaded = loaded_after_import("trainpulse_otel.diagnose")
    forbidden = (
        "trainpulse_otel.collect",
        "trainpulse_otel.telemetry",
        "trainpulse_otel.api",
        "trainpulse_otel.dashboard",
        "trainpulse_otel.runtime",
        "trainpulse_otel.publish",
        "pynvml",
        "opentelemetry",
        "flask",
        "psutil",
    )
    assert [m for m in loaded if m.startswith(forbidden)] == []


def test_the_dashboard_imports_no_collector_and_builds_no_engine():
    for name, tree in modules().items():
        if name.startswith("trainpulse_otel.dashboard"):
            bad = {
                m for m in imported(name, tree) if m.startswith(("trainpulse_otel.collect", "trainpulse_otel.runtime"))
            }
            assert not bad, f"{name} imports {sorted(bad)}"
    loaded = loaded_after_import("trainpulse_otel.dashboard.app")
    assert [m for m in loaded if m.startswith(("trainpulse_otel.collect", "pynvml"))] == []


def test_the_runtime_is_only_the_composition_root():
    runtime = sorted(name for name in modules() if name.partition(".")[2].split(".")[0] == "runtime")
    assert len(runtime) <= MAX_RUNTIME_MODULES, f"runtime/ has {len(runtime)} modules: {runtime}"


def test_the_evaluation_sits_beside_the_runtime_not_in_it():
    for name, tree in modules().items():
        uses = {m for m in imported(name, tree) if m.startswith("trainpulse_otel.")}
        if name.startswith("trainpulse_otel.runtime"):
            bad = {m for m in uses if m.startswith("trainpulse_otel.evaluation")}
            assert not bad, f"{name} imports {sorted(bad)}"
        elif name.startswith("trainpulse_otel.evaluation"):
            bad = {m for m in uses if not m.startswith(EVALUATION_USES)}
            assert not bad, f"{name} imports {sorted(bad)}"
    loaded = loaded_after_import("trainpulse_otel.runtime")
    assert [m for m in loaded if m.startswith("trainpulse_otel.evaluation")] == []


def test_no_private_name_is_imported_across_packages():
    crossing = []
    for name, tree in modules().items():
        own_package = name.split(".")[1] if "." in name else ""
        for module in imported(name, tree):
            parts = module.split(".")
            if parts[0] != "trainpulse_otel" or not parts[-1].startswith("_") or parts[-1].startswith("__"):
                continue
            if len(parts) > 2 and parts[1] != own_package:
                crossing.append(f"{name} imports {module}")
    assert crossing == []


def test_settings_are_a_leaf_package():
    # Settings are read before any part exists: they parse syntax (Go durations, value parsers, the API server's
    # limits), and the parts check names at start-up. The config package imports nothing of TrainPulse but itself.
    for name, tree in modules().items():
        if name == "trainpulse_otel.config" or name.startswith("trainpulse_otel.config."):
            outside = {
                m
                for m in imported(name, tree)
                if m.startswith("trainpulse_otel.") and not m.startswith("trainpulse_otel.config")
            }
            assert not outside, f"{name} imports {sorted(outside)}"


def test_telemetry_imports_nothing_from_collection():
    # Telemetry comes after collection in the data path; what both speak lives in samples/.
    for name, tree in modules().items():
        if name.startswith("trainpulse_otel.telemetry"):
            bad = {m for m in imported(name, tree) if m.startswith("trainpulse_otel.collect")}
            assert not bad, f"{name} imports {sorted(bad)}"


@pytest.mark.parametrize("name", sorted(modules()))
def test_modules_stay_small(name):
    path = PACKAGE.parent / (name.replace(".", "/") + ".py")
    if not path.exists():
        path = PACKAGE.parent / name.replace(".", "/") / "__init__.py"
    lines = len(path.read_text().splitlines())
    assert lines <= MAX_MODULE_LINES, f"{name} has {lines} lines"


def test_no_module_docstring_runs_past_its_bound():
    long = []
    for name, tree in modules().items():
        first = tree.body[0] if tree.body else None
        if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(first.value.value, str):
            lines = first.end_lineno - first.lineno + 1
            if lines > MAX_DOCSTRING_LINES:
                long.append(f"{name} ({lines} lines)")
    assert long == [], f"module docstrings past {MAX_DOCSTRING_LINES} lines (move the method to docs/): {long}"


def test_no_test_module_imports_another():
    """What tests share lives in conftest.py (fixtures) or a helper module beside them, never in a test module:
    importing one runs its module-level code and collects nothing, and its tests' order starts to matter."""
    tests = Path(__file__).resolve().parent
    offenders = []
    for path in sorted(tests.rglob("*.py")):
        tree = ast.parse(path.read_text(), str(path))
        for node in ast.walk(tree):
            names = [node.module or ""] if isinstance(node, ast.ImportFrom) else []
            names += [alias.name for alias in node.names] if isinstance(node, ast.Import) else []
            if any(part.startswith("test_") for name in names for part in name.split(".")):
                offenders.append(f"{path.relative_to(tests)}:{node.lineno}")
    assert offenders == []


def run_time_imports(name: str, tree: ast.Module, known: set[str]) -> set[str]:
    """The package's modules ``tree`` imports when it runs (lazily too), not those it imports for types only
    (``if TYPE_CHECKING:``); ``from . import sub`` is an import of ``sub``, not of the package it sits in."""
    package = name if (PACKAGE.parent / name.replace(".", "/")).is_dir() else name.rpartition(".")[0]
    found: set[str] = set()

    def visit(node: ast.AST) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and "TYPE_CHECKING" in ast.unparse(child.test):
                continue
            if isinstance(child, ast.Import):
                found.update(alias.name for alias in child.names)
            elif isinstance(child, ast.ImportFrom):
                base = package.split(".")[: len(package.split(".")) - (child.level - 1)] if child.level else []
                module = ".".join([*base, child.module]) if child.module else ".".join(base)
                subs = {f"{module}.{alias.name}" for alias in child.names}
                found.update(subs & known)
                if subs - known:
                    found.add(module)
            visit(child)

    visit(tree)
    return (found & known) - {name}


def test_nothing_outside_the_command_line_imports_it():
    for name, tree in modules().items():
        if name.startswith("trainpulse_otel.cli") or name == "trainpulse_otel.__main__":
            continue
        bad = {m for m in imported(name, tree) if m == "trainpulse_otel.cli" or m.startswith("trainpulse_otel.cli.")}
        assert not bad, f"{name} imports {sorted(bad)}"


def test_no_two_modules_import_each_other_even_through_others():
    """No import cycle (Tarjan's strongly connected components of the run-time import graph): a module's
    imports run before it is whole, and a cycle makes which half-built module another sees an accident."""
    found = modules()
    graph = {name: run_time_imports(name, tree, set(found)) for name, tree in found.items()}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    cycles: list[list[str]] = []

    def strong(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in graph[v]:
            if w not in index:
                strong(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while component[-1:] != [v]:
                component.append(stack.pop())
            if len(component) > 1:
                cycles.append(sorted(component))

    for v in graph:
        if v not in index:
            strong(v)
    assert cycles == []


#: The layers docs/architecture.md draws, lowest first: a package imports only from layers below its own.
LAYERS = (
    ("version", "config", "mfu"),
    ("samples",),
    ("adapters", "diagnose", "telemetry"),
    ("logs", "publish", "report", "actions"),
    ("collect", "receive", "dashboard"),
    ("api",),
    ("runtime",),
    ("evaluation", "integrations"),
    ("cli",),
    ("(root)", "__main__"),
)


def test_no_package_imports_a_layer_above_its_own():
    found = modules()
    layer_of = {package: i for i, packages in enumerate(LAYERS) for package in packages}
    assert set(layer_of) >= {name.split(".")[1] if "." in name else "(root)" for name in found}

    def package(module: str) -> str:
        return module.split(".")[1] if "." in module else "(root)"

    upward = sorted(
        f"{name} imports {target}"
        for name, tree in found.items()
        for target in run_time_imports(name, tree, set(found))
        if package(target) != package(name) and layer_of[package(target)] >= layer_of[package(name)]
    )
    assert upward == []
