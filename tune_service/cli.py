"""``tune-run``: the command line. Thin: it parses arguments, calls the library, and turns a
:class:`TuneServiceError` into ``error: ...`` lines on stderr and exit code 2 (a traceback only with
``--debug``)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Sequence

from tune_service.errors import TuneServiceError
from tune_service.experiment.layout import BEST_CONFIG_FILE, SUMMARY_FILE
from tune_service.jobs import DEFAULT_ADDRESS as DEFAULT_JOBS_ADDRESS

EXIT_USAGE = 2
EXIT_INTERRUPTED = 130


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="tune-run",
        description="Run a hyperparameter sweep of DDP trials on Ray Tune. "
                    "`tune-run results EXPERIMENT_DIR [--plot]` shows a sweep's results; "
                    "`tune-run submit SPEC --storage DIR --address http://HEAD:8265` submits one to a cluster "
                    "as a Ray Job, and `tune-run status|logs|stop|results JOB_ID` follows it.",
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
    p.add_argument("experiment", metavar="EXPERIMENT_DIR|JOB_ID",
                   help="the sweep's experiment directory (holds summary.json), or a submitted sweep's job id")
    p.add_argument("--address", help=f"the Ray Jobs API of a job id (default: $RAY_ADDRESS or {DEFAULT_JOBS_ADDRESS})")
    p.add_argument("--plot", action="store_true",
                   help="write learning_curves.png and parallel_coordinates.png next to summary.json")
    p.add_argument("--top", type=int, default=10, help="rows of the leaderboard (default: 10)")
    p.add_argument("--debug", action="store_true", help="show tracebacks")
    return p


def _submit_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="tune-run submit", description="Submit a sweep to a Ray cluster as a Ray Job "
                                "and print its job id; follow it with `tune-run status|logs|stop|results JOB_ID`.")
    p.add_argument("spec", help="sweep spec YAML")
    p.add_argument("--address", help=f"the cluster's Ray Jobs API (default: $RAY_ADDRESS or {DEFAULT_JOBS_ADDRESS})")
    p.add_argument("--storage", required=True,
                   help="where the experiment is written: a path every node sees, or a URI such as s3://bucket/prefix")
    p.add_argument("--name", help="experiment name (default: the spec's name and the submission time)")
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                   help="override a spec key, dotted for nested keys (repeatable)")
    p.add_argument("--working-dir", help="a directory of your task's code, uploaded with the job (Ray's working_dir)")
    p.add_argument("--follow", action="store_true", help="print the sweep's output until it ends")
    p.add_argument("--debug", action="store_true", help="show tracebacks")
    return p


def _job_parser(command: str, what: str) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog=f"tune-run {command}", description=what)
    p.add_argument("job_id", help="the job id `tune-run submit` printed")
    p.add_argument("--address", help=f"the cluster's Ray Jobs API (default: $RAY_ADDRESS or {DEFAULT_JOBS_ADDRESS})")
    if command == "logs":
        p.add_argument("--follow", action="store_true", help="keep printing until the sweep ends")
    p.add_argument("--debug", action="store_true", help="show tracebacks")
    return p


def _parse(argv: list[str]):
    """The parsed arguments and the handler of the subcommand ``argv`` names (none: run a sweep)."""
    command = argv[0] if argv else None
    if command == "results":
        return _results_parser().parse_args(argv[1:]), _results
    if command == "submit":
        return _submit_parser().parse_args(argv[1:]), _submit
    if command in _JOB_COMMANDS:
        what, handler = _JOB_COMMANDS[command]
        return _job_parser(command, what).parse_args(argv[1:]), handler
    parser = _parser()
    args = parser.parse_args(argv)
    if (args.spec is None) == (args.resume is None):
        parser.error("give a spec file, or --resume EXPERIMENT_DIR (not both)")
    return args, _run


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    args, handler = _parse(argv)
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
    from tune_service.execution.plan import make_plan
    from tune_service.spec import load_spec, parse_override

    if args.resume:
        if args.overrides or args.dry_run or args.name:
            raise TuneServiceError("--resume: continues the sweep as it was; --set, --name and --dry-run do not apply")
        from tune_service.execution.driver import resume

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

        from tune_service.execution.driver import run

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
    directory = Path(outcome.experiment_dir)
    print(f"results: {directory / SUMMARY_FILE}, best config: {directory / BEST_CONFIG_FILE}")
    wandb = outcome.extra.get("wandb")
    if wandb and wandb.get("mode") == "offline":
        print(f"wandb: runs saved offline; upload them with: wandb sync {wandb['dir']}/offline-run-*")
    elif wandb:
        where = "/".join(x for x in (wandb.get("entity"), wandb.get("project")) if x)
        print(f"wandb: project {where}, group {wandb.get('group')}")


def _results(args: argparse.Namespace) -> int:
    from tune_service.results.sweep_result import load

    if Path(args.experiment).exists() or args.address is None and not args.experiment.startswith("raysubmit_"):
        outcome = load(args.experiment)
    else:
        from tune_service.jobs import attach

        outcome = attach(args.experiment, args.address).results()
    _print_outcome(outcome, args.top)
    if args.plot:
        from tune_service.results.plots import write_plots

        for path in write_plots(outcome):
            print(f"plot: {path}")
    return 0


def _submit(args: argparse.Namespace) -> int:
    from tune_service.jobs import submit
    from tune_service.spec import parse_override

    overrides = dict(parse_override(text) for text in args.overrides)
    runtime_env = {"working_dir": args.working_dir} if args.working_dir else None
    job = submit(args.spec, args.address, storage=args.storage, name=args.name, runtime_env=runtime_env,
                 overrides=overrides)
    print(f"submitted: job {job.job_id} at {job.address}")
    print(f"experiment: {job.experiment_dir}")
    print(f"follow it:  tune-run logs {job.job_id} --follow   (status, stop, results likewise)")
    if args.follow:
        return _print_logs(job, follow=True)
    return 0


def _status(args: argparse.Namespace) -> int:
    from tune_service.jobs import attach

    job = attach(args.job_id, args.address)
    print(f"{job.job_id}  {job.status()}  {job.experiment_dir}")
    return 0


def _logs(args: argparse.Namespace) -> int:
    from tune_service.jobs import attach

    return _print_logs(attach(args.job_id, args.address), follow=args.follow)


def _print_logs(job, follow: bool) -> int:
    if not follow:
        print(job.logs(), end="")
        return 0
    for chunk in job.logs(follow=True):
        print(chunk, end="", flush=True)
    return 0 if job.status() == "SUCCEEDED" else 1


def _stop(args: argparse.Namespace) -> int:
    from tune_service.jobs import attach

    job = attach(args.job_id, args.address)
    print(f"{job.job_id}  {job.stop()}; what finished: tune-run results {job.job_id}; "
          f"continue it: tune-run --resume {job.experiment_dir}")
    return 0


_JOB_COMMANDS = {
    "status": ("Show a submitted sweep's state.", _status),
    "logs": ("Print a submitted sweep's output.", _logs),
    "stop": ("Stop a submitted sweep; what finished is kept.", _stop),
}


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
