"""The spec's JSON Schema (``tune-run schema``) and the reference page generated from it
(``docs/spec-reference.md``): built from the spec's own keys, choices and defaults, it agrees with
validation on every example spec and on the rules it states, and the page is regenerated with the spec."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest
import yaml

from tune_service import cli
from tune_service.errors import SpecError
from tune_service.spec import load_spec
from tune_service.spec.parameters import DISTRIBUTIONS, PARAMETER_KEYS
from tune_service.spec.reference import COMMAND, spec_reference_markdown
from tune_service.spec.schema import DESCRIPTIONS, PARAMETER_TYPES, TYPES, spec_schema
from tune_service.spec.validation import SECTION_KEYS
from tune_service.spec.wandb_engines import CUSTOM_METHOD, ENGINE_KEYS, ENGINES

ROOT = Path(__file__).resolve().parents[3]
REFERENCE = ROOT / "docs" / "spec-reference.md"
#: The repository's example specs and the W&B sweep files the tests read.
EXAMPLES = [*sorted((ROOT / "search_spaces").glob("*.yaml")),
            *sorted((ROOT / "tests" / "data" / "wandb_sweeps").glob("*.yaml"))]
BAD_SPECS = sorted((ROOT / "tests" / "data" / "bad_specs").glob("*.yaml"))
#: The rules the schema states, as validation words them: a bad spec whose error is one of these is
#: refused by the schema too.
STATED_RULES = re.compile(r": (unknown key|must be one of|must be an integer|must be a finite number|"
                          r"must be >=? \d+(?: for \w+)?, got|must be a mapping|must be a non-empty list|"
                          r"must give `value`|must be hyperband when method is bohb)")


@pytest.fixture(scope="module")
def schema() -> dict:
    return spec_schema()


@pytest.fixture(scope="module")
def validator(schema) -> jsonschema.Draft202012Validator:
    return jsonschema.Draft202012Validator(schema)


def refused(validator, doc) -> bool:
    return any(True for _ in validator.iter_errors(doc))


def sections(schema: dict) -> dict[str, dict]:
    """Every mapping of keys in the schema by dotted path ("" the top level): its properties."""
    found = {}

    def walk(path: str, node: dict) -> None:
        mapping = node if "properties" in node else next((p for p in node.get("anyOf", ()) if "properties" in p), None)
        if mapping is None:
            return
        found[path] = mapping["properties"]
        for key, prop in mapping["properties"].items():
            walk(f"{path}.{key}" if path else key, prop)

    walk("", schema)
    return found


def nested(dotted: str, leaf: dict) -> dict:
    """``{"training": {"ddp": leaf}}`` for ``training.ddp``."""
    doc = leaf
    for part in reversed(dotted.split(".")) if dotted else ():
        doc = {part: doc}
    return doc


def test_the_committed_reference_page_is_what_the_schema_generates_now(schema):
    expected = spec_reference_markdown(schema)
    assert REFERENCE.is_file(), f"docs/spec-reference.md is missing; generate it: {COMMAND}"
    assert REFERENCE.read_text(encoding="utf-8") == expected, \
        f"docs/spec-reference.md is out of date with the spec; regenerate it: {COMMAND}"
    assert COMMAND in expected.splitlines()[2]


def test_the_schema_is_a_valid_draft_2020_12_schema_and_plain_json(schema):
    jsonschema.Draft202012Validator.check_schema(schema)
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    assert json.loads(json.dumps(schema)) == schema


def test_tune_run_schema_prints_it(capsys, schema):
    assert cli.main(["schema"]) == 0
    assert json.loads(capsys.readouterr().out) == schema


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_every_example_spec_validates_against_the_schema(path, validator):
    load_spec(path)  # a valid spec
    doc = yaml.safe_load(path.read_text())  # PyYAML, as the spec's reader: `1e-4` is a string
    errors = [f"{'.'.join(map(str, e.absolute_path))}: {e.message}" for e in validator.iter_errors(doc)]
    assert errors == []


def test_the_examples_cover_the_grammar():
    assert len(EXAMPLES) >= 15 and any("wandb_sweeps" in str(p) for p in EXAMPLES)


def test_every_key_validation_accepts_is_in_the_schema_and_no_other(schema):
    found = sections(schema)
    assert set(found) == set(SECTION_KEYS)
    for path, keys in SECTION_KEYS.items():
        assert list(found[path]) == list(keys), path


@pytest.mark.parametrize("path", sorted(SECTION_KEYS), ids=lambda p: p or "top")
def test_validation_names_the_schemas_keys_as_the_valid_ones(path, schema):
    """Validation itself (not only its key lists): an unknown key's error lists the schema's keys."""
    with pytest.raises(SpecError) as info:
        load_spec(nested(path, {"zz_unknown": 1}))
    where = f"{path}.zz_unknown" if path else "zz_unknown"
    (problem,) = [p for p in info.value.problems if p.path == where]
    valid = problem.message.split("valid keys: ", 1)[1].split(", ")
    assert valid == list(sections(schema)[path])


def test_every_parameter_key_and_distribution_is_in_the_schema(schema):
    forms = schema["$defs"]["parameter"]["oneOf"]
    keys = {key for form in forms for key in form["properties"]}
    assert keys == set(PARAMETER_KEYS)
    assert [f["properties"]["distribution"]["const"] for f in forms if "distribution" in f["properties"]] == \
        list(DISTRIBUTIONS)
    with pytest.raises(SpecError) as info:
        load_spec({"parameters": {"x": {"zz_unknown": 1}}})
    assert info.value.problems[0].message.split("valid keys: ", 1)[1].split(", ") == list(PARAMETER_KEYS)


def test_no_description_or_type_is_left_for_a_key_the_spec_no_longer_has():
    keys = {f"{path}.{key}" if path else key for path, section in SECTION_KEYS.items() for key in section}
    keys |= {f"scheduler.{key}" for key in ENGINE_KEYS}  # W&B's scheduler block, the other reading of `scheduler`
    assert set(DESCRIPTIONS) <= keys
    assert set(TYPES) <= keys
    assert set(PARAMETER_TYPES) <= set(PARAMETER_KEYS)


def test_every_property_has_a_description(schema):
    def walk(node, where):
        if isinstance(node, dict):
            for key, prop in node.get("properties", {}).items():
                assert prop.get("description", "").strip(), f"{where}.{key}"
            for key, value in node.items():
                if key != "allOf":  # the rules across keys restate properties
                    walk(value, f"{where}/{key}")
        elif isinstance(node, list):
            for i, value in enumerate(node):
                walk(value, f"{where}/{i}")

    walk(schema, "#")


def test_the_choices_are_the_spec_constants(schema):
    from tune_service.spec.sweep import GANG_MODES, GOALS, METHODS, SCHEDULERS

    props = schema["properties"]
    assert props["method"]["enum"] == [*METHODS, CUSTOM_METHOD]
    assert props["scheduler"]["anyOf"][1]["properties"]["engine"]["enum"] == list(ENGINES)
    assert props["metric"]["properties"]["goal"]["enum"] == list(GOALS)
    assert props["scheduler"]["anyOf"][0]["properties"]["type"]["enum"] == list(SCHEDULERS)
    assert props["execution"]["properties"]["gangs"]["enum"] == list(GANG_MODES)


def test_writing_every_default_gives_the_spec_that_leaving_them_out_gives(schema, validator):
    """Each default is valid, and is the value validation uses when the key is absent."""
    doc: dict = {}
    for path, props in sections(schema).items():
        if path == "early_terminate":
            continue  # its keys set the scheduler: no typed field of its own
        for key, prop in props.items():
            if "default" in prop:
                node = doc
                for part in path.split(".") if path else ():
                    node = node.setdefault(part, {})
                node[key] = prop["default"]
    assert doc["method"] == "random" and doc["training"]["profile"] is False and doc["training"]["ddp"]
    assert not refused(validator, doc)
    assert load_spec(doc) == load_spec({})
    eta = sections(schema)["early_terminate"]["eta"]["default"]
    early = {"type": "hyperband", "min_iter": 1}
    assert load_spec({"early_terminate": {**early, "eta": eta}}) == load_spec({"early_terminate": early})


def test_an_unknown_top_level_key_or_a_bad_method_is_refused_by_both(validator):
    for doc in ({"methd": "random"}, {"method": "evolution"}, {"method": "bohb", "scheduler": {"type": "asha"}},
                {"scheduler": {"type": "median"}}, {"training": {"ddp": {"bucket_cap": 25}}}):
        assert refused(validator, doc), doc
        with pytest.raises(SpecError):
            load_spec(doc)
    assert not refused(validator, {"method": "bohb", "parameters": {"x": {"min": 0.0, "max": 1.0}}})


@pytest.mark.parametrize("body, valid", [
    ({"value": 3}, True),
    ({"value": None}, True),
    ({"values": [1, 2], "probabilities": [0.25, 0.75]}, True),
    ({"min": 1, "max": 5}, True),
    ({"min": 0.1, "max": 1.0, "when": None}, True),
    ({"distribution": "normal"}, True),
    ({"distribution": "q_normal", "mu": 0, "sigma": 2, "q": 0.5, "min": -4, "max": 4}, True),
    ({"distribution": "log_uniform_values", "min": "1e-4", "max": "1e-2"}, True),
    ({"distribution": "log_uniform", "min": -9, "max": -2}, True),
    ({"distribution": "categorical", "values": ["a", "b"]}, True),
    ({"distribution": "int_uniform", "min": 1, "max": 3, "when": {"opt": "sgd"}}, True),
    ({"distribution": "q_beta", "a": 2, "b": 3, "q": 0.1}, True),
    ({"parameters": {"lr": {"value": 0.1}, "inner": {"parameters": {"x": {"values": [1]}}}}}, True),
    ({"distribution": "normal", "min": 0}, False),          # a truncated normal needs both bounds
    ({"min": 1, "max": 2, "q": 1}, False),                   # q needs a q_ form
    ({"value": 1, "values": [1]}, False),                    # two forms at once
    ({"distribution": "beta", "min": 0, "max": 1}, False),
    ({"distribution": "uniform", "min": 0}, False),
    ({"distribution": "int_uniform", "min": 1.5, "max": 3}, False),
    ({"distribution": "log_uniform_values", "min": 0, "max": 1}, False),
    ({"distribution": "gaussian", "mu": 0}, False),
    ({"values": []}, False),
    ({"values": [1, 2], "probabilities": [-0.5, 1.5]}, False),
    ({"min": 0.1, "max": 1.0, "when": {"opt": "sgd", "model": "mlp"}}, False),
    ({"parameters": {}}, False),
    ({"parameters": {"lr": {"value": 0.1}}, "value": 2}, False),
    ({"maxx": 1}, False),
    (0.1, False),
], ids=repr)
def test_the_schema_reads_a_parameter_as_validation_does(body, valid, validator):
    doc = {"parameters": {"opt": {"values": ["sgd", "adam"]}, "model": {"value": "mlp"}, "x": body}}
    assert refused(validator, doc) is not valid
    if valid:
        load_spec(doc)
    else:
        with pytest.raises(SpecError):
            load_spec(doc)


@pytest.mark.parametrize("path", [p for p in BAD_SPECS if STATED_RULES.search(p.read_text().splitlines()[0])],
                         ids=lambda p: p.stem)
def test_a_bad_spec_breaking_a_rule_the_schema_states_is_refused_by_it(path, validator):
    assert refused(validator, yaml.safe_load(path.read_text()))


def test_importing_the_schema_imports_neither_torch_nor_ray():
    code = ("import sys, tune_service.spec.schema as s, tune_service.spec.reference as r; "
            "r.spec_reference_markdown(s.spec_schema()); "
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('torch', 'ray', 'wandb', 'pydantic')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT).stdout
    assert out.strip() == "[]"
