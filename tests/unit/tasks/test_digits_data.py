"""The digits split that ships with tune_service (tune_service/tasks/data/digits.npz) is scikit-learn's
own data, split as the module's docstring says."""

from __future__ import annotations

import numpy as np
import torch

from tune_service.tasks.digits import SPLIT_SEED, VALIDATION_FRACTION, load_digits_tensors


def test_the_shipped_split_is_scikit_learns_digits_split_stratified_with_the_fixed_seed():
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    data = load_digits()
    x_train, x_val, y_train, y_val = train_test_split(data.data, data.target, test_size=VALIDATION_FRACTION,
                                                      stratify=data.target, random_state=SPLIT_SEED)
    train, validation = load_digits_tensors()
    for shipped, (x, y) in ((train, (x_train, y_train)), (validation, (x_val, y_val))):
        inputs, targets = shipped.tensors
        assert inputs.dtype == torch.float32 and targets.dtype == torch.long
        np.testing.assert_array_equal(inputs.numpy(), (x / 16.0).astype(np.float32))
        np.testing.assert_array_equal(targets.numpy(), y)
    assert len(train) + len(validation) == 1797
