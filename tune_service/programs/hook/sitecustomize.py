"""Put first on a W&B program's ``PYTHONPATH`` by tune-service: the program runs unchanged, and sees what
it would see under W&B's agent. Nothing here runs unless tune-service started the process.

- The trial's run: as under W&B's agent, whose ``WANDB_RUN_ID`` in the program's environment makes its
  ``wandb.init()`` the sweep's run, a ``wandb.init()`` in a process that still has the trial's
  ``WANDB_RUN_ID`` (the program, a child it left the variable to), asking for no other id, returns the
  trial's run: its ``config`` holds the trial's parameters over the program's own defaults, and its id,
  name, group, project, directory and mode are the trial's. ``run.sweep_id`` is the trial's wandb group
  (the sweep's name), ``run.sweep_url`` that group's page (None offline, as every URL of an offline run).
  On a rank other than 0 the trial's run is a ``disabled`` stand-in whose ``dir`` exists: the program
  works (``run.config``, ``run.log``, ``run.save``, ``torch.save`` into ``run.dir``) and nothing is logged
  twice.
- Any other ``wandb.init()`` (a process that removed ``WANDB_RUN_ID``, as W&B's cross-validation example
  does for its fold workers; an ``id`` of its own; ``reinit`` asking for a new run beside the trial's)
  is a run of its own, in the trial's group unless it names one, project, directory and mode: its logs
  are not the trial's reports.
- Every ``log()`` of rank 0's trial run is also written, as one JSON line, to the file
  ``TUNE_SERVICE_REPORTS`` names: its numbers (nested dicts as dotted names) and its ``step`` (also when
  the sweep has no wandb and the run is ``disabled``).
- An uncaught exception in the program is recorded (its last line) in the file ``TUNE_SERVICE_ERROR``
  names, before Python reports it and runs its exit handlers (which may hang on the program's workers).
- SIGTERM (a trial the scheduler stopped) exits the program cleanly (``SystemExit``, so ``atexit`` runs
  and its wandb run is finished), unless the program handles SIGTERM itself.
- The program's supervisor (``supervise.py``) ends it gracefully when its trial ends, however the
  trial's actors went; if the supervisor itself is killed, the program kills its own process group, so
  nothing is left behind.

Python imports one ``sitecustomize``; the next one on the path, if any, is run after this one.
"""

import json
import os
import sys
import threading
import uuid

_REPORTS = os.environ.get("TUNE_SERVICE_REPORTS")
_TRIAL = os.environ.get("TUNE_SERVICE_TRIAL")
_PARENT = os.environ.get("TUNE_SERVICE_PARENT_PID")


def _chain_next_sitecustomize():
    import importlib.machinery
    import importlib.util

    here = os.path.dirname(os.path.abspath(__file__))
    rest = [p for p in sys.path if os.path.abspath(p or os.curdir) != here]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", rest)
    if spec is not None and spec.loader is not None:
        spec.loader.exec_module(importlib.util.module_from_spec(spec))


def _watch_parent(parent):
    """End the program's process group once its supervisor (``parent``) is gone."""
    import signal
    import time

    while os.getppid() == parent:
        time.sleep(1.0)
    os.killpg(os.getpgrp(), signal.SIGKILL)


def _numbers(data, prefix=""):
    """The numbers in a logged dict, nested dicts flattened with dots (images, tables... left out)."""
    out = {}
    for key, value in data.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            out.update(_numbers(value, f"{name}."))
        elif isinstance(value, bool):
            continue
        elif isinstance(value, (int, float)):
            out[name] = value
        elif getattr(value, "ndim", None) == 0 and hasattr(value, "item"):  # numpy and torch scalars
            item = value.item()
            if isinstance(item, (int, float)) and not isinstance(item, bool):
                out[name] = item
    return out


class _Reports:
    """Rank 0's reports: one JSON line per ``log`` call that commits, numbered as W&B numbers steps."""

    def __init__(self, path):
        self.file = open(path, "a", buffering=1, encoding="utf-8")  # noqa: SIM115 - open for the process
        self.step = 0
        self.pending = {}
        self.lock = threading.Lock()

    def log(self, data, step=None, commit=None):
        with self.lock:
            self.pending.update(_numbers(dict(data)))
            if commit is False:
                return
            self.step = int(step) if step is not None else self.step + 1
            line = json.dumps({**self.pending, "step": self.step})
            self.pending = {}
            self.file.write(line + "\n")


def _nested_update(base, update):
    for key, value in update.items():
        if isinstance(value, dict) and isinstance(base.get(key), dict):
            _nested_update(base[key], value)
        else:
            base[key] = value
    return base


def _as_dict(config):
    if config is None:
        return {}
    if isinstance(config, dict):
        return json.loads(json.dumps(config, default=str))
    if hasattr(config, "__dict__") and not hasattr(config, "keys"):  # an argparse Namespace
        return dict(vars(config))
    return dict(config)


def _trial_run_class(run_class, trial_run):
    """``run_class`` whose ``sweep_id`` is the trial's group and ``sweep_url`` that group's page; for a
    disabled stand-in, whose ``dir`` is a directory that exists (wandb's is a temporary path it never
    makes), in the trial's run directory."""
    group, mode = trial_run.get("group"), trial_run.get("mode")

    def sweep_url(run):
        project_url = run.project_url if mode == "online" else None
        return f"{project_url}/groups/{group}" if project_url else None

    members = {"sweep_id": property(lambda run: group), "sweep_url": property(sweep_url)}
    if mode == "disabled" and trial_run.get("dir"):
        files = os.path.join(trial_run["dir"], "files")
        os.makedirs(files, exist_ok=True)
        members["dir"] = property(lambda run: files)
    return type(run_class.__name__, (run_class,), members)


def _patch(wandb):
    assert _TRIAL is not None  # the hook patches wandb only in a trial's program
    with open(_TRIAL, encoding="utf-8") as file:
        trial = json.load(file)
    reports = _Reports(_REPORTS) if _REPORTS else None
    real_init = wandb.init
    trial_run = trial.get("run") or {}
    trial_id = trial_run.get("id")
    active: list = []  # the trial's run while it is open in this process

    def is_trial_init(kwargs):
        if trial_id is None or os.environ.get("WANDB_RUN_ID") != trial_id:
            return False  # not the agent's environment: the program made this process a run of its own
        if kwargs.get("id") not in (None, trial_id):
            return False
        opened = wandb.run is not None and any(run is wandb.run for run in active)  # unset when it finishes
        return not (opened and kwargs.get("reinit") in (True, "create_new"))

    def own_run(args, kwargs):
        kwargs.setdefault("id", uuid.uuid4().hex[:8])  # never the trial's, which the environment names
        kwargs.setdefault("group", trial_run.get("group"))
        for key in ("project", "entity", "dir", "mode"):
            if trial_run.get(key) is not None:
                kwargs[key] = trial_run[key]
        return real_init(*args, **kwargs)

    def init(*args, **kwargs):
        if not is_trial_init(kwargs):
            return own_run(args, kwargs)
        kwargs["config"] = _nested_update(_as_dict(kwargs.get("config")), trial["params"])
        kwargs.update(trial_run)  # id, name, group, project, entity, dir, mode, tags, resume
        run = real_init(*args, **kwargs)
        run.__class__ = _trial_run_class(type(run), trial_run)
        active.append(run)
        if reports is not None:
            real_log = run.log

            def log(data, step=None, commit=None, *more, **options):
                result = real_log(data, step, commit, *more, **options)
                reports.log(data, step, commit)  # whatever the run's mode: a disabled run reports too
                return result

            run.log = log  # run.log(...) ...
            wandb.log = log  # ... and wandb.log(...), which init pointed at the run's own
        return run

    wandb.init = init


class _WandbFinder:
    """Patches ``wandb`` as it is first imported (``import wandb`` anywhere in the program)."""

    def find_spec(self, name, path=None, target=None):
        if name != "wandb":
            return None
        import importlib.util

        sys.meta_path.remove(self)
        spec = importlib.util.find_spec("wandb")
        if spec is None or spec.loader is None:
            return None
        exec_module = spec.loader.exec_module

        def exec_and_patch(module):
            exec_module(module)
            _patch(module)

        # the loader patched in place, for this one import (mypy refuses assigning to a method)
        spec.loader.exec_module = exec_and_patch  # type: ignore[method-assign]
        return spec


def _exit_on_sigterm(signum, frame):
    raise SystemExit(128 + signum)


def _record_uncaught(path):
    """Write an uncaught exception's last line into ``path``, then report it as Python does: a program can
    raise and still not exit (its non-daemon workers or threads joined at exit), and its trial should fail
    with the program's own error then, not as a stall."""
    import traceback

    previous = sys.excepthook

    def excepthook(kind, value, frames):
        try:
            with open(path, "w", encoding="utf-8") as file:
                file.write("".join(traceback.format_exception_only(kind, value)).strip())
        except OSError:
            pass
        previous(kind, value, frames)

    sys.excepthook = excepthook


if _TRIAL:
    if _PARENT and os.getppid() == int(_PARENT):  # the program itself, not a process it starts
        import signal

        threading.Thread(target=_watch_parent, args=(int(_PARENT),), daemon=True).start()
        if signal.getsignal(signal.SIGTERM) == signal.SIG_DFL:
            signal.signal(signal.SIGTERM, _exit_on_sigterm)
        if os.environ.get("TUNE_SERVICE_ERROR"):
            _record_uncaught(os.environ["TUNE_SERVICE_ERROR"])
    if "wandb" in sys.modules:
        _patch(sys.modules["wandb"])
    else:
        sys.meta_path.insert(0, _WandbFinder())
_chain_next_sitecustomize()
