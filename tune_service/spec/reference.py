"""The spec's reference page, ``docs/spec-reference.md``, generated from its JSON Schema
(:func:`~tune_service.spec.schema.spec_schema`) so that it cannot drift from the spec: one table per
section of the document (key, type, default, allowed values, description), the parameter forms and
their keys. Regenerate it with::

    python -m tune_service.spec.reference > docs/spec-reference.md
"""

from __future__ import annotations

import json
from typing import Any, Iterator

COMMAND = "python -m tune_service.spec.reference > docs/spec-reference.md"
_COLUMNS = ("key", "type", "default", "allowed values", "description")


def spec_reference_markdown(schema: dict) -> str:
    """The reference page of the spec that ``schema`` describes, as Markdown."""
    defs = schema.get("$defs", {})
    lines = [
        "# Sweep spec reference",
        "",
        f"_Generated from the spec's JSON Schema by `{COMMAND}`; do not edit it by hand._",
        "",
        schema["description"],
        "",
        "The schema itself: `tune-run schema -o spec.schema.json`. With it, an editor completes and checks a "
        "spec's YAML; for the YAML language server (VS Code's YAML extension, and others), put "
        "`# yaml-language-server: $schema=spec.schema.json` on the spec's first line.",
        "",
    ]
    sections = list(_sections("", schema))
    for path, section in sections:
        title = "Top level" if not path else f"`{path}`"
        lines += [f"## {title}", ""]
        if path:
            lines += [section["description"], ""]
        lines += _table(_COLUMNS, [_row(key, prop, defs) for key, prop in section["properties"].items()]) + [""]
    rules = [rule["description"] for rule in schema.get("allOf", ()) if "description" in rule]
    if rules:
        lines += ["## Rules across keys", "", *(f"- {rule}" for rule in rules), ""]
    lines += _parameters(schema, defs)
    return "\n".join(lines).rstrip("\n") + "\n"


def _sections(path: str, node: dict) -> Iterator[tuple[str, dict]]:
    """Every mapping of keys in the document, depth first, as (dotted path, its schema with the
    mapping's description)."""
    mapping = _mapping(node)
    assert mapping is not None, f"{path or 'the document'}: not a mapping of keys"
    yield path, {**mapping, "description": node.get("description", "")}
    for key, prop in mapping["properties"].items():
        if _mapping(prop) is not None:
            yield from _sections(f"{path}.{key}" if path else key, prop)


def _mapping(node: dict) -> dict | None:
    """The schema of the mapping of keys ``node`` describes (perhaps nullable), or None."""
    if "properties" in node:
        return node
    for part in node.get("anyOf", ()):
        if "properties" in part:
            return part
    return None


def _row(key: str, prop: dict, defs: dict) -> list[str]:
    default = f"`{_yaml(prop['default'])}`" if "default" in prop else ""
    return [f"`{key}`", _type(prop, defs), default, _allowed(prop, defs), prop.get("description", "")]


def _type(node: dict, defs: dict) -> str:
    """A schema's type in words: ``integer``, ``boolean or `auto` ``, ``mapping``, ``list of string``."""
    if "$ref" in node:
        target = defs[node["$ref"].rsplit("/", 1)[-1]]
        return target.get("title") or _type(target, defs)
    if "const" in node:
        return f"`{_yaml(node['const'])}`"
    for combinator in ("anyOf", "oneOf"):
        if combinator in node and _mapping(node) is not node:
            parts = []
            for part in node[combinator]:
                text = _type(part, defs)
                if text not in parts:
                    parts.append(text)
            return " or ".join(parts)
    kind = node.get("type")
    if kind is None:
        return "any"
    if isinstance(kind, list):
        return " or ".join(kind)
    if kind == "object":
        return "mapping"
    if kind == "array":
        return f"list of {_type(node['items'], defs)}" if "items" in node else "list"
    return kind


def _allowed(node: dict, defs: dict) -> str:
    """The values a schema allows beyond its type: choices and bounds."""
    found = []
    if "enum" in node:
        found.append(", ".join(f"`{_yaml(v)}`" for v in node["enum"]))
    bounds = (("minimum", "≥ {}"), ("exclusiveMinimum", "> {}"), ("maximum", "≤ {}"), ("exclusiveMaximum", "< {}"))
    found += [text.format(_yaml(node[word])) for word, text in bounds if word in node]
    if node.get("multipleOf") == 1:
        found.append("integral")
    if node.get("minItems") == 1 or node.get("minLength") == 1 or node.get("pattern") == r"\S":
        found.append("not empty")
    if node.get("minProperties") == 1 and node.get("maxProperties") == 1:
        found.append("one entry")
    if "items" in node:
        inner = _allowed(node["items"], defs)
        if inner:
            found.append(f"each {inner}")
    if _mapping(node) is None:
        for part in node.get("anyOf", ()):
            inner = _allowed(part, defs)
            if inner:
                found.append(inner)
    return "; ".join(found)


def _parameters(schema: dict, defs: dict) -> list[str]:
    forms = defs["parameter"]["oneOf"]
    lines = [
        "## Parameters",
        "",
        f"{defs['parameters']['description']} {defs['parameter']['description']}",
        "",
        "### Forms",
        "",
    ]
    rows = []
    for form in forms:
        required = form.get("required", [])
        optional = [k for k in form["properties"] if k not in required]
        rows.append(
            [
                f"`{form['title']}`",
                ", ".join(f"`{k}`" for k in required),
                ", ".join(f"`{k}`" for k in optional),
                form["description"],
            ]
        )
    lines += _table(("form", "required keys", "optional keys", "samples"), rows) + [""]

    lines += ["### Keys", ""]
    keys: dict[str, list[tuple[str, dict]]] = {}
    for form in sorted(forms, key=lambda f: "parameters" in f["properties"]):  # a group's one key last
        for key, prop in form["properties"].items():
            keys.setdefault(key, []).append((form["title"], prop))
    rows = []
    for key, uses in keys.items():
        first = uses[0][1]
        defaults = {_yaml(prop["default"]) for _, prop in uses if "default" in prop}
        default = ", ".join(f"`{d}`" for d in sorted(defaults))
        consts = [prop["const"] for _, prop in uses if "const" in prop]
        kind = _type({"enum": consts, "type": "string"} if consts else first, defs)
        rows.append([f"`{key}`", kind, default, _allowed_by_form(key, uses, defs), first.get("description", "")])
    lines += _table(_COLUMNS, rows) + [""]
    return lines


def _allowed_by_form(key: str, uses: list[tuple[str, dict]], defs: dict) -> str:
    """A key's allowed values, naming the forms where they differ (``min``: > 0 for log_uniform_values...)."""
    consts = [prop["const"] for _, prop in uses if "const" in prop]
    if consts:
        return ", ".join(f"`{_yaml(c)}`" for c in consts)
    by_text: dict[str, list[str]] = {}
    for title, prop in uses:
        by_text.setdefault(_allowed(prop, defs), []).append(title.removeprefix("distribution: "))
    if len(by_text) == 1:
        return next(iter(by_text))
    return "; ".join(f"{text} for {', '.join(titles)}" for text, titles in by_text.items() if text)


def _yaml(value: Any) -> str:
    """A value as a spec writes it."""
    return value if isinstance(value, str) and value else json.dumps(value)


def _table(columns: tuple[str, ...], rows: list[list[str]]) -> list[str]:
    def line(cells) -> str:
        return "| " + " | ".join(str(c).replace("|", "\\|").replace("\n", " ") for c in cells) + " |"

    return [line(columns), "|" + "|".join("---" for _ in columns) + "|", *(line(row) for row in rows)]


if __name__ == "__main__":  # pragma: no cover
    from tune_service.spec.schema import spec_schema

    print(spec_reference_markdown(spec_schema()), end="")
