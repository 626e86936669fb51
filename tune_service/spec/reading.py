"""Reading a spec: a YAML file, inline YAML or JSON, or a mapping; ``--set`` overrides applied on the raw
document; then :func:`~tune_service.spec.validation.validate`. A file is read with bounds on its size,
with PyYAML's safe loader, and a key given twice in one mapping is refused.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any, Hashable, Mapping

import yaml

from tune_service.errors import Problem, SpecError
from tune_service.spec.sweep import SweepSpec
from tune_service.spec.validation import validate

MAX_SPEC_BYTES = 1_000_000


def load_spec(source: str | Path | Mapping[str, Any], overrides: Mapping[str, Any] | None = None) -> SweepSpec:
    """Read, override and validate a sweep spec.

    Args:
        source: a path to a YAML file, an inline YAML or JSON mapping (text starting with ``{``), or an
            already parsed mapping (a Python dict).
        overrides: dotted keys set on the raw document before validation, e.g.
            ``{"run_cap": 4, "scheduler.max_t": 3}`` (what ``tune-run --set`` passes).

    Returns:
        The validated, frozen :class:`SweepSpec`.

    Raises:
        SpecError: with every problem found, each naming its dotted path, the rule and the value.
    """
    raw, origin = _read(source)
    raw = copy.deepcopy(raw)
    for key, value in (overrides or {}).items():
        _set_dotted(raw, key, value)
    return validate(raw, default_name=origin)


def parse_override(text: str) -> tuple[str, Any]:
    """Parse one ``KEY=VALUE`` of ``--set``; the value is read as YAML (``4`` is an int, ``a`` a str)."""
    key, sep, value = text.partition("=")
    if not sep or not key.strip():
        raise SpecError([Problem("--set", f"must be KEY=VALUE, got {text!r}")])
    try:
        parsed = yaml.safe_load(value) if value.strip() else ""
    except yaml.YAMLError:
        parsed = value
    return key.strip(), parsed


def _read(source: str | Path | Mapping[str, Any]) -> tuple[dict, str]:
    if isinstance(source, Mapping):
        return dict(source), "sweep"
    if isinstance(source, str) and source.lstrip().startswith("{"):
        # An inline mapping (YAML flow style, so JSON too): how a submitted sweep's spec travels in its
        # Ray Job's entrypoint, where no file of the submitter's exists.
        return _parse(source, "inline spec"), "sweep"
    path = Path(source)
    if not path.is_file():
        raise SpecError([Problem("", f"spec file not found: {str(path)!r}")])
    if path.stat().st_size > MAX_SPEC_BYTES:
        raise SpecError([Problem("", f"spec file must be at most {MAX_SPEC_BYTES} bytes, got {path.stat().st_size}")])
    return _parse(path.read_text(encoding="utf-8"), path.name), path.stem


def _parse(text: str, label: str) -> dict:
    """The mapping a spec's YAML text holds; ``label`` names the text in errors (its file name)."""
    if len(text.encode("utf-8")) > MAX_SPEC_BYTES:
        raise SpecError([Problem("", f"{label} must be at most {MAX_SPEC_BYTES} bytes, got {len(text.encode())}")])
    try:
        doc = yaml.load(text, Loader=_SpecLoader)  # a SafeLoader: a spec must not be able to run code
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        reason = getattr(err, "problem", None) or str(err).splitlines()[0]
        raise SpecError([Problem("", f"{label}: invalid YAML{where}: {reason}")]) from None
    except RecursionError:
        raise SpecError([Problem("", f"{label}: document is nested too deeply")]) from None
    if not isinstance(doc, dict):
        raise SpecError([Problem("", f"{label}: must be a mapping of keys to values, got {type(doc).__name__}")])
    return doc


class _SpecLoader(yaml.SafeLoader):
    """PyYAML's safe loader, refusing a key given twice in one mapping (YAML would keep the last one
    silently, and a sweep would run with half of what its author wrote)."""

    def construct_mapping(self, node, deep=False):
        seen = set()
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=deep)
            if not isinstance(key, Hashable):
                continue  # the base loader reports an unhashable key itself
            if key in seen:
                raise yaml.constructor.ConstructorError(None, None, f"duplicate key {key!r}", key_node.start_mark)
            seen.add(key)
        return super().construct_mapping(node, deep)


def _set_dotted(doc: dict, dotted: str, value: Any) -> None:
    node = doc
    parts = dotted.split(".")
    for part in parts[:-1]:
        child = node.get(part)
        if not isinstance(child, dict):
            child = {}
            node[part] = child
        node = child
    node[parts[-1]] = value
