"""The searcher wrapper every trial's config passes through: its concurrency cap counts running trials
only, so a trial that HyperBand paused at a rung leaves room for the next one of its bracket."""

from __future__ import annotations

from ray.tune.search import ConcurrencyLimiter

from tune_service.search import registry
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
    assert searcher.max_concurrent == 2 and not limiter._limit_concurrency


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
    from tune_service.search.searchers import GridSearch, TrialConfigs
    from tune_service.search.spaces import Decoder

    spec = load_spec({"method": "grid", "parameters": {"a": {"values": [1, 2, 3]}}})
    seen: list[str] = []

    class Watched(GridSearch):
        def save(self, checkpoint_path):
            seen.append(checkpoint_path)
            super().save(checkpoint_path)

    searcher = TrialConfigs(Watched(spec.parameters), Decoder(spec.parameters), "loss", "min")
    searcher.suggest("t1")
    state = tmp_path / "searcher-state.pkl"
    searcher.save(str(state))
    assert [p for p in seen if p.startswith(str(tmp_path))] == [] and list(tmp_path.iterdir()) == [state]
    restored = TrialConfigs(GridSearch(spec.parameters), Decoder(spec.parameters), "loss", "min")
    restored.restore(str(state))
    assert restored.suggest("t2") == {"a": 2} and list(tmp_path.iterdir()) == [state]
