"""The scheduler's rung schedule and the training it is expected to cost, before anything runs.

This follows the arithmetic of Ray Tune's own schedulers, so that ``--dry-run`` shows what will
happen rather than the textbook algorithm:

- FIFO: every trial trains ``max_t`` epochs. Exact.
- PBT: as FIFO (it stops no trial; an exploit only changes where a trial's weights come from). Exact.
- ASHA (:class:`~tune_service.search.asha.PromotingASHA`, one bracket): trials are compared at epochs
  ``ceil(grace_period * eta**k)`` below ``max_t``; the best ``1/eta`` of those recorded at a rung go
  on. Promotion is asynchronous (an early trial is compared against few others, and the first trial at
  a rung always goes on), so the counts are an estimate: ``N / eta**k`` trials reach rung ``k``, and at
  least one trial reaches ``max_t``.
- HyperBand (``HyperBandScheduler``; ``HyperBandForBOHB`` for BOHB): trials fill brackets in Ray's
  order (HyperBand: the bracket without early stopping first; BOHB: the most aggressive first); each
  bracket halves synchronously, keeping ``ceil(n/eta)`` of its planned ``n``. Exact for a given number
  of trials, unless trials fail or ``metric.target`` ends the sweep early.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

from tune_service.spec import SchedulerSpec


@dataclass(frozen=True)
class Rung:
    """``trials`` trials are expected to train up to ``epoch`` (then be compared, or end)."""

    epoch: int
    trials: float


@dataclass(frozen=True)
class Bracket:
    """One successive-halving bracket: its rungs in epoch order; the last is where its survivors end."""

    rungs: tuple[Rung, ...]

    @property
    def trial_epochs(self) -> float:
        """Epochs trained by all trials of the bracket: each rung's trials train from the previous rung."""
        total, previous = 0.0, 0
        for rung in self.rungs:
            total += rung.trials * (rung.epoch - previous)
            previous = rung.epoch
        return total


@dataclass(frozen=True)
class Schedule:
    """What the scheduler is expected to do with ``num_trials`` trials. Its rungs and ``max_t`` count
    ``unit``s (epochs, or optimizer steps: ``scheduler.time_unit``); so do its ``*_epochs`` then."""

    scheduler: str
    num_trials: int
    max_t: int
    brackets: tuple[Bracket, ...]
    exact: bool
    unit: str = "epoch"
    #: No budget of its own (a W&B program's trials end with their program): ``max_t`` is no budget, and
    #: only the rungs a trial may meet are shown.
    open_ended: bool = False

    @property
    def trial_epochs(self) -> float:
        """Expected epochs trained over the whole sweep (exact for FIFO and HyperBand)."""
        return sum(b.trial_epochs for b in self.brackets)

    @property
    def max_trial_epochs(self) -> int:
        """The epochs the sweep would train if no trial were stopped early."""
        return self.num_trials * self.max_t

    @property
    def rung_epochs(self) -> tuple[int, ...]:
        """The epochs at which some trials are compared and may be stopped, smallest first."""
        return tuple(sorted({r.epoch for b in self.brackets for r in b.rungs if r.epoch < self.max_t}))

    def describe(self) -> list[str]:
        """One line per bracket: ``epoch 1: 10 trials -> epoch 3: ~3.3 -> epoch 8: ~1.1``."""
        approx = "" if self.exact else "~"

        def count(n: float) -> str:
            return f"{n:g}" if float(n).is_integer() else f"{approx}{n:.1f}"

        lines = []
        for i, bracket in enumerate(self.brackets):
            label = f"bracket {i + 1}: " if len(self.brackets) > 1 else ""
            rungs: Sequence[Rung] = bracket.rungs
            more = ""
            if self.open_ended:  # up to the rung one trial is expected to pass; the rest go on alike
                shown = [r for r in rungs if r.epoch < self.max_t]
                last = next((k for k, r in enumerate(shown) if r.trials <= 1), len(shown) - 1)
                rungs = shown[: last + 1]
                more = f" -> ... (every x{self.eta_text} {self.unit}s, while the program logs)"
            steps = " -> ".join(f"{self.unit} {r.epoch}: {count(r.trials)}" for r in rungs)
            lines.append(f"{label}{steps} trial(s){more}")
        return lines

    @property
    def eta_text(self) -> str:
        """The factor between the first two rungs, as text (``3``)."""
        rungs = self.rung_epochs
        return f"{rungs[1] / rungs[0]:g}" if len(rungs) > 1 else "?"


def expected_schedule(scheduler: SchedulerSpec, num_trials: int, bohb: bool = False) -> Schedule:
    """The rung schedule of ``scheduler`` for ``num_trials`` trials (``bohb``: HyperBand-for-BOHB's order)."""
    unit, open_ended = scheduler.time_unit, scheduler.open_ended
    # These stop no trial: each trains max_t (under a population, some from another's weights).
    if scheduler.type in ("fifo", "pbt_replay") or scheduler.population:
        brackets: tuple[Bracket, ...] = (Bracket((Rung(scheduler.max_t, num_trials),)),)
        return Schedule(
            scheduler.type, num_trials, scheduler.max_t, brackets, exact=True, unit=unit, open_ended=open_ended
        )
    if scheduler.type == "asha":
        return Schedule(
            "asha",
            num_trials,
            scheduler.max_t,
            (_asha_bracket(scheduler, num_trials),),
            exact=False,
            unit=unit,
            open_ended=open_ended,
        )
    brackets = _hyperband_brackets(scheduler.max_t, scheduler.reduction_factor, num_trials, bohb)
    return Schedule("hyperband", num_trials, scheduler.max_t, brackets, exact=True, unit=unit, open_ended=open_ended)


def asha_milestones(grace_period: float, max_t: float, eta: float) -> list[float]:
    """ASHA's rung times, lowest first, counted as Ray's ASHA counts them (one bracket):
    ``grace_period * eta**k`` for as many ``k`` as fit, the last possibly at ``max_t``, which changes
    nothing (a trial ends there anyway). Both the plan and the scheduler
    (:class:`~tune_service.search.asha.PromotingASHA`) take them from here."""
    count = int(math.log(max_t / grace_period) / math.log(eta) + 1)
    return [grace_period * eta**k for k in range(count)]


def _asha_bracket(s: SchedulerSpec, num_trials: int) -> Bracket:
    eta = s.reduction_factor
    times = asha_milestones(s.grace_period, s.max_t, eta)
    milestones = sorted(m for m in {math.ceil(t - 1e-9) for t in times} if m < s.max_t)
    rungs = [Rung(m, _survivors(num_trials, eta, k)) for k, m in enumerate(milestones)]
    rungs.append(Rung(s.max_t, _survivors(num_trials, eta, len(milestones))))
    return Bracket(tuple(rungs))


def _survivors(num_trials: int, eta: float, rung: int) -> float:
    """Trials expected past ``rung`` comparisons: a fraction ``1/eta`` each time, never fewer than one."""
    return min(float(num_trials), max(1.0, num_trials / eta**rung))


def _hyperband_brackets(max_t: int, eta: float, num_trials: int, bohb: bool) -> tuple[Bracket, ...]:
    brackets_per_band = int(round(math.log(max_t) / math.log(eta))) + 1
    brackets: list[Bracket] = []
    left, position = num_trials, 0
    while left > 0:
        index = position % brackets_per_band
        position += 1
        s = brackets_per_band - index - 1 if bohb else index
        first_milestone = int(max_t * eta ** (-s))
        if first_milestone == 0:  # Ray skips a bracket whose first rung would be below one epoch
            continue
        planned = int(math.ceil(brackets_per_band / (s + 1) * eta**s))
        live = min(planned, left)
        left -= live
        brackets.append(_halving(live, planned, first_milestone, s, max_t, eta))
    return tuple(brackets)


def _halving(live: int, planned: int, milestone: int, halvings: int, max_t: int, eta: float) -> Bracket:
    """One bracket of Ray's synchronous successive halving: keep ``ceil(planned/eta)``, multiply the epochs."""
    rungs = [Rung(milestone, live)]
    for _ in range(halvings):
        planned = int(math.ceil(planned / eta))
        live = min(live, planned)
        milestone = int(min(milestone * eta, max_t))
        rungs.append(Rung(milestone, live))
    return Bracket(tuple(rungs))
