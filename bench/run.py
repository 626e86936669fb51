"""Run the benchmark suite, or some of its benchmarks, and print each one's figures beside its anchor.

    python bench/run.py                 # the whole suite (about 20 minutes on 2 cores)
    python bench/run.py --quick         # smaller sizes and fewer seeds (a few minutes), flagged quick
    python bench/run.py ddp_in_trial known_optimum
    python bench/run.py trial_overhead train_overhead   # the two earlier scripts, summarised
    python bench/run.py search_quality  # ours against the peers' searchers (named only: about 17 minutes)
    python bench/run.py search_quality_leaders  # our BOHB and DEHB at 100 seeds (named only: about 18 minutes)
    python bench/run.py bohb_reference  # our BOHB and hpbandster's, 20 seeds paired (named only)
    python bench/run.py warm_start_quality  # warm-started sweeps against cold ones, 20 seeds paired (named only)
    python bench/run.py prior_quality  # sweeps with a good and a bad prior against none, 20 seeds (named only)
    python bench/run.py tabular_quality  # ours against Optuna and Syne Tune on HPO tables of real runs (named only)
    python bench/run.py pareto_quality  # two objectives: ours against Optuna's MO TPE and Syne Tune's MOASHA (named only)
    python bench/run.py pbt_utilisation  # a PBT population of 16 trials x 20 epochs (named only: about 22 minutes)
    python bench/run.py scale_bookkeeping  # the driver's bookkeeping and reading a sweep, at 10,000 trials (named only)
    python bench/run.py --list

Each benchmark writes ``bench/results/NAME.json`` (``bench/results/quick/NAME.json`` with ``--quick``):
its figures (anchor, tune-service, target, met), the sizes and seeds, the raw measurements, the
machine and the date. ``bench/results/suite.json`` records the last whole-suite run's wall times.
"""

from __future__ import annotations

import argparse
import importlib
import json
import sys
import time
import traceback
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make ``bench`` importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import QUICK_RESULTS_DIR, RESULTS_DIR, print_table, write_result  # noqa: E402

#: In the order the suite runs them. The two last are the earlier standalone scripts, run as they are
#: (they write their own files) and summarised here; they run only when named (their figures are
#: covered by ddp_in_trial and service_overhead, and together they take about 3.5 minutes).
BENCHMARKS = {
    "cli_startup": "bench.service.cli_startup",
    "warm_gangs": "bench.service.warm_gangs",
    "service_overhead": "bench.service.service_overhead",
    "ddp_in_trial": "bench.training.ddp_in_trial",
    "utilisation": "bench.service.utilisation",
    "pbt_utilisation": "bench.service.pbt_utilisation",
    "search_efficiency": "bench.search.search_efficiency",
    "known_optimum": "bench.search.known_optimum",
    "fused_bundles": "bench.training.fused_bundles",
    "bundled_sweep": "bench.service.bundled_sweep",
    "gpu_amp": "bench.gpu.gpu_amp",
    "gpu_warm_gangs": "bench.gpu.gpu_warm_gangs",
    "gpu_packing": "bench.gpu.gpu_packing",
    "search_quality": "bench.search.search_quality",
    "search_quality_leaders": "bench.search.search_quality_leaders",
    "bohb_reference": "bench.search.bohb_reference",
    "warm_start_quality": "bench.search.warm_start_quality",
    "prior_quality": "bench.search.prior_quality",
    "tabular_quality": "bench.search.tabular_quality",
    "pareto_quality": "bench.search.pareto_quality",
    "scale_bookkeeping": "bench.service.scale_bookkeeping",
    "trial_overhead": "bench.legacy",
    "train_overhead": "bench.legacy",
}
#: search_quality too: its 20 seeds of every contender take about a quarter of an hour of their own.
NAMED_ONLY = ("search_quality", "search_quality_leaders", "bohb_reference", "trial_overhead", "train_overhead",
              "pbt_utilisation", "warm_start_quality", "prior_quality", "tabular_quality", "scale_bookkeeping", "pareto_quality")


def run_one(name: str, quick: bool) -> dict:
    module = importlib.import_module(BENCHMARKS[name])
    print(f"\n## {name}{' (quick)' if quick else ''}", flush=True)
    started = time.perf_counter()
    payload = module.run(quick, name) if BENCHMARKS[name] == "bench.legacy" else module.run(quick)
    wall_s = time.perf_counter() - started
    path = write_result(name, quick, payload, wall_s)
    print_table(f"{name}: {wall_s:.0f} s, written {path.relative_to(RESULTS_DIR.parent.parent)}", payload["figures"])
    return {"wall_s": round(wall_s, 1), "figures": payload["figures"]}


def markdown(names: list[str], quick: bool) -> str:
    """The figures of the saved results of ``names`` as one markdown table."""
    from bench.common import fmt

    directory = QUICK_RESULTS_DIR if quick else RESULTS_DIR
    lines = ["| benchmark | figure | anchor | tune-service | target | met? |", "|---|---|---|---:|---|---|"]
    for name in names:
        path = directory / f"{name}.json"
        if not path.exists():
            continue
        for f in json.loads(path.read_text())["figures"]:
            anchor = fmt(f["anchor"], f["unit"]) + (f" ({f['anchor_name']})" if f["anchor_name"] else "")
            met = {True: "yes", False: "**no**", None: "-"}[f["met"]]
            value = f["note"] if f["tune_service"] is None and f["note"] else fmt(f["tune_service"], f["unit"])
            lines.append(f"| {name} | {f['figure']} | {anchor} | {value} | {f['target'] or '-'} | {met} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Run the tune-service benchmark suite (or named benchmarks).")
    parser.add_argument("names", nargs="*", metavar="NAME", help=f"benchmarks to run (default: all): {', '.join(BENCHMARKS)}")
    parser.add_argument("--quick", action="store_true", help="small sizes and 1 seed: a few minutes; results flagged quick")
    parser.add_argument("--list", action="store_true", help="list the benchmarks and exit")
    parser.add_argument("--markdown", action="store_true",
                        help="print the Performance table (docs/benchmarks.md) from the saved results and exit (runs nothing)")
    args = parser.parse_args(argv)
    if args.markdown:
        print(markdown(args.names or [n for n in BENCHMARKS if n not in NAMED_ONLY], args.quick))
        return 0
    if args.list:
        from bench import legacy

        for name, module in BENCHMARKS.items():
            doc = (importlib.import_module(module).__doc__ or "").strip().splitlines()[0]
            print(f"{name:18} {doc if module != 'bench.legacy' else f'{legacy.SCRIPTS[name]}, as it is'}")
        return 0
    unknown = [n for n in args.names if n not in BENCHMARKS]
    if unknown:
        parser.error(f"unknown benchmark(s) {', '.join(unknown)}; choose from {', '.join(BENCHMARKS)}")
    names = args.names or [n for n in BENCHMARKS if n not in NAMED_ONLY]
    started = time.perf_counter()
    outcomes, failed = {}, []
    for name in names:
        try:
            outcomes[name] = run_one(name, args.quick)
        except Exception:  # one broken benchmark does not cost the others' figures
            traceback.print_exc()
            failed.append(name)
    total_s = time.perf_counter() - started
    print(f"\nsuite: {len(outcomes)} benchmark(s) in {total_s / 60:.1f} min"
          + (f"; FAILED: {', '.join(failed)}" if failed else ""))
    for name, outcome in outcomes.items():
        for f in outcome["figures"]:
            status = {True: "met", False: "MISSED", None: "-"}[f["met"]]
            print(f"  {name:18} {f['figure'][:58]:58} {status}")
    if not args.names:  # a whole-suite run: record its wall times
        directory = QUICK_RESULTS_DIR if args.quick else RESULTS_DIR
        directory.mkdir(parents=True, exist_ok=True)
        (directory / "suite.json").write_text(json.dumps({
            "quick": args.quick, "wall_s": round(total_s, 1), "failed": failed,
            "benchmarks": {n: o["wall_s"] for n, o in outcomes.items()}}, indent=2) + "\n")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
