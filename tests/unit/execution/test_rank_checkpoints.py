"""What a warm gang's ranks are handed to start from: a checkpoint on the local filesystem as its path,
so that a rank never imports Ray Train to unpickle a ``ray.train.Checkpoint`` (0.7 s of a core, 2-3 s of a
PBT exploit on a node busy with other trials' ranks); one on other storage as the Checkpoint itself,
which fetches its files."""

from __future__ import annotations

import ray.train
from pyarrow import fs

from tune_service.execution.gang import checkpoint_for_ranks


def test_a_local_checkpoint_reaches_the_ranks_as_its_path_and_a_remote_one_as_itself(tmp_path):
    local = ray.train.Checkpoint(path=str(tmp_path), filesystem=fs.LocalFileSystem())
    assert checkpoint_for_ranks(local) == str(tmp_path)
    remote = ray.train.Checkpoint(path="bucket/experiment/trial/checkpoint_000001",
                                  filesystem=fs.S3FileSystem(anonymous=True, region="us-east-1"))
    assert checkpoint_for_ranks(remote) is remote
    assert checkpoint_for_ranks(None) is None and checkpoint_for_ranks(str(tmp_path)) == str(tmp_path)
