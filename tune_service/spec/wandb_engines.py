"""W&B's ``scheduler:`` block and ``method: custom`` (its sweep schema since July 2026, wandb/sweeps#135):
``scheduler: {engine: wandb | optuna | ax, source, optimizer, search_space}`` names the engine that runs
the search, and ``method: custom`` a search that the engine, not one of W&B's methods, decides.

Our own ``scheduler:`` block (early stopping: ``type``, ``max_t``, ...) has the same name. The two are
told apart by their keys, never by guessing: a block whose keys are all W&B's (:data:`ENGINE_KEYS`) is
W&B's, one whose keys are all ours is ours, and one with keys of both is refused, naming both readings.

How each engine runs here (:func:`resolve_method`):

- ``wandb``: the file's method (grid, bayes, random), as W&B runs it; W&B refuses ``method: custom``
  with it (wandb/sweeps#138), and so do we.
- ``optuna``: our Optuna searcher. W&B asks engines other than wandb for ``method: custom``; so do we.
- ``ax``: Ax is not offered here; Optuna's TPE (the nearest: a model-based searcher that takes several
  objectives) runs in its place, with a note.
- ``method: custom`` without a block: Optuna's TPE, with a note.

``source``, ``optimizer`` and ``search_space`` point into a Python file whose functions' contract W&B has
not published (it runs no engine but wandb yet): they are noted, not run, and the search runs on the
file's ``parameters:``. A file without ``parameters:`` (its space only in ``search_space``) is refused.
W&B refuses its ``scheduler:`` with ``early_terminate``, and with ``controller: {type: local}``; so do we.
"""

from __future__ import annotations

from dataclasses import dataclass
from tune_service.spec.rules import Checker

#: W&B's method for a search that its engine decides.
CUSTOM_METHOD = "custom"
ENGINES = ("wandb", "optuna", "ax")
ENGINE_KEYS = ("engine", "source", "optimizer", "search_space")
#: The engine's hooks into a Python file (noted, not run: the module's docstring).
HOOK_KEYS = ("source", "optimizer", "search_space")
#: The methods W&B's own engine runs.
WANDB_ENGINE_METHODS = ("grid", "bayes", "random")
#: What ``method: custom`` runs here, for each engine (None: no ``scheduler:`` block).
CUSTOM_SEARCHER = {None: "optuna", "optuna": "optuna", "ax": "optuna"}


@dataclass(frozen=True)
class EngineBlock:
    """W&B's ``scheduler:`` block, read (``engine`` None: the block was refused, its problems reported)."""

    engine: str | None
    hooks: tuple[str, ...] = ()


def read_engine_block(check: Checker, raw: dict, ours: tuple[str, ...]) -> EngineBlock | None:
    """W&B's block when the document's ``scheduler:`` holds any of its keys (None when it is ours, or
    absent); ``ours``: the keys of our own block. A block holding keys of both is refused, naming both
    readings."""
    block = raw.get("scheduler")
    if not isinstance(block, dict):
        return None
    theirs = [key for key in block if key in ENGINE_KEYS]
    if not theirs:
        return None
    mine = [key for key in block if key in ours]
    if mine:
        check.fail(
            "scheduler",
            f"holds keys of two blocks: W&B's engine block ({', '.join(theirs)}: keys {', '.join(ENGINE_KEYS)}) "
            f"and tune-service's early stopping ({', '.join(mine)}: keys {', '.join(ours)}); give one of them",
        )
        return EngineBlock(engine=None)
    check.unknown_keys("scheduler", block, ENGINE_KEYS)
    if "engine" not in block:
        check.fail("scheduler.engine", f"is required in W&B's scheduler block, one of {', '.join(ENGINES)}")
        return EngineBlock(engine=None)
    if check.choice("scheduler.engine", block["engine"], ENGINES) != block["engine"]:
        return EngineBlock(engine=None)
    engine = block["engine"]
    hooks = tuple(key for key in HOOK_KEYS if key in block)
    for key in ("optimizer", "search_space"):
        if key in block and "source" not in block:
            check.fail(
                f"scheduler.{key}", f"needs scheduler.source (the file it names a function of), got {block[key]!r}"
            )
    if "early_terminate" in raw:
        check.fail(
            "early_terminate",
            "cannot be used together with W&B's scheduler block (W&B refuses both too): the engine stops runs itself",
        )
    controller = raw.get("controller")
    if isinstance(controller, dict) and controller.get("type") == "local":
        check.fail("controller", "type local cannot be used together with W&B's scheduler block (W&B refuses both too)")
    if hooks:
        if "parameters" not in raw:
            check.fail(
                "scheduler.search_space",
                "W&B's engine hooks are not run here (W&B has published no contract for them): give the "
                "search space as parameters",
            )
        else:
            check.note(
                f"scheduler.{', scheduler.'.join(hooks)}: read, not run (W&B has published no contract for "
                f"an engine's hooks); the search runs on parameters"
            )
    return EngineBlock(engine=engine, hooks=hooks)


def resolve_method(check: Checker, method: str, block: EngineBlock | None) -> str:
    """The method that runs for the file's ``method`` and W&B's block (the module's docstring)."""
    if block is not None and block.engine is None:
        return method  # refused: its problems are reported
    if block is not None and block.engine == "wandb":
        if method not in WANDB_ENGINE_METHODS:
            check.fail(
                "method",
                f"scheduler.engine wandb runs W&B's methods ({', '.join(WANDB_ENGINE_METHODS)}; W&B refuses "
                f"custom with it too), got {method!r}",
            )
        return method
    if block is not None and method != CUSTOM_METHOD:
        check.fail(
            "method",
            f"scheduler.engine {block.engine} runs its own search and needs method: custom (as W&B asks), "
            f"got {method!r}",
        )
        return method
    if method != CUSTOM_METHOD:
        return method
    engine = None if block is None else block.engine
    searcher = CUSTOM_SEARCHER[engine]
    if engine == "ax":
        check.note("scheduler.engine: ax is not offered here; Optuna's TPE runs the search in its place")
    else:
        check.note(f"method: custom runs Optuna's TPE (engine {engine or 'not given'})")
    return searcher
