"""ContinuedSearch: the SearchGenerator of a resumed sweep, whose restored state takes the sweep's
run_cap now (tests/integration/test_continued_sweeps.py runs one on a real Ray)."""

from __future__ import annotations

from ray.tune.search import ConcurrencyLimiter, SearchGenerator

from tune_service.search.continued import ContinuedSearch, EndedTrial
from tune_service.search.searchers import RandomSearch
from tune_service.spec import load_spec


def searcher():
    return RandomSearch(load_spec({"parameters": {"lr": {"min": 0.0, "max": 1.0}}}).parameters, seed=0)


def test_tunes_search_generator_saves_the_state_keys_a_continued_search_sets():
    assert set(ContinuedSearch.STATE_KEYS) <= set(SearchGenerator(searcher()).get_state())


def test_a_continued_search_goes_on_to_its_new_total_and_never_below_the_trials_made():
    finished = {"counter": 3, "total_samples": 3, "finished": False, "experiment": None}
    more = ContinuedSearch(searcher(), total=5, max_concurrent=2)
    more.set_state(finished)
    assert more.total_samples == 5 and not more.is_finished()
    assert isinstance(more.searcher, ConcurrencyLimiter) and more.searcher.max_concurrent == 2
    done = ContinuedSearch(searcher(), total=5, max_concurrent=None)
    done.set_state({**finished, "finished": True})  # the searcher had said it was done: asked again
    assert not done.is_finished()
    fewer = ContinuedSearch(searcher(), total=2, max_concurrent=None)
    fewer.set_state(finished)
    assert fewer.total_samples == 3 and fewer.is_finished()
    same = ContinuedSearch(searcher(), total=3, max_concurrent=None)
    same.set_state({**finished, "finished": True})
    assert same.is_finished()  # a grid walked whole stays done


def test_a_resumed_searcher_counts_as_running_only_the_trials_tune_restored_unfinished(tmp_path):
    """The searcher's state saved with trial t2 running (it ended before Tune's state was saved): on the
    resume Tune has t2 ended and t3 to resume. Left as saved, the cap of one stays full after t3 ends, and
    the searcher suggests nothing again while Tune waits on it; reconciled, it goes on."""
    from ray.tune.experiment import Trial

    from tune_service.search.continued import RunningTrialsReconciled
    from tune_service.search.registry import build_searcher

    def stack():
        built, _ = build_searcher(load_spec({"method": "random", "run_cap": 10, "parameters": {"lr": {"min": 0.0, "max": 1.0}},
                                             "scheduler": {"type": "fifo", "max_t": 1}}))
        built.set_max_concurrency(1)
        return built

    saved = stack()
    for i in range(3):
        saved.suggest(f"t{i}")
        if i < 2:
            saved.on_trial_complete(f"t{i}", {"val_loss": 1.0})
    saved.save(str(tmp_path / "searcher"))  # t2 running

    def restored_trials():
        trials = [Trial("run_trial", trial_id=f"t{i}", stub=True) for i in range(4)]
        for trial in trials[:3]:
            trial.set_status(Trial.TERMINATED)  # t2 ended after the searcher's state was saved
        return trials  # t3 (which the searcher never saw) resumes: PENDING

    for reconcile in (False, True):
        resumed = stack()
        resumed.restore(str(tmp_path / "searcher"))
        if reconcile:
            reconciled = RunningTrialsReconciled("test/running", resumed)
            reconciled.on_step_begin(0, restored_trials())
            reconciled.release()
        resumed.on_trial_complete("t3", {"val_loss": 0.5})  # the resumed trial ends
        suggested = resumed.suggest("t4")
        assert (suggested is not None) == reconcile  # without: the cap stays full of t2 for good


def test_trials_that_ended_after_the_saved_state_are_rolled_forward_not_created_again(caplog):
    """Trials 1 and 2 ended after the state was saved (it counted none): the restored searcher suggests each
    again and hears it ended, and Tune's count takes them; trial 2's config is not what the searcher
    suggests now, so it is told that one failed, with a warning. Nothing is created for either."""
    import logging

    first = searcher().suggest("a")
    ended = {1: EndedTrial("t1", first, ({"lr": first["lr"], "val_loss": 0.5},)), 2: EndedTrial("t2", {"lr": 5.0}, ())}
    resumed = ContinuedSearch(searcher(), total=2, max_concurrent=None, ended=ended)
    resumed.set_state({"counter": 0, "total_samples": 2, "finished": False, "experiment": None})
    with caplog.at_level(logging.WARNING, logger="tune_service.search.continued"):
        assert resumed.create_trial_if_possible({}) is None  # both rolled forward, the total reached
    assert resumed.rolled_forward == [1, 2] and resumed.get_state()["counter"] == 2 and resumed.is_finished()
    assert [r.message.split(" ended")[0] for r in caplog.records] == ["resume: trial 2"]
    uninterrupted = searcher()
    suggested = [uninterrupted.suggest(trial_id) for trial_id in ("a", "b", "c")]
    assert resumed.searcher.suggest("next") == suggested[2]  # it suggested twice, as it had


def test_a_roll_forward_waits_while_the_searchers_cap_is_full():
    ended = {2: EndedTrial("t2", {"lr": 0.1}, ())}
    resumed = ContinuedSearch(searcher(), total=2, max_concurrent=1, ended=ended)
    resumed.set_state({"counter": 1, "total_samples": 2, "finished": False, "experiment": None})
    resumed.searcher.suggest("restored")  # trial 1, restored unfinished, holds the one slot
    assert resumed.create_trial_if_possible({}) is None and resumed.rolled_forward == []
    resumed.on_trial_complete("restored", {"val_loss": 1.0})
    assert resumed.create_trial_if_possible({}) is None and resumed.rolled_forward == [2]
