"""The command line of a W&B program's trial: the sweep file's ``command`` with W&B's macros expanded,
as W&B's agent expands them (https://docs.wandb.ai/models/sweeps/sweep-config-keys#command-macros).

======================== ==============================================================================
``${env}``               ``/usr/bin/env``
``${interpreter}``       ``python`` (the trial's PATH finds the driver's interpreter first)
``${program}``           the sweep file's ``program``
``${args}``              ``--name=value`` for every parameter
``${args_no_boolean_flags}`` the same, but a true boolean is ``--name`` and a false one is left out
``${args_no_hyphens}``   ``name=value``
``${args_json}``         the parameters as one JSON argument
``${args_json_file}``    the path of a file holding that JSON
``${envvar:NAME}``       the value of the environment variable NAME
======================== ==============================================================================

Without ``command`` the command is W&B's default, ``${env} ${interpreter} ${program} ${args}``. Nested
parameters are passed as dotted names (``--optimizer.lr=0.01``); every other token is kept as it is.
"""

from __future__ import annotations

import json
import os
import re
import shlex
from pathlib import Path
from typing import Any, Mapping, Sequence

DEFAULT_COMMAND = ("${env}", "${interpreter}", "${program}", "${args}")
#: The macros that expand to several arguments (one per parameter), and those that expand in place.
LIST_MACROS = ("${args}", "${args_no_boolean_flags}", "${args_no_hyphens}")
_ENVVAR = re.compile(r"\$\{envvar:([^}]*)\}")
_MACRO = re.compile(r"\$\{[^}]*\}")


class CommandError(ValueError):
    """A macro that cannot be expanded (an unknown one, an unset environment variable)."""


def command_tokens(command: str | Sequence[str] | None) -> tuple[str, ...]:
    """The spec's ``command`` as a list of tokens (a string is split as a shell would); W&B's default
    when it is None."""
    if command is None:
        return DEFAULT_COMMAND
    if isinstance(command, str):
        return tuple(shlex.split(command))
    return tuple(str(token) for token in command)


def flat_parameters(params: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """Nested parameters as one level of dotted names, in order."""
    flat: dict[str, Any] = {}
    for key, value in params.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping):
            flat.update(flat_parameters(value, f"{name}."))
        else:
            flat[name] = value
    return flat


def _text(value: Any) -> str:
    """A value as W&B writes it into an argument (Python's ``str``; lists and dicts as JSON)."""
    return json.dumps(value) if isinstance(value, (list, dict)) else str(value)


def expand(
    command: str | Sequence[str] | None,
    program: str,
    params: Mapping[str, Any],
    args_json_file: str | Path | None = None,
    environ: Mapping[str, str] | None = None,
) -> list[str]:
    """The argument list a trial with ``params`` runs.

    ``args_json_file`` is where ``${args_json_file}`` points (the caller writes ``${args_json}``'s text
    there); ``environ`` is what ``${envvar:NAME}`` reads (this process's environment
    by default).

    Raises:
        CommandError: a macro is unknown, ``${envvar:NAME}`` names an unset variable, or
            ``${args_json_file}`` is used without a file.
    """
    flat = flat_parameters(params)
    lists = {
        "${args}": [f"--{k}={_text(v)}" for k, v in flat.items()],
        "${args_no_boolean_flags}": [
            f"--{k}" if v is True else f"--{k}={_text(v)}" for k, v in flat.items() if v is not False
        ],
        "${args_no_hyphens}": [f"{k}={_text(v)}" for k, v in flat.items()],
    }
    single = {
        "${env}": "/usr/bin/env",
        "${interpreter}": "python",
        "${program}": program,
        "${args_json}": json.dumps(flat),
    }
    environ = os.environ if environ is None else environ
    argv: list[str] = []
    for token in command_tokens(command):
        if token in lists:
            argv += lists[token]
            continue

        def one(match: re.Match, token: str = token) -> str:  # the token of this round of the loop
            macro = match.group(0)
            if macro in single:
                return single[macro]
            if macro == "${args_json_file}":
                if args_json_file is None:
                    raise CommandError("command: ${args_json_file} needs the trial's parameter file")
                return str(args_json_file)
            if (name := _ENVVAR.fullmatch(macro)) is not None:
                if name.group(1) not in environ:
                    raise CommandError(f"command: {macro} names an environment variable that is not set, got {token!r}")
                return environ[name.group(1)]
            raise CommandError(f"command: unknown macro {macro}; W&B's are {', '.join(MACROS)}, got {token!r}")

        argv.append(_MACRO.sub(one, token))
    return argv


#: Every macro :func:`expand` knows, as W&B's documentation names them.
MACROS = ("${env}", "${interpreter}", "${program}", *LIST_MACROS, "${args_json}", "${args_json_file}", "${envvar:NAME}")


def shown(argv: Sequence[str]) -> str:
    """The argument list as one shell line."""
    return " ".join(shlex.quote(a) for a in argv)
