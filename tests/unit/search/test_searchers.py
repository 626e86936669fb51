"""The searcher wrapper every trial's config passes through: its concurrency cap counts running trials
only, so a trial that HyperBand paused at a rung leaves room for the next one of its bracket."""

from __future__ import annotations

from ray.tune.search import ConcurrencyLimiter

from tune_service.search import registry
from tune_service.search.wrappers import FidelityCorrected, RunningCap, innermost, layer_of
from tune_service.spec import load_spec


def trial_configs(method="random", cap=1):
    spec = load_spec({"method": method, "run_cap": 6, "parameters": {"lr": {"min": 0.01, "max": 0.1}}})
    searcher, _ = registry.build_searcher(spec)
    limiter = ConcurrencyLimiter(searcher, max_concurrent=cap)  # what Tune wraps it in for max_concurrent_trials
    return searcher, limiter


def test_the_cap_counts_running_trials_and_a_paused_trial_frees_its_slot():
    searcher, limiter = trial_configs(cap=1)
    assert limiter.suggest("a") is not None
    assert limiter.suggest("b") is None  # "a" runs: the cap is reached
    limiter.on_pause("a")  # HyperBand paused "a" at a rung: "b" may start and fill the bracket
    assert limiter.suggest("b") is not None
    limiter.on_unpause("a")
    limiter.on_trial_complete("b", {"val_loss": 1.0, "epoch": 1})
    assert limiter.suggest("c") is None  # "a" runs again
    limiter.on_trial_complete("a", {"val_loss": 1.0, "epoch": 3})
    assert limiter.suggest("c") is not None


def test_ray_concurrency_limiter_defers_to_the_wrapper():
    """With Ray's limiter counting too, a paused trial would still hold its slot (and no HyperBand
    bracket would ever fill at a cap below its size)."""
    searcher, limiter = trial_configs(cap=2)
    assert layer_of(searcher, RunningCap).max_concurrent == 2 and not limiter._limit_concurrency


def test_a_hyperband_bracket_stays_filled_when_its_trials_end():
    """Ray's bracket counts live trials, so once trials end, new ones would refill the first bracket
    and every trial would train to max_t."""
    for method in ("random", "bohb"):
        spec = load_spec({"method": method, "scheduler": {"type": "hyperband", "max_t": 9, "reduction_factor": 3}})
        bracket = registry.build_scheduler(spec)._create_bracket(2)  # 9 trials from epoch 1
        trials = [object() for _ in range(9)]
        for trial in trials:
            assert not bracket.filled()
            bracket.add_trial(trial)
        bracket.cleanup_trial(trials[0])
        assert bracket.filled()


def test_saving_writes_nothing_but_its_own_file_in_the_experiment_directory(tmp_path):
    """Tune copies the experiment's directory to storage while the sweep runs: a scratch file that
    appears and vanishes there fails the copy (an ERROR and a traceback in the console). The inner
    searcher's state is written elsewhere, and travels inside the one file Tune asked for."""
    from tune_service.search.searchers import GridSearch
    from tune_service.search.wrappers import trial_configs
    from tune_service.search.spaces import Decoder

    spec = load_spec({"method": "grid", "parameters": {"a": {"values": [1, 2, 3]}}})
    seen: list[str] = []

    class Watched(GridSearch):
        def save(self, checkpoint_path):
            seen.append(checkpoint_path)
            super().save(checkpoint_path)

    searcher = trial_configs(Watched(spec.parameters), Decoder(spec.parameters), "loss", "min")
    searcher.suggest("t1")
    state = tmp_path / "searcher-state.pkl"
    searcher.save(str(state))
    assert [p for p in seen if p.startswith(str(tmp_path))] == [] and list(tmp_path.iterdir()) == [state]
    restored = trial_configs(GridSearch(spec.parameters), Decoder(spec.parameters), "loss", "min")
    restored.restore(str(state))
    assert restored.suggest("t2") == {"a": 2} and list(tmp_path.iterdir()) == [state]


def _hyperopt_under(scheduler: str, mode: str = "min"):
    spec = load_spec({"method": "bayes", "run_cap": 8, "metric": {"name": "val_loss", "goal": f"{mode}imize"},
                      "parameters": {"lr": {"min": 0.01, "max": 0.1}},
                      "scheduler": {"type": scheduler, "max_t": 9}})
    searcher, _ = registry.build_searcher(spec)
    return searcher, _heard_by_inner(searcher)


def _heard_by_inner(searcher) -> dict[str, float]:
    """What the inner searcher hears of each finished trial, from now on."""
    heard: dict[str, float] = {}
    model = innermost(searcher)
    inner_complete = type(model).on_trial_complete

    class Listening(type(model)):
        def on_trial_complete(self, trial_id, result=None, error=False):
            heard[trial_id] = result["val_loss"]
            inner_complete(self, trial_id, result=result, error=error)

    model.__class__ = Listening
    return heard


def test_tpe_hears_a_stopped_trial_as_no_better_than_the_worst_trial_that_ran_its_budget(tmp_path):
    """A stopped trial's value is its last rung's, a lower fidelity: TPE must not rank it above a trial
    measured at the full budget (Optuna ranks pruned trials after every completed one)."""
    searcher, heard = _hyperopt_under("asha")
    for trial_id in "abcde":
        searcher.suggest(trial_id)
    searcher.on_trial_complete("a", {"val_loss": 0.9, "epoch": 1})  # stopped before any trial completed
    searcher.on_trial_complete("b", {"val_loss": 0.5, "epoch": 9})
    searcher.on_trial_complete("c", {"val_loss": 0.7, "epoch": 9})
    searcher.on_trial_complete("d", {"val_loss": 0.2, "epoch": 3})  # stopped at a rung, looked good there
    searcher.on_trial_complete("e", {"val_loss": 1.5, "epoch": 1})  # stopped, worse than any completed
    assert heard == {"a": 0.9, "b": 0.5, "c": 0.7, "d": 0.7, "e": 1.5}
    # The worst completed value survives a resume.
    state = tmp_path / "searcher-state.pkl"
    searcher.save(str(state))
    resumed, _ = _hyperopt_under("asha")
    resumed.restore(str(state))
    heard_after = _heard_by_inner(resumed)
    resumed.suggest("f")
    resumed.on_trial_complete("f", {"val_loss": 0.1, "epoch": 1})
    assert heard_after == {"f": 0.7}


def test_a_maximised_metric_is_capped_from_below_and_fifo_or_bohb_hear_the_raw_value():
    searcher, heard = _hyperopt_under("asha", mode="max")
    for trial_id in "ab":
        searcher.suggest(trial_id)
    searcher.on_trial_complete("a", {"val_loss": 0.5, "epoch": 9})
    searcher.on_trial_complete("b", {"val_loss": 0.8, "epoch": 3})
    assert heard == {"a": 0.5, "b": 0.5}
    fifo, _ = _hyperopt_under("fifo")
    assert layer_of(fifo, FidelityCorrected).budget is None  # under FIFO a trial short of max_t ended by itself
    bohb, _ = registry.build_searcher(load_spec({"method": "bohb", "parameters": {"lr": {"min": 0.01, "max": 0.1}}}))
    assert layer_of(bohb, FidelityCorrected).budget is None  # BOHB models the budgets itself


def _optuna_under(scheduler: str):
    spec = load_spec({"method": "optuna", "metric": {"name": "val_loss", "goal": "minimize"},
                      "parameters": {"lr": {"min": 0.01, "max": 0.1}},
                      "scheduler": {"type": scheduler, "max_t": 9}})
    searcher, _ = registry.build_searcher(spec)
    searcher.set_search_properties("val_loss", "min", {})
    return searcher


def test_optuna_hears_a_stopped_trial_as_pruned_at_its_last_epoch_and_a_completed_one_as_complete():
    """As Optuna's own pruners end a trial: its TPE ranks pruned trials after every completed one, by how
    far they got and then by their last value."""
    from optuna.trial import TrialState

    searcher = _optuna_under("asha")
    for trial_id in "abc":
        searcher.suggest(trial_id)
    searcher.on_trial_result("a", {"val_loss": 0.9, "epoch": 1, "training_iteration": 1})
    searcher.on_trial_complete("a", {"val_loss": 0.8, "epoch": 2, "training_iteration": 2})  # stopped at epoch 2
    searcher.on_trial_complete("b", {"val_loss": 0.5, "epoch": 9, "training_iteration": 9})
    searcher.on_trial_complete("c", {"val_loss": 1.0, "epoch": 1, "training_iteration": 1}, error=True)
    a, b, c = innermost(searcher)._ot_study.get_trials(deepcopy=False)
    assert (a.state, a.intermediate_values) == (TrialState.PRUNED, {1: 0.9, 2: 0.8})
    assert (b.state, b.value) == (TrialState.COMPLETE, 0.5)
    assert c.state == TrialState.FAIL
    assert layer_of(_optuna_under("fifo"), FidelityCorrected).budget is None  # under FIFO a short trial ended by itself: complete


def test_a_trial_whose_metric_is_not_finite_is_a_failed_point_to_the_searcher_never_a_value():
    """A NaN told to TPE as a value would be compared with every other (and become the worst completed
    value a stopped trial is capped at): it is told as a failed trial instead."""
    searcher, heard = _hyperopt_under("asha")
    errors: list[str] = []
    listening = type(innermost(searcher))

    class Failing(listening):
        def on_trial_complete(self, trial_id, result=None, error=False):
            if error:
                errors.append(trial_id)
                return
            listening.on_trial_complete(self, trial_id, result=result, error=error)

    innermost(searcher).__class__ = Failing
    for trial_id in "ab":
        searcher.suggest(trial_id)
    searcher.on_trial_complete("a", {"val_loss": float("nan"), "epoch": 9})
    searcher.on_trial_complete("b", {"val_loss": 0.5, "epoch": 9})
    assert errors == ["a"] and heard == {"b": 0.5} and layer_of(searcher, FidelityCorrected).worst_completed == {"val_loss": 0.5}


def test_optunas_tpe_is_built_with_its_settings_stated_not_left_to_the_installed_major():
    """Optuna 5 made multivariate TPE with the constant liar its default; Optuna 4 uses neither. The
    extra allows both majors, so the sampler says which it is (Optuna's own attributes, read here only)."""
    sampler = innermost(_optuna_under("asha"))._sampler
    assert (sampler._multivariate, sampler._constant_liar) == (True, True)
