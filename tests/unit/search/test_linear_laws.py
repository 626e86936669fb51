"""The uniform and log-uniform laws the random searcher samples by inverse CDF are computed without
scipy.stats (1.2 s to import, before a sweep's first trial can start), exactly as scipy.stats does."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from tune_service.spec.parameters import LinearLaw


@pytest.mark.parametrize("low, high, log", [(0.0, 1.0, False), (-3.0, 7.5, False), (1e-5, 0.1, True),
                                            (2.0, 2000.0, True), (2.0, 2000.0, False)])
def test_linear_laws_are_scipys_uniform_and_loguniform_to_the_bit(low, high, log):
    ours = LinearLaw(low, high, log=log)
    scipys = stats.loguniform(low, high) if log else stats.uniform(low, high - low)
    points = np.concatenate([np.linspace(low, high, 101), [low - 1e-3 if not log else low / 2, high * 2]])
    quantiles = np.random.default_rng(0).uniform(size=1000)
    np.testing.assert_array_equal(ours.cdf(points), scipys.cdf(points))
    np.testing.assert_array_equal(ours.ppf(quantiles), scipys.ppf(quantiles))
    assert float(ours.cdf(low)) == 0.0 and float(ours.cdf(high)) == 1.0


def test_sampling_a_uniform_space_does_not_import_scipy_stats():
    import subprocess
    import sys

    code = ("import sys, numpy; from tune_service.spec import load_spec; from tune_service.search.spaces import sample_flat; "
            "spec = load_spec({'parameters': {'lr': {'min': 1e-4, 'max': 1e-1, 'distribution': 'log_uniform_values'}, "
            "'x': {'min': 0.0, 'max': 1.0}}}); "
            "sample_flat(spec.parameters, numpy.random.default_rng(0)); print('scipy.stats' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "False"
