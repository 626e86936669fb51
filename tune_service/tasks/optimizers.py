"""The optimizers a trial's config may name: every ``torch.optim`` optimizer the shared loop can step
(by its class name, any case: ``adamw``, ``RMSprop``, ``nadam``), and the config keys that are their
arguments (``weight_decay``, ``momentum``, ``betas``, ``eps``, ``nesterov``, ...).

LBFGS is left out: it needs a closure that re-evaluates the model, which the loop's step does not give;
a task that wants it builds it in ``configure_optimizers``.
"""

from __future__ import annotations

import functools
import inspect

import torch

#: Constructor arguments that are not hyperparameters: the loop passes the parameters and the
#: (scaled) lr itself, and implementation switches are torch's to choose.
NOT_HYPERPARAMETERS = frozenset({"self", "params", "lr", "foreach", "capturable", "differentiable", "fused"})
#: Optimizers the loop cannot step (see the module's docstring).
NEEDS_A_CLOSURE = frozenset({"lbfgs"})


@functools.cache
def optimizer_classes() -> dict[str, type[torch.optim.Optimizer]]:
    """``torch.optim``'s optimizers the loop can step, by lower-case class name."""
    return {
        name.lower(): cls
        for name, cls in vars(torch.optim).items()
        if isinstance(cls, type)
        and issubclass(cls, torch.optim.Optimizer)
        and cls is not torch.optim.Optimizer
        and name.lower() not in NEEDS_A_CLOSURE
    }


def optimizer_arguments(cls: type[torch.optim.Optimizer]) -> tuple[str, ...]:
    """The hyperparameters ``cls`` takes from a trial's config, in its signature's order."""
    return tuple(name for name in inspect.signature(cls.__init__).parameters if name not in NOT_HYPERPARAMETERS)


@functools.cache
def all_optimizer_arguments() -> tuple[str, ...]:
    """Every config key some optimizer takes, sorted: what a task using the loop's optimizer reads."""
    return tuple(sorted({name for cls in optimizer_classes().values() for name in optimizer_arguments(cls)}))


def optimizer_class(name: str) -> type[torch.optim.Optimizer]:
    """The optimizer ``name`` names (any case).

    Raises:
        ValueError: no optimizer the loop can step has that name; the message lists those that do.
    """
    key = str(name).lower()
    if key in NEEDS_A_CLOSURE:
        raise ValueError(
            f"optimizer {name!r} needs a closure the shared loop does not pass; build it in the task's "
            f"configure_optimizers"
        )
    try:
        return optimizer_classes()[key]
    except KeyError:
        raise ValueError(
            f"optimizer must be one of torch.optim's {', '.join(sorted(optimizer_classes()))}, got {name!r}"
        ) from None
