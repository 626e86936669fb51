"""A user's task module that exists only here: a submitted sweep gets it through its Ray Job's runtime
environment (``working_dir``), as a user's own code would reach a cluster.

``NodeDigits`` is the digits task whose every rank, as its trial starts, records where it runs: one
empty file ``record_dir/trial=T-rank=R-node=NODE_ID-pid=PID`` (T: the trial's ``tag``). With
``epoch_sleep_s``, each training batch waits that long spread over the epoch, so a test can stop a sweep
while a trial trains.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from tune_service.tasks.digits import Digits


class NodeDigits(Digits):
    hyperparameters = (*Digits.defaults, "record_dir", "tag", "epoch_sleep_s")

    def model(self, config):
        import ray
        import torch.distributed as dist

        node = ray.get_runtime_context().get_node_id()
        record = f"trial={config['tag']}-rank={dist.get_rank()}-node={node}-pid={os.getpid()}"
        (Path(config["record_dir"]) / record).touch()
        return super().model(config)

    def augment(self, inputs, targets, config):
        if config.get("epoch_sleep_s"):
            time.sleep(float(config["epoch_sleep_s"]) / 20)  # about 20 batches a rank per epoch
        return super().augment(inputs, targets, config)
