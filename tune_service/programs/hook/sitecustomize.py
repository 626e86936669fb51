"""Put first on a W&B program's ``PYTHONPATH`` by tune-service: the program runs unchanged, and sees what
it would see under W&B's agent. Nothing here runs unless tune-service started the process.

- ``wandb.init()`` returns the trial's run: its ``config`` holds the trial's parameters over the program's
  own defaults (as under the agent), and its id, name, group, project, directory and mode are the
  trial's (rank 0); on the other ranks the run is ``disabled``, so nothing is logged twice.
- Every ``run.log()`` / ``wandb.log()`` of rank 0 is also written, as one JSON line, to the file
  ``TUNE_SERVICE_REPORTS`` names: its numbers (nested dicts as dotted names) and its ``step`` (also when
  the sweep has no wandb and the run is ``disabled``).
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


def _patch(wandb):
    with open(_TRIAL, encoding="utf-8") as file:
        trial = json.load(file)
    reports = _Reports(_REPORTS) if _REPORTS else None
    real_init = wandb.init

    def init(*args, **kwargs):
        kwargs["config"] = _nested_update(_as_dict(kwargs.get("config")), trial["params"])
        kwargs.update(trial["run"])  # id, name, group, project, entity, dir, mode, tags, resume
        run = real_init(*args, **kwargs)
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

        spec.loader.exec_module = exec_and_patch
        return spec


def _exit_on_sigterm(signum, frame):
    raise SystemExit(128 + signum)


if _TRIAL:
    if _PARENT and os.getppid() == int(_PARENT):  # the program itself, not a process it starts
        import signal

        threading.Thread(target=_watch_parent, args=(int(_PARENT),), daemon=True).start()
        if signal.getsignal(signal.SIGTERM) == signal.SIG_DFL:
            signal.signal(signal.SIGTERM, _exit_on_sigterm)
    if "wandb" in sys.modules:
        _patch(sys.modules["wandb"])
    else:
        sys.meta_path.insert(0, _WandbFinder())
_chain_next_sitecustomize()
