"""``tune-run``: the command line. Thin: it parses arguments, calls the library, and turns a
:class:`TuneServiceError` into ``error: ...`` lines on stderr and the error's exit code (a traceback
only with ``--debug``).

``tune-run SPEC [flags]`` runs a sweep (the flags ``--dry-run`` and ``--resume DIR`` stay as they
were); every other verb is a subcommand with its own ``--help``. Exit codes: :data:`EXIT_CODES`.
Nothing heavy (torch, Ray, pandas) is imported before a command needs it, so ``--help`` is quick.
"""

from __future__ import annotations

import argparse
import os
import sys
from dataclasses import replace
from pathlib import Path
from typing import Callable, Sequence

from tune_service.errors import TuneServiceError
from tune_service.execution.startup import collector_paused
from tune_service.experiment.layout import BEST_CONFIG_FILE, SUMMARY_FILE
from tune_service.results.sweep_result import SIGNAL_KEY, STOPPED_KEY, TIME_LIMIT_KEY
from tune_service.jobs import DEFAULT_ADDRESS as DEFAULT_JOBS_ADDRESS

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_UNREACHABLE = 3
EXIT_INTERRUPTED = 130
EXIT_TERMINATED = 143  # 128 + SIGTERM, as a process ended by it
#: What each exit code means; the README's table is this one.
EXIT_CODES = {
    EXIT_OK: "done: the sweep finished (or the command did what it says)",
    EXIT_FAILED: "the sweep ran but failed: no trial produced the metric, or a followed job failed",
    EXIT_USAGE: "bad input: the spec, a flag, a path or a job id (one line says which and why)",
    EXIT_UNREACHABLE: "Ray or the cluster could not be reached at the address given, or refused our token",
    EXIT_INTERRUPTED: "interrupted (Ctrl+C): what finished is kept; --resume continues",
    EXIT_TERMINATED: "terminated (SIGTERM, to the driver or its process group): as 130, within 30 s",
}
JOBS_ADDRESS_HELP = f"the cluster's Ray Jobs API (default: $RAY_ADDRESS or {DEFAULT_JOBS_ADDRESS})"


# -- the parsers -------------------------------------------------------------------------------------


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("tune-service")
    except PackageNotFoundError:  # run from a source tree that was never installed
        return "unknown (not installed)"


def _add_common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--debug", action="store_true", help="show tracebacks")


def _add_output(p: argparse.ArgumentParser) -> None:
    group = p.add_mutually_exclusive_group()
    group.add_argument(
        "-v",
        "--verbose",
        action="store_true",
        help="also show Ray's and Ray Train's own output (Tune's tables, what ranks print)",
    )
    group.add_argument("-q", "--quiet", action="store_true", help="print only the result")


def _add_spec_options(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override a spec key, dotted for nested keys (repeatable): --set scheduler.max_t=5",
    )


def _add_resume_options(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="run_cap=N",
        help="go on with more trials: a larger run_cap (the one key a resume can change)",
    )


def _add_run_options(p: argparse.ArgumentParser) -> None:
    _add_spec_options(p)
    p.add_argument("--name", help="experiment name (default: the spec's name and the start time)")
    p.add_argument(
        "--storage",
        default="experiments",
        help="directory that holds experiments, or a URI such as s3://bucket/prefix (default: ./experiments)",
    )
    p.add_argument("--address", help="Ray cluster to run on: 'auto' or HOST:PORT (default: an embedded local Ray)")
    _add_output(p)
    _add_common(p)


def _main_parser() -> argparse.ArgumentParser:
    commands = "\n".join(f"  {name:<9} {summary}" for name, (summary, _, _) in COMMANDS.items())
    codes = "\n".join(f"  {code:<4} {meaning}" for code, meaning in EXIT_CODES.items())
    p = argparse.ArgumentParser(
        prog="tune-run",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        usage="tune-run SPEC [options]  |  tune-run COMMAND ... (see below)",
        description="Run a hyperparameter sweep of DDP trials on Ray Tune: tune-run space.yaml",
        epilog=f"commands (each has --help):\n{commands}\n\nexit codes:\n{codes}",
    )
    p.add_argument("--version", action="version", version=f"tune-run {_version()}")
    p.add_argument("spec", nargs="?", help="sweep spec YAML (a W&B sweep file works as is)")
    p.add_argument(
        "--resume",
        metavar="EXPERIMENT_DIR",
        help="finish an interrupted sweep: finished trials are kept, interrupted ones continue",
    )
    p.add_argument("--dry-run", action="store_true", help="print the resolved plan and exit without starting Ray")
    _add_run_options(p)
    return p


def _run_parser(p: argparse.ArgumentParser) -> None:
    p.add_argument("spec", help="sweep spec YAML (a W&B sweep file works as is)")
    _add_run_options(p)


def _dry_run_parser(p: argparse.ArgumentParser) -> None:
    p.add_argument("spec", help="sweep spec YAML")
    _add_spec_options(p)
    p.add_argument("--address", help="the cluster the sweep will run on (the plan is made for this machine)")
    _add_common(p)


def _resume_parser(p: argparse.ArgumentParser) -> None:
    p.add_argument("resume", metavar="EXPERIMENT_DIR", help="the interrupted sweep's experiment directory")
    _add_resume_options(p)
    p.add_argument("--address", help="Ray cluster to run on: 'auto' or HOST:PORT (default: an embedded local Ray)")
    _add_output(p)
    _add_common(p)


def _results_parser(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "experiment",
        metavar="EXPERIMENT_DIR|JOB_ID",
        help="the sweep's experiment directory (holds summary.json), or a submitted sweep's job id",
    )
    p.add_argument("--address", help=f"the Ray Jobs API of a job id (default: $RAY_ADDRESS or {DEFAULT_JOBS_ADDRESS})")
    p.add_argument("--top", type=int, default=10, help="rows of the leaderboard (default: 10)")
    _add_common(p)


def _report_parser(p: argparse.ArgumentParser) -> None:
    p.add_argument("experiment", metavar="EXPERIMENT_DIR", help="the sweep's experiment directory")
    p.add_argument(
        "-o", "--output", help="where to write the page (default: EXPERIMENT_DIR/report.html; ./report.html for a URI)"
    )
    _add_common(p)


def _submit_parser(p: argparse.ArgumentParser) -> None:
    p.add_argument("spec", help="sweep spec YAML")
    p.add_argument("--address", help=JOBS_ADDRESS_HELP)
    p.add_argument(
        "--storage",
        required=True,
        help="where the experiment is written: a directory every node mounts at the same path, "
        "or a URI such as s3://bucket/prefix",
    )
    p.add_argument("--name", help="experiment name (default: the spec's name and the submission time)")
    _add_spec_options(p)
    p.add_argument("--working-dir", help="a directory of your task's code, uploaded with the job (Ray's working_dir)")
    p.add_argument("--follow", action="store_true", help="print the sweep's output until it ends")
    _add_common(p)


def _job_parser(p: argparse.ArgumentParser, follow: bool = False) -> None:
    p.add_argument("job_id", help="the job id `tune-run submit` printed")
    p.add_argument("--address", help=JOBS_ADDRESS_HELP)
    if follow:
        p.add_argument("--follow", action="store_true", help="keep printing until the sweep ends")
    _add_common(p)


def _schema_parser(p: argparse.ArgumentParser) -> None:
    p.add_argument("-o", "--output", help="write the schema to this file instead of standard output")
    _add_common(p)


def _parse(argv: list[str]) -> tuple[argparse.Namespace, Callable[[argparse.Namespace], int]]:
    """The parsed arguments and the handler of the command ``argv`` names (none: run a sweep)."""
    command = argv[0] if argv else None
    if command in COMMANDS:
        summary, build, handler = COMMANDS[command]
        p = argparse.ArgumentParser(prog=f"tune-run {command}", description=summary)
        build(p)
        return p.parse_args(argv[1:]), handler
    parser = _main_parser()
    args = parser.parse_args(argv)
    if (args.spec is None) == (args.resume is None):
        parser.error("give a spec file, or --resume EXPERIMENT_DIR (not both)")
    if args.resume:
        if args.dry_run or args.name:
            parser.error("--resume: continues the sweep as it was; --name and --dry-run do not apply")
        return args, _resume
    return args, _dry_run if args.dry_run else _run


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
        return err.exit_code
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED


# -- the handlers ------------------------------------------------------------------------------------


def _verbosity(args: argparse.Namespace) -> int:
    from tune_service.execution.driver import VERBOSE_LIVE, VERBOSE_RAY

    return 0 if args.quiet else VERBOSE_RAY if args.verbose else VERBOSE_LIVE


def _load_spec(args: argparse.Namespace):
    """The spec file's spec; its directory goes first on ``sys.path``, so that a task module beside the
    spec imports (``task: mypkg.task:MyTask`` for ``mypkg/`` next to the file), as ``python train.py``
    finds the modules beside a script. The embedded Ray's ranks get the same path."""
    from tune_service.spec import load_spec, parse_override

    from tune_service.jobs import SPEC_FILE

    spec_dir = str(Path(args.spec).resolve().parent)
    if spec_dir not in sys.path:
        sys.path.insert(0, spec_dir)
    spec = load_spec(args.spec, dict(parse_override(text) for text in args.overrides))
    if Path(args.spec).name == SPEC_FILE:
        # A submitted job's spec, in its working directory: each node has its own copy of that directory,
        # and a W&B program runs from the copy on its rank's node (the rank's working directory).
        spec = replace(spec, directory=None)
    return spec


def _run(args: argparse.Namespace) -> int:
    with collector_paused():  # see startup: about 0.3 s before the sweep's first trial
        from tune_service.execution.driver import run

    outcome = run(
        _load_spec(args), address=args.address, storage=args.storage, name=args.name, verbose=_verbosity(args)
    )
    return _finish(outcome, args.quiet)


def _resume(args: argparse.Namespace) -> int:
    with collector_paused():
        from tune_service.execution.driver import resume

    return _finish(
        resume(args.resume, address=args.address, verbose=_verbosity(args), run_cap=_resumed_run_cap(args.overrides)),
        args.quiet,
    )


def _resumed_run_cap(overrides: list[str]) -> int | None:
    """The ``run_cap`` that ``--set`` gives a resume (None: the sweep's own). Any other key is refused:
    the rest of the spec is what the sweep's trials ran under."""
    from tune_service.errors import Problem, SpecError
    from tune_service.spec import parse_override

    run_cap = None
    for key, value in (parse_override(text) for text in overrides):
        if key != "run_cap":
            raise SpecError(
                [
                    Problem(
                        f"--set {key}",
                        f"a resume can change only run_cap (the rest of the spec is what the "
                        f"sweep's trials ran under), got {key}={value!r}",
                    )
                ]
            )
        run_cap = value
    return run_cap


def _dry_run(args: argparse.Namespace) -> int:
    from tune_service.execution.plan import make_plan

    print(make_plan(_load_spec(args)).describe())
    if args.address:
        # Against a remote cluster we cannot know its size without connecting, so the plan uses this
        # machine's and says so.
        print(f"note         concurrency shown for this machine; the cluster at {args.address} decides at run time")
    return EXIT_OK


def _finish(outcome, quiet: bool) -> int:
    """Print what a sweep ended with; its exit code."""
    if not quiet:
        print()
    _print_outcome(outcome, leaderboard=not quiet)
    if outcome.extra.get(STOPPED_KEY):
        print(f"stopped: {outcome.extra[STOPPED_KEY]}")
        print(f"after fixing the cause, continue with: tune-run --resume {outcome.experiment_dir}")
        return EXIT_FAILED
    if outcome.extra.get(TIME_LIMIT_KEY):
        print(f"time limit: {outcome.extra[TIME_LIMIT_KEY]}; continue with: tune-run --resume {outcome.experiment_dir}")
        return EXIT_OK if outcome.best is not None else EXIT_FAILED
    if outcome.extra.get(SIGNAL_KEY) == "SIGTERM":
        print(f"terminated (SIGTERM): resume with: tune-run --resume {outcome.experiment_dir}")
        return EXIT_TERMINATED
    if outcome.interrupted:
        print(f"interrupted: resume with: tune-run --resume {outcome.experiment_dir}")
        return EXIT_INTERRUPTED
    return EXIT_OK if _succeeded(outcome) else EXIT_FAILED


def _succeeded(outcome) -> bool:
    """A sweep succeeded when a trial has the best value of its metric; without a metric (a W&B program
    sweep), when a trial ran to its end."""
    if outcome.metric is None:
        return any(t.status == "completed" for t in outcome.trials)
    if outcome.multi_objective:
        return bool(outcome.pareto)
    return outcome.best is not None


def _print_outcome(outcome, top: int = 10, leaderboard: bool = True) -> None:
    if leaderboard:
        print(outcome.leaderboard(top))
    if outcome.metric is None:
        print("no metric: the trials are not ranked (W&B's sweep without a metric); what each logged is in the results")
    elif outcome.multi_objective:
        goals = ", ".join(f"{name} ({mode})" for name, mode in outcome.objectives)
        front = outcome.pareto
        print(
            f"Pareto front of {goals}: {len(front)} trial(s)"
            + (f": {', '.join(t.trial_id for t in front)}" if front else "")
        )
        if outcome.hypervolume is not None:
            volume, reference = outcome.hypervolume
            at = ", ".join(
                f"{name} {value:.4g}" for (name, _), value in zip(outcome.objectives, reference, strict=True)
            )
            print(f"hypervolume {volume:.4g} (from the reference point {at})")
    elif outcome.best is not None:
        print(f"best {outcome.metric}: {outcome.best.metrics.get(outcome.metric)} (trial {outcome.best.trial_id})")
    else:
        print(f"no trial reported {outcome.metric}")
    where = str(outcome.experiment_dir).rstrip("/")  # a directory, or a URI on remote storage
    # best_config.yaml is written only where there is a best trial
    print(f"results: {where}/{SUMMARY_FILE}" + (f", best config: {where}/{BEST_CONFIG_FILE}" if outcome.best else ""))
    wandb = outcome.extra.get("wandb")
    if wandb and wandb.get("mode") == "offline" and "://" in wandb["dir"]:
        print(f"wandb: runs saved offline in {wandb['dir']}; copy them to a disk and upload them with wandb sync")
    elif wandb and wandb.get("mode") == "offline":
        print(f"wandb: runs saved offline; upload them with: wandb sync {wandb['dir']}/offline-run-*")
    elif wandb:
        where = "/".join(x for x in (wandb.get("entity"), wandb.get("project")) if x)
        print(f"wandb: project {where}, group {wandb.get('group')}")
        for name, url in (wandb.get("urls") or {}).items():  # each run's page, the summary run's too
            print(f"wandb: {name}: {url}")


def _results(args: argparse.Namespace) -> int:
    from tune_service.results.analysis import load_results

    if Path(args.experiment).exists() or args.address is None and not args.experiment.startswith("raysubmit_"):
        outcome = load_results(args.experiment).result  # a running sweep's too
    else:
        from tune_service.jobs import attach

        outcome = attach(args.experiment, args.address).results()
    _print_outcome(outcome, args.top)
    return EXIT_OK


def _report(args: argparse.Namespace) -> int:
    from dataclasses import replace

    from tune_service.experiment.remote import is_remote
    from tune_service.results.analysis import load_results
    from tune_service.results.report import REPORT_FILE, write_report

    loaded = load_results(args.experiment)
    # The report reads the trials' files where they were loaded from (remote storage: a local copy), and
    # a remote experiment's report is written into the current directory unless --output says otherwise.
    outcome = replace(loaded.result, experiment_dir=str(loaded.experiment_dir))
    output = args.output or (REPORT_FILE if is_remote(args.experiment) else None)
    path = write_report(outcome, Path(output) if output else None)
    print(f"report: {path}")
    return EXIT_OK


def _submit(args: argparse.Namespace) -> int:
    from tune_service.jobs import submit
    from tune_service.spec import parse_override

    overrides = dict(parse_override(text) for text in args.overrides)
    runtime_env = {"working_dir": args.working_dir} if args.working_dir else None
    job = submit(
        args.spec, args.address, storage=args.storage, name=args.name, runtime_env=runtime_env, overrides=overrides
    )
    print(f"submitted: job {job.job_id} at {job.address}")
    print(f"experiment: {job.experiment_dir}")
    print(f"follow it:  tune-run logs {job.job_id} --follow   (status, stop, results likewise)")
    if args.follow:
        return _print_logs(job, follow=True)
    return EXIT_OK


def _status(args: argparse.Namespace) -> int:
    from tune_service.jobs import attach

    job = attach(args.job_id, args.address)
    print(f"{job.job_id}  {job.status()}  {job.experiment_dir}")
    return EXIT_OK


def _logs(args: argparse.Namespace) -> int:
    from tune_service.jobs import attach

    return _print_logs(attach(args.job_id, args.address), follow=args.follow)


def _print_logs(job, follow: bool) -> int:
    if not follow:
        print(job.logs(), end="")
        return EXIT_OK
    for chunk in job.logs(follow=True):
        print(chunk, end="", flush=True)
    return EXIT_OK if job.status() == "SUCCEEDED" else EXIT_FAILED


def _stop(args: argparse.Namespace) -> int:
    from tune_service.jobs import attach

    job = attach(args.job_id, args.address)
    print(
        f"{job.job_id}  {job.stop()}; what finished: tune-run results {job.job_id}; "
        f"continue it: tune-run --resume {job.experiment_dir}"
    )
    return EXIT_OK


def _schema(args: argparse.Namespace) -> int:
    import json

    from tune_service.spec.schema import spec_schema

    text = json.dumps(spec_schema(), indent=2) + "\n"
    if args.output:
        Path(args.output).write_text(text, encoding="utf-8")
        print(f"schema: {args.output}")
    else:
        print(text, end="")
    return EXIT_OK


#: Every subcommand: its one-line summary, its parser's arguments, its handler.
COMMANDS: dict[str, tuple[str, Callable[[argparse.ArgumentParser], None], Callable[[argparse.Namespace], int]]] = {
    "run": ("run a sweep (the same as `tune-run SPEC`)", _run_parser, _run),
    "dry-run": ("print the resolved plan of a sweep; starts nothing", _dry_run_parser, _dry_run),
    "resume": ("finish an interrupted sweep (the same as `tune-run --resume DIR`)", _resume_parser, _resume),
    "results": ("show a sweep's leaderboard (a directory, or a submitted job's id)", _results_parser, _results),
    "report": ("write a sweep's report: one HTML page, no network needed to open it", _report_parser, _report),
    "submit": ("submit a sweep to a Ray cluster as a Ray Job", _submit_parser, _submit),
    "status": ("show a submitted sweep's state", _job_parser, _status),
    "logs": ("print a submitted sweep's output", lambda p: _job_parser(p, follow=True), _logs),
    "stop": ("stop a submitted sweep; what finished is kept", _job_parser, _stop),
    "schema": ("print the spec's JSON Schema (for completion of YAML in an editor)", _schema_parser, _schema),
}


def console_main() -> None:
    """``tune-run`` and ``python -m tune_service.cli``: :func:`main` in a process of its own.

    A wandb service this process inherited is not used: wandb hands its service to child processes
    (``WANDB_SERVICE``), so a driver started from a Python process that uses wandb (a notebook's cell, a
    launcher script) would open its runs in that process's service; killed outright, it would leave them
    "in use" there, and the resumed sweep could not log to them."""
    os.environ.pop("WANDB_SERVICE", None)
    sys.exit(main())


if __name__ == "__main__":  # pragma: no cover
    console_main()
