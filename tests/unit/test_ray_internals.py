"""Every private name of Ray the service relies on (tune_service.ray_internals) is there in the
installed Ray: when Ray changes one, this fails naming it, before any sweep meets it."""

from __future__ import annotations

import importlib
import inspect
import re

import pytest

from tune_service import ray_internals
from tune_service.ray_internals import INTERNALS, Internal, RayInternalsChanged, private


def owner_of(internal: Internal):
    module, _, cls = internal.owner.partition(":")
    owner = importlib.import_module(module)
    return getattr(owner, cls) if cls else owner


def sets_on_instances(cls: type, name: str) -> bool:
    """Whether the class, or a class it is made from, assigns ``self.<name>`` in its source."""
    assignment = re.compile(rf"\bself\.{re.escape(name)}\s*(:[^=]*)?=")
    return any(assignment.search(inspect.getsource(k)) for k in cls.__mro__ if k.__module__.startswith("ray."))


@pytest.mark.parametrize("internal", INTERNALS, ids=str)
def test_the_private_name_is_in_the_installed_ray(internal):
    owner = owner_of(internal)
    if internal.instance:
        assert sets_on_instances(owner, internal.name), f"Ray changed {internal}, used in {internal.used_in}"
    else:
        assert hasattr(owner, internal.name), f"Ray changed {internal}, used in {internal.used_in}"


def test_every_private_import_and_lookup_in_the_source_is_listed():
    """A private Ray name imported (``from ray._raylet import Config``, ``from ray.x import _Bracket``,
    ``from ray.train._internal import session``), or looked up with private(), is in INTERNALS."""
    from pathlib import Path

    modules = {i.owner.partition(":")[0] for i in INTERNALS}
    names = {i.name for i in INTERNALS}
    unlisted = []
    for path in Path(ray_internals.__file__).parent.rglob("*.py"):
        text = path.read_text(encoding="utf-8")
        for module, imported in re.findall(r"from (ray[\w.]*) import ([\w, ]+)", text):
            for name in (n.strip() for n in imported.split(",")):
                dotted = f"{module}.{name}"
                if "._" in f".{dotted}" and dotted not in modules and not (module in modules and name in names):
                    unlisted.append(f"{path.name}: {dotted}")
        unlisted += [f"{path.name}: private(..., {n!r})" for n in re.findall(r"private\([^,]+, \"(\w+)\"\)", text)
                     if n not in names]
    assert unlisted == []


def test_a_missing_private_name_is_an_error_that_names_it():
    class Controller:  # a TuneController as a Ray without the method would make it
        __module__ = "ray.tune.execution.tune_controller"

    Controller.__name__ = "TuneController"
    with pytest.raises(RayInternalsChanged, match=r"has no ray\.tune\.execution\.tune_controller:TuneController\."
                                                  r"_mark_trial_to_checkpoint \(used in search\.hyperband"):
        private(Controller(), "_mark_trial_to_checkpoint")
    with pytest.raises(AssertionError, match="_something_else is not in INTERNALS"):
        private(Controller(), "_something_else")


#: Private attributes of other libraries than Ray that the source reads, and why (not Ray's: not listed).
NOT_RAYS = {"_orig_mod": "torch.compile's OptimizedModule: the module it compiled (training/wrapping.py)",
            "_exit": "os._exit, the standard library's documented exit without clean-up"}
#: The modules that are doors of their own: this one's twin for torch.
OTHER_DOORS = ("ray_internals.py", "torch_internals.py")


def foreign_private_accesses(source: str) -> list[str]:
    """Every ``obj._name`` in ``source`` on something other than ``self`` or ``cls`` whose ``_name`` the
    package does not define itself (a ``def _name``, a ``self._name =``, a module or class name): a
    private name of another library, read around ray_internals."""
    import ast

    tree = ast.parse(source)
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Attribute) or not node.attr.startswith("_") or node.attr.startswith("__"):
            continue
        if isinstance(node.value, ast.Name) and node.value.id in ("self", "cls"):
            continue
        if node.attr in OWN_PRIVATE_NAMES or node.attr in NOT_RAYS:
            continue
        found.append(f"line {node.lineno}: .{node.attr}")
    return sorted(found)


def own_private_names() -> set[str]:
    """The private names the package defines: functions, classes, attributes it assigns, module names."""
    import ast
    from pathlib import Path

    names = set()
    for path in Path(ray_internals.__file__).parent.rglob("*.py"):
        names.add(path.stem)
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                names.add(node.name)
            elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
                names.add(node.attr)
            elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                names.add(node.id)
    return {n for n in names if n.startswith("_")}


OWN_PRIVATE_NAMES = own_private_names()


def test_no_private_name_of_ray_is_read_around_ray_internals():
    """Every private Ray attribute goes through ``private()`` (one door, listed in INTERNALS); an AST walk
    of the package finds any ``obj._name`` read directly, so the next one fails here."""
    from pathlib import Path

    package = Path(ray_internals.__file__).parent
    found = {str(path.relative_to(package)): accesses for path in package.rglob("*.py")
             if path.name not in OTHER_DOORS and (accesses := foreign_private_accesses(path.read_text(encoding="utf-8")))}
    assert found == {}


def test_the_guard_finds_a_planted_private_access():
    planted = ("def restore(tuner, scheduler):\n"
               "    tuner._local_tuner._tune_config.scheduler = scheduler\n"
               "    return self_like._cumul_r\n")
    assert foreign_private_accesses(planted) == ["line 2: ._local_tuner", "line 2: ._tune_config",
                                                 "line 3: ._cumul_r"]
