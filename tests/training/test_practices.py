"""Every row of PRACTICES.md, each shown on the real shared loop: real gloo DDP processes for the
world-2 rows (no Ray, no mocks), the loop in-process for the rest. Each test names its row, and fails
when that practice is taken out of the loop (see the closing notes of issue 3 for how that was checked).
"""

from __future__ import annotations

import json
import math

import pytest
import torch
from torch.optim.optimizer import register_optimizer_step_post_hook, register_optimizer_step_pre_hook
from torch.utils.data import DataLoader, Subset, TensorDataset

from ddp_harness import run_ranks
from recording_tasks import (
    ODD_VALIDATION_SIZE, IndexedTask, OutOfMemoryDigits, OutOfMemoryModel, OverflowingDigits, RecordingDigits,
    resolved,
)
from tune_service import load_model
from tune_service.tasks.base import TIMED_REPORTS
from tune_service.tasks.digits import Digits
from tune_service.training import LocalContext, TrainingSettings, TrialOutOfMemory, evaluate, fit, load_state
from tune_service.training.data import (
    BatchPlan, build_loaders, loader_settings, plan_batches, steps_per_epoch,
)
from tune_service.training.distributed import RankInfo, seed_everything
from tune_service.training.loop import TrialConfig, setup_run, train_one_epoch
from tune_service.spec.training import ScheduleSettings
from tune_service.training.optim import LearningRateSchedule
from tune_service.training.precision import Precision
from tune_service.training.profiling import TRACE_FILE
from tune_service.training.wrapping import convert_batchnorm, prepare_model

CPU = torch.device("cpu")


def digits_config(task=None, epochs=1, settings=None, **hparams) -> TrialConfig:
    task = task or Digits()
    return TrialConfig(resolved(task), {**Digits.defaults, **hparams}, epochs=epochs, seed=0,
                       settings=settings or TrainingSettings())


@pytest.fixture(scope="module")
def world_two(tmp_path_factory):
    """One 2-rank trial (2 epochs, 2-step accumulation, per-rank batch 32) and what each rank recorded."""
    workdir = tmp_path_factory.mktemp("world_two")
    ranks = run_ranks("recording_tasks:world_two_session", 2, workdir, output_dir=str(workdir / "trial"))
    return {"ranks": ranks, "dir": workdir / "trial"}


# 1 ------------------------------------------------------------------------------------------------
def test_1_ddp_ranks_are_processes_with_identical_parameters_after_every_step(world_two):
    r0, r1 = world_two["ranks"]
    assert (r0["rank"], r1["rank"]) == (0, 1) and r0["pid"] != r1["pid"]
    p0, p1 = r0["record"]["params"], r1["record"]["params"]
    assert len(p0) == len(p1) > 10
    assert all(torch.equal(a, b) for a, b in zip(p0, p1))
    assert not torch.equal(p0[0], p0[-1])  # and they did train


# 2 ------------------------------------------------------------------------------------------------
def test_2_sampler_shards_are_disjoint_cover_the_data_and_the_loop_reshuffles_every_epoch():
    data = TensorDataset(torch.arange(100), torch.zeros(100, dtype=torch.long))
    plan = plan_batches(10, 2)
    shards = [[int(i) for x, _ in build_loaders(data, data, plan, RankInfo(r, 2), seed=0).train for i in x]
              for r in range(2)]
    assert set(shards[0]).isdisjoint(shards[1]) and sorted(shards[0] + shards[1]) == list(range(100))

    task = IndexedTask()
    run = setup_run(digits_config(task, batch_size=10), LocalContext())
    for epoch in (1, 2):
        task.seen.append([])
        train_one_epoch(run, epoch)
    first, second = task.seen
    assert sorted(first) == sorted(second) == list(range(100))
    assert first != second  # set_epoch gave a new order


# 3 ------------------------------------------------------------------------------------------------
def test_3_batch_size_is_global_and_steps_per_epoch_follow_the_formula(world_two):
    assert plan_batches(64, 1) == BatchPlan(64, 64, 64, 1) and plan_batches(64, 2).micro == 32
    assert plan_batches(64, 2, grad_accum_steps=2) == BatchPlan(64, 32, 16, 2)
    assert plan_batches(32, 2, scope="per_rank") == BatchPlan(64, 32, 32, 1)
    # 1437 training images, global batch 64: the same 23 optimizer steps at world 1 and 2
    assert steps_per_epoch(1437, plan_batches(64, 1), 1) == steps_per_epoch(1437, plan_batches(64, 2), 2) == 23

    steps = []
    hook = register_optimizer_step_post_hook(lambda *a: steps.append(1))
    try:
        fit(digits_config(epochs=1, batch_size=64), LocalContext())
    finally:
        hook.remove()
    assert len(steps) == 23
    # world 2, per-rank batch 32 in 2 micro-batches of 16, 2 epochs: ceil(ceil(719 / 16) / 2) = 23 per epoch
    r0 = world_two["ranks"][0]
    assert r0["optimizer_steps"] == 2 * steps_per_epoch(1437, plan_batches(32, 2, 2, "per_rank"), 2) == 46


# 4 ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("cpus, expected", [(1, 0), (2, 1), (5, 4), (16, 4)])
def test_4_loader_workers_follow_the_ranks_cpus_on_gpu_and_are_in_process_on_cpu(cpus, expected):
    auto = TrainingSettings()
    gpu = loader_settings(auto, torch.device("cuda", 0), cpus)
    assert (gpu.num_workers, gpu.pin_memory, gpu.persistent_workers) == (expected, True, expected > 0)
    assert loader_settings(auto, CPU, cpus).num_workers == 0 and not loader_settings(auto, CPU, cpus).pin_memory
    assert loader_settings(TrainingSettings(num_workers=3, pin_memory=False), torch.device("cuda", 0), cpus).num_workers == 3


def test_4_loaders_are_built_with_those_settings():
    data = TensorDataset(torch.arange(10), torch.zeros(10, dtype=torch.long))
    settings = loader_settings(TrainingSettings(num_workers=2), CPU, 3)
    loaders = build_loaders(data, data, plan_batches(4, 1), RankInfo(0, 1), 0, settings)
    for loader in (loaders.train, loaders.validation):
        assert (loader.num_workers, loader.persistent_workers) == (2, True)


@pytest.mark.gpu
def test_4_batches_arrive_pinned_on_cuda():
    data = TensorDataset(torch.randn(64, 8), torch.zeros(64, dtype=torch.long))
    cuda = torch.device("cuda", 0)
    loaders = build_loaders(data, data, plan_batches(16, 1), RankInfo(0, 1), 0, loader_settings(TrainingSettings(), cuda, 4))
    inputs, _ = next(iter(loaders.train))
    assert inputs.is_pinned()


# 5 ------------------------------------------------------------------------------------------------
def test_5_bf16_autocast_runs_on_cpu_with_the_loss_in_fp32():
    task = RecordingDigits()
    context = LocalContext()
    fit(digits_config(task, settings=TrainingSettings(precision="bf16")), context)
    assert set(task.record["autocast"]) == {(True, torch.bfloat16)}
    assert set(task.record["loss_dtypes"]) == {torch.float32}
    assert context.reports[0]["precision"] == "bf16"


def test_5_auto_precision_is_fp32_on_cpu_and_reported():
    context = LocalContext()
    fit(digits_config(), context)
    assert context.reports[0]["precision"] == "fp32"


def test_5_an_fp16_overflow_skips_the_step_instead_of_writing_inf_into_the_weights(tmp_path):
    task = OverflowingDigits()
    fit(digits_config(task, settings=TrainingSettings(precision="fp16")), LocalContext(output_dir=tmp_path))
    state = load_state(tmp_path / "checkpoints" / "epoch_0001")
    seed_everything(0)
    initial = task.model(Digits.defaults).state_dict()
    assert all(torch.equal(state["model"][k], v) for k, v in initial.items())  # every step was skipped
    assert state["scaler"]["scale"] < 2.0**16  # and the scale backed off


def test_5_the_grad_scaler_state_is_saved_and_restored(tmp_path):
    settings = TrainingSettings(precision="fp16")
    fit(digits_config(OverflowingDigits(), epochs=2, settings=settings), LocalContext(output_dir=tmp_path / "once"))
    resumed = tmp_path / "resumed"
    fit(digits_config(OverflowingDigits(), epochs=1, settings=settings), LocalContext(output_dir=resumed))
    fit(digits_config(OverflowingDigits(), epochs=2, settings=settings), LocalContext(output_dir=resumed))
    straight = load_state(tmp_path / "once" / "checkpoints" / "epoch_0002")["scaler"]["scale"]
    assert load_state(resumed / "checkpoints" / "epoch_0002")["scaler"]["scale"] == straight


# 6, 7 ---------------------------------------------------------------------------------------------
def test_6_no_host_sync_per_step(monkeypatch):
    syncs = []
    for name in ("item", "tolist", "cpu", "numpy", "__bool__", "__float__", "__int__"):
        original = getattr(torch.Tensor, name)

        def counted(self, *args, _original=original, **kwargs):
            syncs.append(1)
            return _original(self, *args, **kwargs)
        monkeypatch.setattr(torch.Tensor, name, counted)
    settings = TrainingSettings(checkpoint_every=0)
    # SGD: Adam reads its (host-side) step counter with .item() every step, which is not a device sync
    context = LocalContext()
    fit(digits_config(epochs=2, settings=settings, batch_size=16, optimizer="sgd"), context)
    monkeypatch.undo()
    steps = 2 * steps_per_epoch(1437, plan_batches(16, 1), 1)
    # per epoch: 2 loader iterators draw a CPU seed, the sampler's permutation, the train and val totals
    assert steps == 180 and len(syncs) <= 2 * 5


# 8 ------------------------------------------------------------------------------------------------
def test_8_batchnorm_becomes_syncbatchnorm_on_gpu_ranks_and_not_when_switched_off():
    def has_sync_bn(model):
        return any(isinstance(m, torch.nn.SyncBatchNorm) for m in model.modules())

    def cnn():
        return Digits().model({**Digits.defaults, "model": "cnn"})
    cuda = torch.device("cuda", 0)
    assert has_sync_bn(convert_batchnorm(cnn(), "auto", cuda, 2)) and has_sync_bn(convert_batchnorm(cnn(), True, CPU, 2))
    assert not has_sync_bn(convert_batchnorm(cnn(), False, cuda, 2))
    assert not has_sync_bn(convert_batchnorm(cnn(), "auto", cuda, 1))  # nothing to synchronise with
    assert not has_sync_bn(convert_batchnorm(cnn(), "auto", CPU, 2))  # PyTorch's SyncBatchNorm needs GPUs
    # a CPU world-2 trial of the BN CNN therefore trains with plain BatchNorm (and DDP accepts it)
    assert not has_sync_bn(prepare_model(cnn(), CPU, 1, TrainingSettings()).module)


# 9 ------------------------------------------------------------------------------------------------
def test_9_same_seed_same_config_gives_identical_metrics():
    runs = []
    for _ in range(2):
        context = LocalContext()
        fit(digits_config(epochs=1, dropout=0.2, noise=0.1), context)
        runs.append({k: v for k, v in context.reports[0].items() if k not in TIMED_REPORTS})
    assert runs[0] == runs[1]


def test_9_ranks_start_from_the_same_weights_but_draw_different_augmentation(world_two):
    r0, r1 = world_two["ranks"]
    assert torch.equal(r0["record"]["params"][0], r1["record"]["params"][0])
    d0, d1 = (torch.stack(r["record"]["draws"]) for r in (r0, r1))
    assert d0.shape == d1.shape and not torch.equal(d0, d1)
    epoch_1, epoch_2 = d0.split(len(d0) // 2)
    assert not torch.equal(epoch_1, epoch_2)  # and different draws every epoch


# 10 -----------------------------------------------------------------------------------------------
def test_10_rank_zero_checkpoint_loads_into_a_plain_model(world_two):
    checkpoint = world_two["dir"] / "checkpoints" / "epoch_0002"
    state = load_state(checkpoint)
    assert state["epoch"] == 2 and not any(k.startswith("module.") for k in state["model"])
    model = load_model(checkpoint, Digits().model(state["meta"]["hparams"]))
    assert isinstance(model, torch.nn.Sequential)


def test_10_a_resumed_trial_continues_at_the_next_epoch_as_if_never_stopped(tmp_path):
    hparams = dict(dropout=0.2, noise=0.05)
    straight = LocalContext()
    fit(digits_config(epochs=3, **hparams), straight)
    first, resumed = LocalContext(output_dir=tmp_path), LocalContext(output_dir=tmp_path)
    fit(digits_config(epochs=2, **hparams), first)
    fit(digits_config(epochs=3, **hparams), resumed)
    assert [r["epoch"] for r in resumed.reports] == [3]
    drop_time = lambda r: {k: v for k, v in r.items() if k not in TIMED_REPORTS}  # noqa: E731
    assert drop_time(resumed.reports[0]) == drop_time(straight.reports[2])  # same optimizer state, same RNG


def test_10_a_checkpoint_cut_off_while_writing_is_skipped_on_resume(tmp_path):
    fit(digits_config(epochs=2), LocalContext(output_dir=tmp_path))
    (tmp_path / "checkpoints" / "epoch_0002" / "state.pt").unlink()  # as if killed before os.replace
    resumed = LocalContext(output_dir=tmp_path)
    fit(digits_config(epochs=2), resumed)
    assert [r["epoch"] for r in resumed.reports] == [2]  # from epoch 1's checkpoint, not a crash


# 11 -----------------------------------------------------------------------------------------------
def test_11_world_two_accuracy_equals_a_single_process_evaluation_of_the_checkpoint(world_two):
    r0, r1 = world_two["ranks"]
    def timeless(reports):
        return [{k: v for k, v in r.items() if k not in TIMED_REPORTS} for r in reports]
    assert timeless(r0["reports"]) == timeless(r1["reports"])  # every rank reports the reduced numbers
    reported = r0["reports"][-1]
    state = load_state(world_two["dir"] / "checkpoints" / "epoch_0002")
    model = load_model(world_two["dir"] / "checkpoints" / "epoch_0002", Digits().model(state["meta"]["hparams"]))
    _, validation = Digits().datasets(Digits.defaults)
    loader = DataLoader(Subset(validation, range(ODD_VALIDATION_SIZE)), batch_size=50)
    single = evaluate(model, Digits(), loader, Precision("fp32", "cpu"), CPU)
    assert reported["val_accuracy"] == single["val_accuracy"]
    assert math.isclose(reported["val_loss"], single["val_loss"], rel_tol=1e-6)  # fp32 batch means differ in order
    assert 0.5 < single["val_accuracy"] < 1.0


# 12, 13 -------------------------------------------------------------------------------------------
def test_12_evaluation_runs_without_autograd_in_eval_mode(world_two):
    states = world_two["ranks"][0]["record"]["eval_states"]
    assert states and set(states) == {(False, False)}  # grad disabled, module.training False


def test_13_the_epoch_totals_hold_no_graph():
    run = setup_run(digits_config(), LocalContext())
    totals = train_one_epoch(run, 1)
    assert not totals.requires_grad and totals.grad_fn is None


# 14 -----------------------------------------------------------------------------------------------
def test_14_out_of_memory_ends_as_a_clear_error_naming_the_batch_and_memory():
    with pytest.raises(TrialOutOfMemory) as caught:
        fit(digits_config(OutOfMemoryDigits(), batch_size=32), LocalContext())
    message = str(caught.value)
    assert message.startswith("out of memory at epoch 1: per-rank batch 32 (x1 accumulation, 1 ranks) on cpu with ")
    assert "GiB" in message and "oom_retry" in message
    assert caught.value.__context__ is None and caught.value.micro_batch == 32  # no allocator traceback chained


def test_14_out_of_memory_before_the_first_batch_says_so():
    with pytest.raises(TrialOutOfMemory) as caught:
        fit(digits_config(OutOfMemoryModel(), batch_size=32), LocalContext())
    assert str(caught.value).startswith("out of memory while setting up the trial: per-rank batch 32 (x1 accumulation")


def test_14_half_the_micro_batch_with_twice_the_accumulation_fits():
    context = LocalContext()
    fit(digits_config(OutOfMemoryDigits(), batch_size=32, settings=TrainingSettings(grad_accum_steps=2)), context)
    assert (context.reports[0]["batch_per_rank"], context.reports[0]["global_batch"]) == (16, 32)


@pytest.mark.gpu
def test_14_a_real_cuda_out_of_memory_is_that_error_and_leaves_the_device_free():
    """The CUDA allocator's own OOM, not a raised one: the trial run once, then again with the process's
    share of the GPU capped at half the memory it took, then uncapped again, on the same device."""
    cuda = torch.device("cuda", 0)
    config = digits_config(model="cnn", hidden=256, batch_size=512)
    torch.cuda.empty_cache()
    before = torch.cuda.memory_reserved(cuda)
    torch.cuda.reset_peak_memory_stats(cuda)
    fit(config, LocalContext(device=cuda))
    half = torch.cuda.max_memory_reserved(cuda) / 2 / torch.cuda.get_device_properties(cuda).total_memory
    torch.cuda.set_per_process_memory_fraction(half, cuda)
    try:
        with pytest.raises(TrialOutOfMemory) as caught:
            fit(config, LocalContext(device=cuda))
    finally:
        torch.cuda.set_per_process_memory_fraction(1.0, cuda)
    assert str(caught.value).startswith("out of memory at epoch 1: per-rank batch 512 (x1 accumulation, 1 ranks) "
                                        "on cuda:0 with ")
    assert torch.cuda.memory_allocated(cuda) == 0 and torch.cuda.memory_reserved(cuda) == before
    context = LocalContext(device=cuda)
    fit(config, context)
    assert len(context.reports) == 1 and context.reports[0]["precision"] in ("bf16", "fp16")


# 15 -----------------------------------------------------------------------------------------------
def test_15_one_allreduce_per_optimizer_step_under_accumulation(world_two):
    r0 = world_two["ranks"][0]
    micro_batches = len(r0["record"]["params"])
    assert r0["record"]["allreduces"] == r0["optimizer_steps"] == 46 and micro_batches == 90


# 16 -----------------------------------------------------------------------------------------------
def test_16_ddp_knobs_reach_the_wrapper(world_two):
    assert world_two["ranks"][0]["ddp_knobs"] == {
        "bucket_bytes_cap": 2**20, "gradient_as_bucket_view": False, "static_graph": True,
        "find_unused_parameters": True,
    }


# 17 -----------------------------------------------------------------------------------------------
def test_17_linear_scaling_doubles_lr_when_the_world_doubles(world_two):
    settings = TrainingSettings(batch_size_scope="per_rank", lr_scaling="linear")
    context = LocalContext()
    fit(digits_config(settings=settings, batch_size=32), context)
    world_one = context.reports[0]["lr"]
    world_two_lr = world_two["ranks"][0]["reports"][0]["lr"]
    assert world_one == Digits.defaults["lr"] and world_two_lr == 2 * world_one
    # the warm-up climbs from the sampled lr to the scaled one (Goyal et al.)
    warm = LearningRateSchedule.for_trial(ScheduleSettings(), steps_per_epoch=10, total_steps=50, warmup_steps=10,
                                          lr_scale=2.0)
    assert [0.2 * warm.factor(s) for s in (0, 5, 10, 50)] == pytest.approx([0.1, 0.15, 0.2, 0.2])


# 18 -----------------------------------------------------------------------------------------------
def test_18_asking_for_a_profile_writes_a_trace_into_the_trial_directory(tmp_path):
    fit(digits_config(settings=TrainingSettings(profile_steps=2, checkpoint_every=0)), LocalContext(output_dir=tmp_path))
    trace = json.loads((tmp_path / TRACE_FILE).read_text())
    assert any(e.get("name", "").startswith("aten::") for e in trace["traceEvents"])
    fit(digits_config(settings=TrainingSettings(checkpoint_every=0)), LocalContext(output_dir=tmp_path / "off"))
    assert not (tmp_path / "off" / TRACE_FILE).exists()


# 19 -----------------------------------------------------------------------------------------------
def test_19_a_world_two_trial_logs_each_message_once(world_two):
    lines = (world_two["dir"] / "trial.log").read_text().splitlines()
    epoch_lines = [line for line in lines if line.startswith("epoch ")]
    assert [line.split(":")[0] for line in epoch_lines] == ["epoch 1/2", "epoch 2/2"]


# 20 -----------------------------------------------------------------------------------------------
@pytest.mark.gpu
def test_20_gpu_memory_is_released_when_a_trial_ends():
    cuda = torch.device("cuda", 0)
    torch.cuda.empty_cache()
    before = torch.cuda.memory_reserved(cuda)
    fit(digits_config(model="cnn", hidden=256, batch_size=512), LocalContext(device=cuda))
    assert torch.cuda.memory_reserved(cuda) == before


# beyond the posts ---------------------------------------------------------------------------------
def test_deterministic_mode_is_on_inside_the_trial():
    task = RecordingDigits()
    try:
        fit(digits_config(task, settings=TrainingSettings(deterministic=True, checkpoint_every=0)), LocalContext())
        assert set(task.record["deterministic"]) == {True}
    finally:
        torch.use_deterministic_algorithms(False)


def test_compile_wraps_the_model_and_checkpoints_stay_plain():
    prepared = prepare_model(Digits().model(Digits.defaults), CPU, 1, TrainingSettings(compile=True))
    assert type(prepared.module).__name__ == "OptimizedModule" and prepared.plain is prepared.module._orig_mod


# 21 -----------------------------------------------------------------------------------------------
@pytest.mark.parametrize("precision, accumulation", [("fp32", 1), ("fp16", 2)])
def test_21_clipping_bounds_the_true_gradient_norm_of_every_step(precision, accumulation):
    norms = []

    def record(optimizer, *args):
        grads = [p.grad for group in optimizer.param_groups for p in group["params"] if p.grad is not None]
        norms.append(float(torch.linalg.vector_norm(torch.stack([torch.linalg.vector_norm(g) for g in grads]))))

    hook = register_optimizer_step_pre_hook(record)
    settings = TrainingSettings(checkpoint_every=0, clip_grad_norm=0.05, precision=precision,
                                grad_accum_steps=accumulation)
    try:
        fit(digits_config(settings=settings, lr=0.01, batch_size=128), LocalContext())
    finally:
        hook.remove()
    # The unclipped norm of these gradients is above 0.05 at every step: clipped, it is 0.05 exactly (not
    # 0.05 / the fp16 scale, as clipping the scaled gradients would leave it).
    steps = math.ceil(1437 / 128)  # the fp16 scaler skips the steps whose gradients overflowed
    assert (len(norms) == steps if precision == "fp32" else 0 < len(norms) <= steps)
    assert norms == pytest.approx([0.05] * len(norms), rel=1e-3)
