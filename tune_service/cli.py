"""``tune-run``: the command line. Thin: it parses arguments, calls the library, and turns a
:class:`TuneServiceError` into ``error: ...`` lines on stderr and exit code 2 (a traceback only with
``--debug``)."""

from __future__ import annotations

import argparse
import sys
from typing import Sequence

from tune_service.errors import TuneServiceError

EXIT_USAGE = 2
EXIT_INTERRUPTED = 130


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="tune-run",
        description="Run a hyperparameter sweep of DDP trials on Ray Tune. "
                    "`tune-run results EXPERIMENT_DIR [--plot]` shows a sweep's results.",
    )
    p.add_argument("spec", nargs="?", help="sweep spec YAML (a W&B sweep file works as is)")
    p.add_argument("--resume", metavar="EXPERIMENT_DIR",
                   help="finish an interrupted sweep: finished trials are kept, interrupted ones continue")
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                   help="override a spec key, dotted for nested keys (repeatable): --set scheduler.max_t=5")
    p.add_argument("--name", help="experiment name (default: the spec's name and the start time)")
    p.add_argument("--storage", default="experiments", help="directory that holds experiments (default: ./experiments)")
    p.add_argument("--address", help="Ray cluster to run on: 'auto' or HOST:PORT (default: an embedded local Ray)")
    p.add_argument("--dry-run", action="store_true", help="print the resolved plan and exit without starting Ray")
    p.add_argument("--debug", action="store_true", help="show tracebacks")
    return p


def _results_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="tune-run results", description="Show the results of a sweep.")
    p.add_argument("experiment_dir", help="the sweep's experiment directory (holds summary.json)")
    p.add_argument("--plot", action="store_true",
                   help="write learning_curves.png and parallel_coordinates.png next to summary.json")
    p.add_argument("--top", type=int, default=10, help="rows of the leaderboard (default: 10)")
    p.add_argument("--debug", action="store_true", help="show tracebacks")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["results"]:
        args, handler = _results_parser().parse_args(argv[1:]), _results
    else:
        parser = _parser()
        args, handler = parser.parse_args(argv), _run
        if (args.spec is None) == (args.resume is None):
            parser.error("give a spec file, or --resume EXPERIMENT_DIR (not both)")
    try:
        return handler(args)
    except TuneServiceError as err:
        if args.debug:
            raise
        for line in str(err).splitlines():
            print(f"error: {line}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED


def _run(args: argparse.Namespace) -> int:
    from tune_service.plan import make_plan
    from tune_service.spec import load_spec, parse_override

    if args.resume:
        if args.overrides or args.dry_run or args.name:
            raise TuneServiceError("--resume: continues the sweep as it was; --set, --name and --dry-run do not apply")
        from tune_service.driver import resume

        outcome = resume(args.resume, address=args.address)
    else:
        overrides = dict(parse_override(text) for text in args.overrides)
        spec = load_spec(args.spec, overrides)
        if args.dry_run:
            # Against a remote cluster we cannot know its size without connecting, so the plan uses this
            # machine's and says so.
            print(make_plan(spec).describe())
            if args.address:
                print(f"note         concurrency shown for this machine; the cluster at {args.address} decides at run time")
            return 0

        from tune_service.driver import run

        outcome = run(spec, address=args.address, storage=args.storage, name=args.name)
    print()
    _print_outcome(outcome)
    if outcome.interrupted:
        print(f"interrupted: resume with: tune-run --resume {outcome.experiment_dir}")
        return EXIT_INTERRUPTED
    return 0 if outcome.best is not None else 1


def _print_outcome(outcome, top: int = 10) -> None:
    print(outcome.leaderboard(top))
    if outcome.best is not None:
        print(f"\nbest {outcome.metric}: {outcome.best.metrics.get(outcome.metric)} (trial {outcome.best.trial_id})")
    print(f"results: {outcome.experiment_dir}/summary.json, best config: {outcome.experiment_dir}/best_config.yaml")
    wandb = outcome.extra.get("wandb")
    if wandb and wandb.get("mode") == "offline":
        print(f"wandb: runs saved offline; upload them with: wandb sync {wandb['dir']}/offline-run-*")
    elif wandb:
        where = "/".join(x for x in (wandb.get("entity"), wandb.get("project")) if x)
        print(f"wandb: project {where}, group {wandb.get('group')}")


def _results(args: argparse.Namespace) -> int:
    from tune_service.results import load

    outcome = load(args.experiment_dir)
    _print_outcome(outcome, args.top)
    if args.plot:
        from tune_service.plots import write_plots

        for path in write_plots(outcome):
            print(f"plot: {path}")
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
