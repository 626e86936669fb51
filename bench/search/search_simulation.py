"""A sweep simulated in one process: ``workers`` trials at a time, every trial epoch one tick of the clock,
any searcher-and-scheduler pair (a :class:`Contender`) deciding which trials start and which stop.

Why simulated: the search-quality benchmark compares our methods with Optuna's and others' on the same
problems, budgets and concurrency, at 20 seeds and more. Closed-form problems cost microseconds, so
what a real Ray Tune run would time is Tune itself; the decisions (which configurations, which trials
stopped at which rung) are the searchers' and schedulers' own, here as there: our contenders are the
very Tune searcher and scheduler objects a sweep builds (``tune_service.search.registry``).

The clock: every tick, each running trial trains one epoch and reports ``f(x, epoch / max_t)``; its
contender says go on, stop, or pause (synchronous HyperBand pauses a trial at a rung until its bracket
is halved); a trial that reaches ``max_t`` completes. Free workers take new trials, or resume paused
ones where they stopped, before the next tick. The run ends when ``budget`` trial-epochs are spent, or
when the contender has nothing more to start and nothing runs. After every epoch the incumbent is the
best configuration at the highest fidelity reached so far (as HpBandSter picks it), and its simple
regret is ``f(incumbent, 1) - f*``: the anytime curve. A problem of several objectives brings its own
rule for the regret (an :class:`Anytime`: :mod:`bench.search.pareto_quality`'s hypervolume regret).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Protocol


#: What :meth:`Contender.report` returns for a trial that waits, paused, until :meth:`Contender.start`
#: returns its id again (it then goes on from the epoch it reached).
PAUSE = "pause"


class Contender(Protocol):
    """A searcher and a scheduler, as the simulated sweep drives them."""

    def start(self) -> tuple[Any, dict[str, float]] | None:
        """A trial to run (its id and configuration: a new one, or a paused one to resume), or None when
        there is none to start now."""

    def report(self, trial_id: Any, epoch: int, value: float) -> bool | str:
        """The trial's value after ``epoch`` epochs; whether it goes on (True), stops (False) or pauses
        (:data:`PAUSE`)."""

    def end(self, trial_id: Any, epoch: int, value: float, completed: bool) -> None:
        """The trial ended after ``epoch`` epochs: it completed (``max_t``), or its contender stopped it."""


@dataclass(frozen=True)
class Problem:
    """``f(x, s)`` to minimise over ``bounds`` (name -> (low, high)), with its minimum at ``s = 1``."""

    name: str
    f: Callable[[dict[str, float], float], float]
    bounds: dict[str, tuple[float, float]]
    minimum: float


class Anytime(Protocol):
    """What the anytime curve records after each trial-epoch."""

    def regret(self, trial_id: Any, config: dict[str, float], epoch: int, value: Any) -> float:
        """The regret once the trial's report of ``value`` after ``epoch`` epochs is in."""


class BestIncumbent:
    """One objective: the simple regret of the best configuration at the highest fidelity reached so far,
    at full fidelity (the module's docstring)."""

    def __init__(self, problem: Problem):
        self.problem = problem
        self.top_epoch, self.incumbent, self.incumbent_value = 0, None, float("inf")

    def regret(self, trial_id: Any, config: dict[str, float], epoch: int, value: Any) -> float:
        if epoch > self.top_epoch or (epoch == self.top_epoch and value < self.incumbent_value):
            self.top_epoch, self.incumbent, self.incumbent_value = epoch, config, value
        return self.problem.f(self.incumbent, 1.0) - self.problem.minimum


@dataclass
class Curve:
    """The incumbent's simple regret after each trial-epoch spent (index 0: after the first)."""

    regret: list[float]
    trials: int

    def at(self, spent: int) -> float:
        """The regret once ``spent`` trial-epochs are spent (the last one if the run ended before)."""
        return self.regret[min(spent, len(self.regret)) - 1]

    def area(self, budget: int) -> float:
        """The mean regret over the budget: the area under the anytime curve, divided by the budget."""
        return sum(self.at(spent) for spent in range(1, budget + 1)) / budget


def simulate(problem: Any, contender: Contender, *, workers: int, budget: int, max_t: int,
             anytime: Anytime | None = None) -> Curve:
    """Run the contender on the problem until ``budget`` trial-epochs are spent; its anytime curve (by
    ``anytime``'s rule; by default :class:`BestIncumbent`'s)."""
    anytime = anytime or BestIncumbent(problem)
    running: dict[Any, tuple[dict[str, float], int]] = {}
    paused: dict[Any, tuple[dict[str, float], int]] = {}
    regret: list[float] = []
    trials = 0
    while len(regret) < budget:
        while len(running) < workers:
            started = contender.start()
            if started is None:
                break
            if started[0] in running:
                raise ValueError(f"the contender started trial {started[0]!r} twice")
            if started[0] in paused:
                running[started[0]] = paused.pop(started[0])
            else:
                running[started[0]] = (started[1], 0)
                trials += 1
        if not running:
            break  # the contender has nothing more to run
        for trial_id in list(running):
            if len(regret) >= budget:
                break
            config, epoch = running[trial_id]
            epoch += 1
            value = problem.f(config, epoch / max_t)
            regret.append(anytime.regret(trial_id, config, epoch, value))
            decision = contender.report(trial_id, epoch, value)
            if decision == PAUSE and epoch < max_t:
                del running[trial_id]
                paused[trial_id] = (config, epoch)
            elif decision and epoch < max_t:
                running[trial_id] = (config, epoch)
            else:
                del running[trial_id]
                contender.end(trial_id, epoch, value, completed=epoch == max_t)
    return Curve(regret, trials)
