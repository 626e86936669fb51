"""PopulationSearch: the search of a sweep whose scheduler pauses trials and runs them again, finished for
Tune only once every trial it made has ended, so that Tune keeps a paused trial's actor (and warm gang)
for it. tests/integration/test_pbt_sweeps.py runs a population on a real Ray and counts its rank processes."""

from __future__ import annotations

from ray.tune.experiment import Experiment

from tune_service.search.continued import ContinuedSearch
from tune_service.search.population_search import PopulationSearch
from tune_service.search.searchers import RandomSearch
from tune_service.spec import load_spec


def trainable(config):
    pass


def population_search(tmp_path, total: int = 2) -> PopulationSearch:
    searcher = RandomSearch(load_spec({"parameters": {"lr": {"min": 0.0, "max": 1.0}}}).parameters, seed=0)
    search = PopulationSearch(searcher, total, max_concurrent=total)
    search.add_configurations([Experiment("population", trainable, num_samples=total, storage_path=str(tmp_path))])
    return search


def test_the_search_of_a_population_goes_on_until_every_trial_it_made_has_ended(tmp_path):
    search = population_search(tmp_path)
    first, second = search.next_trial(), search.next_trial()
    assert first is not None and second is not None
    # Tune's own search would be finished now: it makes no more trials, and Tune would end the actor of
    # a trial it pauses instead of keeping it for the trial's next start.
    assert search.made_all() and ContinuedSearch.is_finished(search)
    assert search.next_trial() is None and not search.is_finished()
    search.on_trial_complete(first.trial_id, result={"val_loss": 1.0})
    assert not search.is_finished()
    search.on_trial_complete(second.trial_id, error=True)  # a failed trial has ended too
    assert search.is_finished()


def test_a_restored_population_search_waits_for_the_trials_that_had_not_ended(tmp_path):
    search = population_search(tmp_path)
    first, second = search.next_trial(), search.next_trial()
    search.on_trial_complete(first.trial_id)
    state = search.get_state()
    restored = population_search(tmp_path)
    restored.set_state(state)
    assert restored.made_all() and not restored.is_finished()
    restored.on_trial_complete(second.trial_id)  # requeued by the resume, then ended
    assert restored.is_finished()
