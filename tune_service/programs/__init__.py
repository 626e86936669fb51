"""W&B sweep programs run unchanged: a spec with ``program:`` (and ``command:``) and no ``task:`` runs the
user's training script for every trial, as W&B's agent would, on the trial's N ranks with the
environment ``torchrun`` gives (:mod:`~tune_service.execution.program_trial` is the trial).

- :mod:`~tune_service.programs.command`: the command line, W&B's macros expanded.
- :mod:`~tune_service.programs.rank`: one rank's program, started and ended by a Ray actor.
- ``hook/sitecustomize.py``: what the program's ``wandb`` does under the trial (its config, its run, its
  reports).
"""
