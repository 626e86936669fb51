"""Search: the spec's parameters as each searcher's native space, the searchers (hyperopt TPE, BOHB,
Optuna's TPE, random, grid) and schedulers (ASHA, HyperBand for BOHB, FIFO) Tune runs, the schedule a sweep is
expected to follow, and the schedulers' records rebuilt for a resumed sweep.

Modules: ``registry`` (spec -> Tune searcher and scheduler), ``spaces`` (native spaces, sampling, grids),
``searchers`` (our random and grid searchers, and the wrapper every searcher runs in), ``asha``
(ASHA with its paper's promotion rule), ``schedule``
(the expected rungs and budget), ``hyperband`` and ``replay`` (schedulers that survive a driver's death),
``population`` (PBT, PB2 and PBT's replay) and ``population_search`` (the search Tune runs them with).
Ray is imported only where a searcher or scheduler is built.
"""

from tune_service.search.registry import build_scheduler, build_searcher
from tune_service.search.schedule import Schedule, expected_schedule

__all__ = ["build_searcher", "build_scheduler", "Schedule", "expected_schedule"]
