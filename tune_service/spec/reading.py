"""Reading a spec: a YAML file, inline YAML or JSON, or a mapping; ``--set`` overrides applied on the raw
document; then :func:`~tune_service.spec.validation.validate`. A file is read with bounds on its size
(:data:`MAX_SPEC_BYTES`), its decoding (UTF-8), its nesting (:data:`MAX_SPEC_DEPTH`) and its size once
YAML's aliases are expanded (:data:`MAX_SPEC_NODES`: an alias "bomb" of a few lines expands to billions
of values), with PyYAML's safe loader; a key given twice in one mapping is refused.
"""

from __future__ import annotations

import copy
import os
from dataclasses import replace
from pathlib import Path
from typing import Any, Hashable, Mapping, Sequence

import yaml

from tune_service.errors import Problem, SpecError
from tune_service.spec.sweep import SweepSpec
from tune_service.spec.validation import validate

MAX_SPEC_BYTES = 1_000_000
#: Mappings and lists inside one another, at most.
MAX_SPEC_DEPTH = 32
#: Values in the document with every alias expanded (a generous spec has a few hundred).
MAX_SPEC_NODES = 100_000


def load_spec(
    source: str | os.PathLike[str] | Mapping[str, Any], overrides: Mapping[str, Any] | None = None
) -> SweepSpec:
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
    spec = validate(raw, default_name=origin)
    if isinstance(source, (str, Path)) and not str(source).lstrip().startswith("{"):
        spec_dir = Path(source).resolve().parent
        where, note = (
            program_directory(spec.program, spec.command, spec_dir, Path.cwd())
            if spec.runs_program
            else (spec_dir, None)
        )
        spec = replace(spec, directory=str(where), notes=(*spec.notes, *filter(None, [note])))  # where it runs
    return spec


def program_directory(
    program: str | None, command: Sequence[str] | None, spec_dir: Path, cwd: Path
) -> tuple[Path, str | None]:
    """Where a W&B program runs, and a note when its program was found nowhere. W&B's agent runs it in the
    agent's working directory, with ``program`` (or the files ``command`` names) relative to it; a sweep
    file kept beside its program (``program: train.py``) is commonly run from elsewhere (``tune-run
    project/sweep.yaml``). So: the spec file's directory when the program is there, else the working
    directory when it is there, as under W&B's agent; else the spec file's directory, with a note."""
    names = [program] if program else [t for t in command or () if "${" not in t and not t.startswith("-")]
    for directory in (spec_dir, cwd):
        if any((directory / name).is_file() for name in names):
            return directory, None
    if program:
        return spec_dir, (
            f"program: {program!r} is neither beside the spec file ({spec_dir}) nor in the working "
            f"directory ({cwd}), where W&B's agent would look; trials run it from {spec_dir}"
        )
    return spec_dir, None


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


def _read(source: str | os.PathLike[str] | Mapping[str, Any]) -> tuple[dict, str]:
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
    data = path.read_bytes()
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as err:
        raise SpecError(
            [Problem("", f"{path.name}: must be UTF-8 text, got byte {data[err.start]:#04x} at offset {err.start}")]
        ) from None
    return _parse(text, path.name), path.stem


def _parse(text: str, label: str) -> dict:
    """The mapping a spec's YAML text holds; ``label`` names the text in errors (its file name)."""
    if len(text.encode("utf-8")) > MAX_SPEC_BYTES:
        raise SpecError([Problem("", f"{label} must be at most {MAX_SPEC_BYTES} bytes, got {len(text.encode())}")])
    loader = _SpecLoader(text)  # a SafeLoader: a spec must not be able to run code
    try:
        node = loader.get_single_node()
        _check_size(node, label)  # before anything is built from it
        doc = loader.construct_document(node) if node is not None else None
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        reason = getattr(err, "problem", None) or str(err).splitlines()[0]
        raise SpecError([Problem("", f"{label}: invalid YAML{where}: {reason}")]) from None
    except RecursionError:
        raise SpecError([Problem("", f"{label}: document is nested too deeply")]) from None
    finally:
        loader.dispose()
    if not isinstance(doc, dict):
        raise SpecError([Problem("", f"{label}: must be a mapping of keys to values, got {type(doc).__name__}")])
    return doc


def _check_size(root: yaml.Node | None, label: str) -> None:
    """Refuse a document nested deeper than :data:`MAX_SPEC_DEPTH` or holding more than
    :data:`MAX_SPEC_NODES` values once its aliases are expanded. An alias is the node it names, met
    again: each node's expanded size is counted once (memoised), so a bomb is measured, not expanded."""
    sizes: dict[int, int] = {}
    depths: dict[int, int] = {}

    def children(node: yaml.Node) -> list[yaml.Node]:
        if isinstance(node, yaml.MappingNode):
            return [n for pair in node.value for n in pair]
        return list(node.value) if isinstance(node, yaml.SequenceNode) else []

    # Post-order without recursion: a node's size and depth once its children's are known.
    stack = [(root, False)] if root is not None else []
    while stack:
        node, expanded = stack.pop()
        if id(node) in sizes:
            continue
        kids = children(node)
        if not expanded:
            stack.append((node, True))
            stack.extend((kid, False) for kid in kids if id(kid) not in sizes)
            if len(stack) > MAX_SPEC_NODES:
                break
            continue
        sizes[id(node)] = min(1 + sum(sizes.get(id(k), 1) for k in kids), MAX_SPEC_NODES + 1)
        depths[id(node)] = 1 + max((depths.get(id(k), 1) for k in kids), default=0)
        if depths[id(node)] > MAX_SPEC_DEPTH + 1:
            raise SpecError(
                [
                    Problem(
                        "",
                        f"{label}: must nest at most {MAX_SPEC_DEPTH} levels of mappings and lists, "
                        f"got more (line {node.start_mark.line + 1})",
                    )
                ]
            )
        if sizes[id(node)] > MAX_SPEC_NODES:
            break
    total = sizes.get(id(root), MAX_SPEC_NODES + 1) if root is not None else 0
    if total > MAX_SPEC_NODES:
        raise SpecError(
            [
                Problem(
                    "",
                    f"{label}: must hold at most {MAX_SPEC_NODES} values with its aliases expanded, "
                    f"got more (YAML aliases that repeat each other multiply)",
                )
            ]
        )


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
