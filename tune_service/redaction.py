"""Secrets never reach what tune-service writes: summaries, configs, wandb, error lines, log lines.

A secret is the value of an environment variable whose name looks secret: one of its parts (split at
``_``, ``-``, ``.`` and camelCase) is ``key``, ``token``, ``password``, ``passwd``, ``secret`` or
``credential(s)``, or ends with one of the longer words (``PGPASSWORD``); as in ``WANDB_API_KEY``,
``HF_TOKEN``, ``DB_PASSWORD``, ``AWS_SECRET_ACCESS_KEY``, ``RAY_AUTH_TOKEN``. Values shorter than
:data:`MIN_SECRET_LENGTH` are not treated as secrets (they would blank out ordinary words). Wherever
such a value appears in text we write, it becomes ``***``.

Beyond those values, :func:`redact` blanks the string value of every mapping key that looks secret
(a config's ``api_token: ...``), and text patterns that carry credentials on their face: an
environment assignment (``HF_TOKEN=...``), a URL's query parameter (``?api_key=...``) and a URL's
password (``https://user:...@host``). The passwords of the user's ``~/.netrc`` (where ``wandb login``
keeps its API key) count as the environment's secrets.

A spec is saved as it is (``sweep.json``: resume needs it), and Ray saves every trial's config in the
trial's directory; so a spec that holds a secret's value is refused (:func:`refuse_secrets_in_spec`).
A task reads its secrets from its environment instead.

An error a trial raises is scrubbed in the trial's own process (:func:`redacted_errors`), before Ray
formats it into the trial's ``error.txt``, ``error.pkl`` and the driver's log. The driver's secrets
travel there as salted SHA-256 fingerprints (:class:`Fingerprints`), never as values.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import os
import re
import secrets as _random
import traceback
from dataclasses import dataclass
from typing import Any, Iterator, Mapping

REDACTED = "***"
MIN_SECRET_LENGTH = 8
SECRET_WORDS = frozenset({"key", "apikey", "token", "password", "passwd", "secret", "credential", "credentials"})

_NAME_PARTS = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|\d+")
_WORDS = "|".join(sorted(SECRET_WORDS, key=len, reverse=True))
#: A name whose last part is a secret word: ``HF_TOKEN``, ``api_key``, ``x-api-key``, ``db.password``.
_NAME = rf"(?:[A-Za-z0-9]+[_.-])*(?:{_WORDS})"
#: ``NAME=value`` (an environment assignment, a keyword argument, a URL's query parameter).
_ASSIGNMENT = re.compile(rf"(?<![A-Za-z0-9])({_NAME}=)(['\"]?)([^\s'\"&#,;)]+)", re.IGNORECASE)
#: ``'name': 'value'`` (a mapping as Python or JSON prints it).
_QUOTED_ENTRY = re.compile(rf"(['\"])({_NAME})\1(\s*:\s*)(['\"])((?:(?!\4).)+)\4", re.IGNORECASE)
#: A URL's password: ``scheme://user:password@host``.
_URL_PASSWORD = re.compile(r"(\b[a-zA-Z][a-zA-Z0-9+.-]*://[^/\s:@'\"]*:)([^/\s@'\"]+)(@)")


def looks_secret(name: Any) -> bool:
    """True if a part of ``name`` is a secret word: ``HF_TOKEN``, ``apiKey``, ``db-password``."""
    if not isinstance(name, str):
        return False
    parts = [p.lower() for p in _NAME_PARTS.findall(name)]
    # A long word may end a part (PGPASSWORD, APITOKEN); "key" must be a part of its own (not MONKEY).
    return any(p in SECRET_WORDS or any(p.endswith(w) for w in SECRET_WORDS if len(w) >= 5) for p in parts)


def environment_secrets(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The secrets of ``environ`` (by default ``os.environ``): name -> value (without surrounding
    whitespace: a token read from a file often ends with a newline that its uses do not carry); and the
    passwords of the user's netrc file (:func:`netrc_secrets`), where ``wandb login`` keeps its key."""
    environ = os.environ if environ is None else environ
    found = {
        name: value.strip()
        for name, value in environ.items()
        if looks_secret(name) and len(value.strip()) >= MIN_SECRET_LENGTH
    }
    return {**found, **netrc_secrets(environ)}


#: How a netrc password is named among the secrets (it has no variable of its own).
NETRC_SECRET = "the password of {host} in {path}"


def netrc_secrets(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The passwords of the netrc file (``$NETRC``, else ``~/.netrc``), each named by
    :data:`NETRC_SECRET`; none when there is no readable file. Read again only when the file changes."""
    environ = os.environ if environ is None else environ
    path = environ.get("NETRC") or os.path.join(os.path.expanduser("~"), ".netrc")
    try:
        changed = os.stat(path).st_mtime_ns
    except OSError:
        return {}
    return dict(_netrc_passwords(path, changed))


@functools.lru_cache(maxsize=4)
def _netrc_passwords(path: str, changed: int) -> tuple[tuple[str, str], ...]:
    import netrc

    try:
        hosts = netrc.netrc(path).hosts
    except (OSError, netrc.NetrcParseError):
        return ()  # a file that does not parse holds nothing netrc's readers (wandb's among them) would use
    return tuple(
        (NETRC_SECRET.format(host=host, path=path), password.strip())
        for host, (_, _, password) in hosts.items()
        if password and len(password.strip()) >= MIN_SECRET_LENGTH
    )


def redact_text(text: str, values: Any = None, *, by_name: bool = True) -> str:
    """``text`` with every secret value (default: the environment's) as ``***``; with ``by_name``, also
    the values that credential patterns name (``HF_TOKEN=...``, ``?api_key=...``, ``'password': '...'``,
    a URL's password)."""
    values = environment_secrets().values() if values is None else values
    for value in sorted(set(values), key=len, reverse=True):  # a secret inside a longer one: the longer first
        if value and value in text:
            text = text.replace(value, REDACTED)
    if not by_name:
        return text
    text = _ASSIGNMENT.sub(rf"\1\2{REDACTED}", text)
    text = _QUOTED_ENTRY.sub(rf"\1\2\1\3\4{REDACTED}\4", text)
    return _URL_PASSWORD.sub(rf"\1{REDACTED}\3", text)


def redact(obj: Any, values: Any = None, *, by_name: bool = True) -> Any:
    """A copy of ``obj`` (JSON-like: mappings, lists, tuples, strings, numbers) with secrets as ``***``.

    Strings are redacted as :func:`redact_text` does. With ``by_name``, a mapping entry whose key looks
    secret keeps its key and loses its value, unless that value is a number, a bool or ``None``
    (``max_tokens: 512`` stays). Without it, only the secret values go (what a spec holds must stay
    as it is, for resume).
    """
    values = tuple(environment_secrets().values()) if values is None else tuple(values)
    return _redact(obj, values, by_name)


def _redact(obj: Any, values: tuple[str, ...], by_name: bool) -> Any:
    if isinstance(obj, str):
        return redact_text(obj, values, by_name=by_name)
    if isinstance(obj, Mapping):
        return {
            key: (REDACTED if by_name and looks_secret(key) and _blankable(value) else _redact(value, values, by_name))
            for key, value in obj.items()
        }
    if isinstance(obj, (list, tuple)):
        return type(obj)(_redact(item, values, by_name) for item in obj)
    return obj


def _blankable(value: Any) -> bool:
    return value is not None and not isinstance(value, (bool, int, float))


def refuse_secrets_in_spec(source: Mapping[str, Any], environ: Mapping[str, str] | None = None) -> None:
    """Refuse a spec that holds the value of a secret environment variable anywhere (a constant
    parameter, a list of values, a tag). What a spec holds is saved in the experiment directory by us
    (``sweep.json``) and by Ray (every trial's config), and logged to wandb.

    Raises:
        TuneServiceError: naming where the value is and which variable holds it (never the value).
    """
    from tune_service.errors import Problem, SpecError

    found = environment_secrets(environ)
    problems = [
        Problem(
            path,
            f"holds the value of {_named(name)}; a spec is saved with the experiment "
            f"(sweep.json, every trial's config, wandb), so it must not hold a secret: let the "
            f"task read it from its environment",
        )
        for path, text in _strings(source, "")
        for name, value in found.items()
        if value in text
    ]
    if problems:
        raise SpecError(problems)


def _named(secret: str) -> str:
    return secret if secret.startswith(NETRC_SECRET.split("{")[0]) else f"the environment variable {secret}"


def _strings(obj: Any, path: str) -> Iterator[tuple[str, str]]:
    if isinstance(obj, str):
        yield path, obj
    elif isinstance(obj, (int, float)) and not isinstance(obj, bool):  # a numeric PIN, read as a number
        yield path, str(obj)
    elif isinstance(obj, Mapping):
        for key, value in obj.items():
            yield from _strings(key, path)
            yield from _strings(value, f"{path}.{key}" if path else str(key))
    elif isinstance(obj, (list, tuple)):
        for index, item in enumerate(obj):
            yield from _strings(item, f"{path}[{index}]")


@dataclass(frozen=True)
class Fingerprints:
    """Salted SHA-256 fingerprints of secrets, by length: what another process needs to find those
    secrets in text without ever holding them."""

    salt: bytes
    digests: tuple[tuple[int, frozenset[bytes]], ...]

    @classmethod
    def of(cls, values: Any) -> "Fingerprints":
        salt = _random.token_bytes(16)
        by_length: dict[int, set[bytes]] = {}
        for value in set(values):
            data = value.encode("utf-8")
            by_length.setdefault(len(data), set()).add(hashlib.sha256(salt + data).digest())
        return cls(salt, tuple((n, frozenset(d)) for n, d in sorted(by_length.items(), reverse=True)))

    @classmethod
    def of_environment(cls, environ: Mapping[str, str] | None = None) -> "Fingerprints":
        return cls.of(environment_secrets(environ).values())

    def find(self, text: str) -> set[str]:
        """The substrings of ``text`` that are fingerprinted secrets."""
        data, found = text.encode("utf-8"), set()
        for length, digests in self.digests:
            for start in range(len(data) - length + 1):
                piece = data[start : start + length]
                if hashlib.sha256(self.salt + piece).digest() in digests:
                    with contextlib.suppress(UnicodeDecodeError):
                        found.add(piece.decode("utf-8"))
        return found


def redacted_errors(fingerprints: Fingerprints | None = None) -> contextlib.AbstractContextManager:
    """A context in which an exception that quotes a secret (this process's, or one ``fingerprints``
    finds) is scrubbed before it propagates: its messages (and those of the exceptions it wraps) keep
    their types and lose the secrets."""
    return _RedactedErrors(fingerprints)


def scrubbing(fn, fingerprints: Fingerprints | None = None):
    """``fn`` (a rank's training function), its errors scrubbed as in :func:`redacted_errors` (before
    Ray Train logs the rank's traceback and hands the error on) and what it prints as in
    :func:`redacted_output`. Its signature stays ``fn``'s."""

    @functools.wraps(fn)
    def scrubbed(*args, **kwargs):
        with redacted_errors(fingerprints), redacted_output(fingerprints):
            return fn(*args, **kwargs)

    return scrubbed


@contextlib.contextmanager
def redacted_output(fingerprints: Fingerprints | None = None) -> Iterator[None]:
    """While the block runs, what this process prints (``sys.stdout``, ``sys.stderr``: a task's prints,
    the logging it sets up) is written a line at a time with its secrets (this process's, or those
    ``fingerprints`` find) as ``***``: a rank's output lands in Ray's worker logs, and on the driver's
    console with ``-v``. (Output written below Python, by C code, is not seen.)"""
    import sys

    saved = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = (_RedactingStream(stream, fingerprints) for stream in saved)
    try:
        yield
    finally:
        for stream in (sys.stdout, sys.stderr):
            stream.flush()
        sys.stdout, sys.stderr = saved


class _RedactingStream:
    """A text stream that holds a partial line (a secret may be split across writes) and writes each
    whole line, redacted, to ``target``."""

    def __init__(self, target: Any, fingerprints: Fingerprints | None):
        self.target, self.fingerprints, self.pending = target, fingerprints, ""

    def write(self, text: str) -> int:
        self.pending += text
        if "\n" in self.pending:
            lines, _, self.pending = self.pending.rpartition("\n")
            self._emit(lines + "\n")
        return len(text)

    def flush(self) -> None:
        if self.pending:
            self._emit(self.pending)
            self.pending = ""
        self.target.flush()

    def _emit(self, text: str) -> None:
        values = set(environment_secrets().values()) | (self.fingerprints.find(text) if self.fingerprints else set())
        self.target.write(redact_text(text, values))
        self.target.flush()

    def __getattr__(self, name: str) -> Any:  # fileno, isatty, encoding...: the target's
        return getattr(self.target, name)


class _RedactedErrors(contextlib.AbstractContextManager):
    def __init__(self, fingerprints: Fingerprints | None):
        self.fingerprints = fingerprints

    def __exit__(self, kind, error, tb):
        if error is None or not isinstance(error, Exception):
            return False
        text = _describe(error)
        values = set(environment_secrets().values()) | (self.fingerprints.find(text) if self.fingerprints else set())
        if redact_text(text, values, by_name=False) == text:
            return False
        scrubbed = scrub_exception(error, values)
        if scrubbed is error:
            return False  # re-raised as it is, now without the secrets
        raise scrubbed from None


def _describe(error: BaseException) -> str:
    """Everything Ray may write of ``error``: its formatted chain and the text of what it wraps."""
    parts: list[str] = []
    for exc in _chain(error):
        with contextlib.suppress(Exception):
            parts.append(str(exc))
        parts.extend(_attribute_strings(exc))
    with contextlib.suppress(Exception):
        parts.extend(traceback.format_exception(error))
    return "\n".join(parts)


def scrub_exception(error: BaseException, values: Any) -> BaseException:
    """``error`` with the secret ``values`` redacted from its message and the messages,
    tracebacks and attributes of every exception it wraps, in place. If the description of an
    exception still holds a secret (a ``__str__`` computed from something else), the result is a
    :class:`RedactedError` carrying the redacted description instead."""
    values = tuple(values)
    for exc in _chain(error):
        for name, value in [("args", exc.args), *getattr(exc, "__dict__", {}).items()]:
            if isinstance(value, (str, list, tuple, dict)):
                scrubbed = _redact(value, values, False)
                if scrubbed != value:
                    with contextlib.suppress(Exception):
                        setattr(exc, name, scrubbed)
    text = _describe(error)
    if redact_text(text, values, by_name=False) == text:
        return error
    lines = [line for line in redact_text(str(error), values, by_name=False).splitlines() if line.strip()]
    return RedactedError(f"{type(error).__name__}: {lines[-1].strip() if lines else ''}".rstrip(": "))


class RedactedError(Exception):
    """A trial's error whose message held a secret that could not be taken out of it in place."""


def _chain(error: BaseException) -> list[BaseException]:
    """``error`` and every exception it wraps: causes, contexts, and exceptions held in attributes
    (Ray's ``cause``, Ray Train's ``worker_failures``, ``controller_failure`` and ``_base_exc``)."""
    seen: set[int] = set()
    pending: list[Any] = [error]  # anything an attribute holds; only exceptions are taken
    found: list[BaseException] = []
    while pending:
        exc = pending.pop()
        if not isinstance(exc, BaseException) or id(exc) in seen:
            continue
        seen.add(id(exc))
        found.append(exc)
        pending += [exc.__cause__, exc.__context__, getattr(exc, "cause", None)]
        for value in getattr(exc, "__dict__", {}).values():
            items = (
                value.values() if isinstance(value, Mapping) else value if isinstance(value, (list, tuple)) else [value]
            )
            pending += [item for item in items if isinstance(item, BaseException)]
    return found


def _attribute_strings(exc: BaseException) -> list[str]:
    return [value for value in getattr(exc, "__dict__", {}).values() if isinstance(value, str)]
