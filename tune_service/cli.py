"""``tune-run``: the command line. Thin: it parses arguments, calls the library, and turns a
:class:`TuneServiceError` into ``error: ...`` lines on stderr and exit code 2 (a traceback only with
``--debug``)."""

from __future__ import annotations

import argparse
import sys
from typing import Sequence

from tune_service.errors import TuneServiceError

EXIT_USAGE = 2


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="tune-run",
        description="Run a hyperparameter sweep of DDP trials on Ray Tune.",
    )
    p.add_argument("spec", help="sweep spec YAML (a W&B sweep file works as is)")
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                   help="override a spec key, dotted for nested keys (repeatable): --set scheduler.max_t=5")
    p.add_argument("--name", help="experiment name (default: the spec's name and the start time)")
    p.add_argument("--storage", default="experiments", help="directory that holds experiments (default: ./experiments)")
    p.add_argument("--address", help="Ray cluster to run on: 'auto' or HOST:PORT (default: an embedded local Ray)")
    p.add_argument("--dry-run", action="store_true", help="print the resolved plan and exit without starting Ray")
    p.add_argument("--debug", action="store_true", help="show tracebacks")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        return _run(args)
    except TuneServiceError as err:
        if args.debug:
            raise
        for line in str(err).splitlines():
            print(f"error: {line}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130


def _run(args: argparse.Namespace) -> int:
    from tune_service.plan import make_plan
    from tune_service.spec import load_spec, parse_override

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
    print(outcome.leaderboard())
    if outcome.best is not None:
        print(f"\nbest {outcome.metric}: {outcome.best.metrics.get(outcome.metric)} (trial {outcome.best.trial_id})")
    print(f"results: {outcome.experiment_dir}/summary.json, best config: {outcome.experiment_dir}/best_config.yaml")
    return 0 if outcome.best is not None else 1


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
