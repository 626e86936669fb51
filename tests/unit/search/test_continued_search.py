"""ContinuedSearch: the SearchGenerator of a resumed sweep, whose restored state takes the sweep's
run_cap now (tests/integration/test_continued_sweeps.py runs one on a real Ray)."""

from __future__ import annotations

from ray.tune.search import ConcurrencyLimiter, SearchGenerator

from tune_service.search.continued import ContinuedSearch
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
