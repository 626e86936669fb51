"""The layout's rules (ARCHITECTURE.md), checked on the source: imports flow one way, down the layers,
and no modules or subpackages import each other in a circle. Every import counts, those inside
functions too (a lazy import is still a dependency)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "tune_service"

#: Lowest first. A unit (a subpackage, or a top-level module) may import units of its own layer or of
#: layers below; never above. The same list is ARCHITECTURE.md's.
LAYERS = (
    ("errors", "redaction", "ray_internals", "torch_internals"),  # shared basics
    ("spec",),                                # the sweep spec: no torch, no Ray
    ("experiment", "tasks"),                  # the experiment directory; the task contract
    ("search", "results", "training", "programs"),  # searchers; results; the shared loop; W&B programs
    ("tracking", "display"),                  # wandb; the live view
    ("execution",),                           # the driver, trials, gangs
    ("cli", "jobs", "__init__"),              # the interfaces
)
LAYER_OF = {unit: index for index, units in enumerate(LAYERS) for unit in units}


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def unit_of(module: str) -> str:
    """``tune_service.search.spaces`` -> ``search``; the package itself -> ``__init__``."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def imported_modules(path: Path, known: set[str]) -> set[str]:
    """The tune_service modules that ``path`` imports (``from tune_service import x`` names module
    ``x`` where there is one, else the package itself)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names if alias.name.split(".")[0] == "tune_service"}
        elif isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "tune_service":
            for alias in node.names:
                candidate = f"{node.module}.{alias.name}"
                found.add(candidate if candidate in known else node.module)
    return found


def import_graph() -> dict[str, set[str]]:
    paths = sorted(PACKAGE.rglob("*.py"))
    known = {module_name(p) for p in paths}
    return {module_name(p): imported_modules(p, known) - {module_name(p)} for p in paths}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one node (Tarjan's algorithm)."""
    index, low, stack, on_stack, found, counter = {}, {}, [], set(), [], [0]

    def visit(node: str) -> None:
        index[node] = low[node] = counter[0]
        counter[0] += 1
        stack.append(node)
        on_stack.add(node)
        for target in graph.get(node, ()):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_every_unit_has_a_layer():
    units = {unit_of(m) for m in import_graph()}
    assert units - set(LAYER_OF) == set(), "add the new subpackage to LAYERS and ARCHITECTURE.md"


def test_imports_flow_down_the_layers():
    upward = sorted(f"{module} ({unit_of(module)}, layer {LAYER_OF[unit_of(module)]}) imports {target} "
                    f"({unit_of(target)}, layer {LAYER_OF[unit_of(target)]})"
                    for module, targets in import_graph().items() for target in targets
                    if LAYER_OF[unit_of(target)] > LAYER_OF[unit_of(module)])
    assert upward == []


def test_no_modules_import_each_other_in_a_circle():
    assert cycles(import_graph()) == []


def test_no_subpackages_import_each_other_in_a_circle():
    units: dict[str, set[str]] = {}
    for module, targets in import_graph().items():
        units.setdefault(unit_of(module), set()).update(unit_of(t) for t in targets if unit_of(t) != unit_of(module))
    assert cycles(units) == []


@pytest.mark.parametrize("source, expected", [
    ("import tune_service.search.spaces\n", {"tune_service.search.spaces"}),
    ("def f():\n    from tune_service.search import registry\n", {"tune_service.search.registry"}),
    ("from tune_service import run\n", {"tune_service"}),
])
def test_the_checker_sees_each_form_of_import(tmp_path, source, expected):
    path = tmp_path / "m.py"
    path.write_text(source)
    assert imported_modules(path, {"tune_service.search.spaces", "tune_service.search.registry"}) == expected


def test_the_cycle_finder_finds_a_circle():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
