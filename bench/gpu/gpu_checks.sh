#!/usr/bin/env bash
# The checks that need a CUDA GPU, in one run of at most 10 minutes: what the machine is, the benchmarks of
# many trials on one GPU (fused_bundles: one at a time, packed, fused; gpu_packing: the quickstart packed
# and with gpus_per_worker auto), the tests marked `gpu`, where a rank's start and a fused convolution spend
# their time (gpu_anatomy), and (without --quick) gpu_amp, gpu_warm_gangs, a sweep in bundles on the GPU
# (bundled_sweep) and whether two NCCL ranks fit on one GPU.
# Each step's output goes to OUT_DIR (logs and the benchmarks' result files), each step under a time
# limit so one that hangs leaves the others their time.
#
#   bash bench/gpu/gpu_checks.sh OUT_DIR [--quick]
set -u
out=${1:?usage: bash bench/gpu/gpu_checks.sh OUT_DIR [--quick]}
quick=${2:-}
mkdir -p "$out"
export PYTHONUNBUFFERED=1
cd "$(dirname "$0")/../.."

step() {  # step NAME SECONDS COMMAND...: run it, its output to the screen and OUT_DIR/NAME.txt
    local name=$1 seconds=$2
    shift 2
    echo "== $name (at most $seconds s)"
    local started=$SECONDS
    timeout "$seconds" "$@" 2>&1 | tee "$out/$name.txt"
    echo "== $name: exit ${PIPESTATUS[0]} after $((SECONDS - started)) s" | tee -a "$out/$name.txt"
}

step environment 60 bash -c 'nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv; python3 -c "
import torch, ray
print(\"torch\", torch.__version__, \"cuda\", torch.version.cuda, \"nccl\", torch.cuda.nccl.version(),
      \"gpus\", torch.cuda.device_count(), torch.cuda.get_device_name(0), \"ray\", ray.__version__)"'
step fused_bundles 210 python3 bench/run.py fused_bundles $quick
step gpu_packing 150 python3 bench/run.py gpu_packing $quick
step gpu_tests 170 python3 -m pytest -q -m gpu -p no:cacheprovider tests/integration/test_packed_trials.py tests/integration/test_bundles.py \
    tests/training/test_fused.py $([ -n "$quick" ] || echo tests/training tests/integration/test_gangs.py)
step anatomy 60 python3 -m bench.gpu.gpu_anatomy startup conv
results=bench/results${quick:+/quick}
cp "$results/fused_bundles.json" "$results/gpu_packing.json" "$out/" 2>/dev/null
[ -n "$quick" ] && exit 0
probe=$(mktemp --suffix=.py)  # a file: the ranks are spawned, and spawn re-imports the main module
cat > "$probe" <<'PY'
import os, torch, torch.distributed as dist, torch.multiprocessing as mp
def rank(r):
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT="29533")
    torch.cuda.set_device(0)
    dist.init_process_group("nccl", rank=r, world_size=2, device_id=torch.device("cuda", 0))
    t = torch.ones(1, device="cuda")
    dist.all_reduce(t)
    print(f"rank {r}: all_reduce on one GPU gave {t.item()}", flush=True)
    dist.destroy_process_group()
if __name__ == "__main__":
    try:
        mp.spawn(rank, nprocs=2)
    except Exception as error:
        print("two NCCL ranks on one GPU failed:", str(error).strip().splitlines()[-1][:300])
PY
step two_nccl_ranks_on_one_gpu 60 python3 "$probe"
step gpu_amp 180 python3 bench/run.py gpu_amp
step gpu_warm_gangs 480 python3 bench/run.py gpu_warm_gangs
step bundled_sweep 300 python3 bench/run.py bundled_sweep
cp bench/results/gpu_amp.json bench/results/gpu_warm_gangs.json bench/results/bundled_sweep.json "$out/"
exit 0
