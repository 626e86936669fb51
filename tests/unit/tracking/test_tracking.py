"""The wandb block and the tracker's pure parts: modes, run ids and names, callbacks that survive a resume."""

from __future__ import annotations

import pickle
import re
from types import SimpleNamespace

from ray.tune import Callback

from tune_service.experiment.callbacks import DriverCallback
from tune_service.spec import load_spec
from tune_service.spec.wandb import WandbSettings, resolve_mode
from tune_service.experiment.layout import trial_number
from tune_service.tracking.naming import run_id, run_name, trial_metrics


def spec(**raw):
    return load_spec({"parameters": {"lr": {"values": [0.1]}}, **raw})


def test_the_wandb_block_and_w_and_b_top_level_project_and_entity():
    assert spec().wandb == WandbSettings()
    s = spec(project="top", entity="team", wandb={"group": "g", "tags": "one", "mode": "offline",
                                                   "log_checkpoints": True, "init_timeout": "30"})
    assert s.wandb == WandbSettings(project="top", entity="team", group="g", tags=("one",), mode="offline",
                                    log_checkpoints=True, init_timeout=30.0)
    assert spec(project="top", wandb={"project": "mine"}).wandb.project == "mine"  # the block wins


def test_auto_mode_is_online_only_with_an_api_key(tmp_path):
    no_netrc = {"NETRC": str(tmp_path / "absent")}
    assert resolve_mode("auto", no_netrc) == "offline"
    assert resolve_mode("auto", {**no_netrc, "WANDB_API_KEY": "k" * 40}) == "online"
    assert resolve_mode("auto", {**no_netrc, "WANDB_API_KEY": "k" * 40, "WANDB_MODE": "offline"}) == "offline"
    assert resolve_mode("auto", {**no_netrc, "WANDB_MODE": "dryrun"}) == "offline"
    assert resolve_mode("disabled", {"WANDB_API_KEY": "k" * 40}) == "disabled"  # the spec's choice wins
    netrc = tmp_path / "netrc"
    netrc.write_text("machine api.wandb.ai\n  login user\n  password " + "p" * 40 + "\n")
    netrc.chmod(0o600)
    assert resolve_mode("auto", {"NETRC": str(netrc)}) == "online"  # after `wandb login`


def test_run_ids_are_stable_valid_and_distinct_per_experiment_and_trial():
    assert run_id("quick-20261122-101500", "ab12_00003") == "quick-20261122-101500-ab12_00003"
    assert run_id("quick-20261122-101500", "ab12_00003") == run_id("quick-20261122-101500", "ab12_00003")
    odd = run_id("my sweep/ä" + "x" * 60, "t1")
    assert re.fullmatch(r"[A-Za-z0-9_-]{1,64}", odd)
    assert odd != run_id("my sweep/ö" + "x" * 60, "t1")  # shortened names keep a digest of the full one


def test_run_names_carry_the_trial_number_and_key_parameters():
    trial = SimpleNamespace(experiment_tag="3_lr=0.0031,model=cnn", trial_id="f2985e28")
    assert trial_number(trial) == 3
    config = {"lr": 0.0031234, "model": "cnn", "optim": {"beta": 0.9}}
    assert run_name(3, "f2985e28", config, ["lr", "model", "optim.beta"]) == "#003 lr=0.00312 model=cnn optim.beta=0.9"
    assert run_name(None, "f2985e28", config, []) == "f2985e28"


def test_trial_metrics_leave_out_tune_bookkeeping_and_text():
    result = {"val_loss": 0.5, "epoch": 2, "precision": "fp32", "training_iteration": 2, "done": False,
              "time_total_s": 3.0, "config": {"lr": 0.1}}
    assert trial_metrics(result) == {"val_loss": 0.5, "epoch": 2}


class Recorder(DriverCallback):
    pass


def test_driver_callbacks_pickle_as_a_reference_to_the_live_one():
    live = Recorder("exp/recorder")
    try:
        assert pickle.loads(pickle.dumps(live)) is live  # what Tuner.restore gets back: the resuming driver's
    finally:
        live.release()
    stale = pickle.loads(pickle.dumps(live))
    assert type(stale) is Callback  # nobody registered: a no-op, never a copy without its threads
