"""A warm trial's actor (and a bundle member's) only passes its task on to the gang's ranks: unpickling
the trial function that Tune ships to it, and the ranks' actor class it creates them from, import neither
the task's module nor torch (1.3 s of CPU at every trial actor's start, about 250 MiB of its memory); the
ranks open the sealed task."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tune_service.execution.driver import build_tuner
from tune_service.execution.plan import make_plan
from tune_service.execution.resources import ClusterResources
from tune_service.spec import load_spec
from tune_service.tasks import SealedTask, resolve_task

ROOT = Path(__file__).resolve().parents[3]
#: What the trial's actor does before it has ranks: unpickle its function, import the ranks' actor class.
UNPICKLE = ("import sys; from ray import cloudpickle; cloudpickle.loads(sys.stdin.buffer.read()); "
            "import tune_service.execution.rank; "
            "print(' '.join(m for m in ('torch', 'sklearn', 'tune_service.tasks.digits') if m in sys.modules))")


@pytest.mark.parametrize("overrides", [{}, {"execution": {"bundle": 4}, "resources": {"workers": 1}}],
                         ids=["warm", "bundle-member"])
def test_unpickling_a_warm_trials_function_imports_neither_torch_nor_the_task(overrides, tmp_path, forbid_ray_start):
    from ray import cloudpickle

    spec = load_spec(ROOT / "search_spaces" / "quickstart.yaml", overrides=overrides or None)
    plan = make_plan(spec, ClusterResources(2, 0, 2, 0))
    assert plan.warm_gangs and plan.bundle_size == overrides.get("execution", {}).get("bundle", 1)
    trainable = build_tuner(plan, tmp_path, "x", bundle_broker="broker" if overrides else None).trainable
    done = subprocess.run([sys.executable, "-c", UNPICKLE], input=cloudpickle.dumps(trainable),
                          capture_output=True, timeout=120)
    assert done.returncode == 0, done.stderr.decode()[-2000:]
    assert done.stdout.decode().strip() == ""


def test_a_sealed_task_opens_as_the_task_it_sealed():
    sealed = SealedTask.of(resolve_task("digits"))
    assert sealed.reference == "digits" and sealed.defaults == resolve_task("digits").defaults
    opened = sealed.open()
    assert opened.reference == "digits" and type(opened.task).__name__ == "Digits"
