"""Secrets in the environment never reach what tune-service writes (the redaction module's parts)."""

from __future__ import annotations

import json
import pickle

import pytest
import yaml

from tune_service.errors import SpecError
from tune_service.results import sweep_result as results
from tune_service.redaction import (
    REDACTED, Fingerprints, RedactedError, environment_secrets, looks_secret, redact, redact_text,
    redacted_errors, refuse_secrets_in_spec,
)

SECRET = "s3cr3t-v4lue-123456"


@pytest.mark.parametrize("name", ["MY_API_KEY", "HF_TOKEN", "DB_PASSWORD", "AWS_SECRET_ACCESS_KEY", "WANDB_API_KEY",
                                  "RAY_AUTH_TOKEN", "PGPASSWORD", "apiKey", "x-api-key", "db.passwd", "credentials"])
def test_names_with_a_secret_word_as_a_part_look_secret(name):
    assert looks_secret(name)


@pytest.mark.parametrize("name", ["MONKEY", "TOKENIZERS_PARALLELISM", "RAY_AUTH_MODE", "max_tokens", "keyboard",
                                  "lr", "PATH", 3])
def test_other_names_do_not(name):
    assert not looks_secret(name)


def test_the_secrets_of_the_environment_are_the_values_of_secret_names_of_some_length():
    env = {"HF_TOKEN": "hf_abcdefgh1234", "MY_KEY": "short", "PATH": "/usr/bin:/bin", "DB_PASSWORD": SECRET + "\n"}
    assert environment_secrets(env) == {"HF_TOKEN": "hf_abcdefgh1234", "DB_PASSWORD": SECRET}


def test_text_loses_secret_values_and_what_credential_patterns_name():
    text = (f"refused {SECRET} (HF_TOKEN=hf_abc1 api_key='k1') for https://me:pw99@host/x?lr=1&access_token=t1#top "
            f"{{'db_password': 'p1', \"secret\": \"s1\"}} monkey=banana max_tokens=512")
    assert redact_text(text, [SECRET]) == (
        "refused *** (HF_TOKEN=*** api_key='***') for https://me:***@host/x?lr=1&access_token=***#top "
        "{'db_password': '***', \"secret\": \"***\"} monkey=banana max_tokens=512")
    assert redact_text(text, [SECRET], by_name=False) == text.replace(SECRET, REDACTED)
    assert redact_text("a longer-s3cr3t-v4lue-123456-x", [SECRET, "longer-" + SECRET]) == "a ***-x"


def test_mappings_lose_the_values_of_secret_keys_and_every_secret_value(monkeypatch):
    monkeypatch.setenv("TS_TEST_API_TOKEN", SECRET)
    config = {"lr": 0.1, "api_token": "from-the-spec", "max_tokens": 512, "use_key": True, "secret": None,
              "nested": {"db_password": ["a", "b"], "note": f"token {SECRET}"}, "values": (SECRET, 1)}
    assert redact(config) == {"lr": 0.1, "api_token": REDACTED, "max_tokens": 512, "use_key": True, "secret": None,
                              "nested": {"db_password": REDACTED, "note": f"token {REDACTED}"},
                              "values": (REDACTED, 1)}
    assert redact(config, by_name=False)["api_token"] == "from-the-spec"  # sweep.json keeps the spec as given
    assert redact(config)["values"] == (REDACTED, 1) and config["values"] == (SECRET, 1)  # a copy


def test_a_spec_holding_a_secret_value_is_refused_naming_the_variable_not_the_value():
    env = {"TS_TEST_API_TOKEN": SECRET}
    spec = {"name": "s", "parameters": {"lr": {"values": [0.1]}, "url": {"value": f"https://x/?t={SECRET}"}},
            "wandb": {"tags": ["ok", SECRET]}}
    with pytest.raises(SpecError) as caught:
        refuse_secrets_in_spec(spec, env)
    assert [p.path for p in caught.value.problems] == ["parameters.url.value", "wandb.tags[1]"]
    assert "environment variable TS_TEST_API_TOKEN" in str(caught.value) and SECRET not in str(caught.value)
    refuse_secrets_in_spec(spec, {"TS_TEST_API_TOKEN": "another-value-1234"})  # anything else is fine


def test_run_refuses_such_a_spec_before_ray_starts(monkeypatch, tmp_path, forbid_ray_start):
    import tune_service

    monkeypatch.setenv("TS_TEST_API_TOKEN", SECRET)
    spec = {"name": "leaky", "parameters": {"lr": {"values": [0.1]}, "hf": {"value": SECRET}}}
    with pytest.raises(SpecError, match="parameters.hf.value: holds the value of the environment variable "
                                        "TS_TEST_API_TOKEN"):
        tune_service.run(spec, storage=tmp_path, name="leaky")
    assert list(tmp_path.iterdir()) == []


def test_fingerprints_find_secrets_without_holding_them():
    prints = Fingerprints.of([SECRET, "hf_abcdefgh1234"])
    assert SECRET.encode() not in pickle.dumps(prints)
    assert prints.find(f"x {SECRET} y hf_abcdefgh1234 z") == {SECRET, "hf_abcdefgh1234"}
    assert prints.find("nothing here") == set()
    assert Fingerprints.of([]).find(SECRET) == set()


class WrappingError(Exception):
    """Like Ray Train's WorkerGroupError: a message of its own, wrapped errors, and a ``__reduce__``."""

    def __init__(self, message, failures):
        super().__init__("Training failed:\n" + message)
        self._message, self.worker_failures = message, failures

    def __reduce__(self):
        return (self.__class__, (self._message, self.worker_failures))


def test_an_error_is_scrubbed_in_place_keeping_its_type_and_what_it_wraps():
    rank_error = PermissionError(f"login refused for token {SECRET}")
    with pytest.raises(WrappingError) as caught, redacted_errors(Fingerprints.of([SECRET])):
        try:
            raise rank_error
        except PermissionError as error:
            raise WrappingError(f"[Rank 0] PermissionError: {error}", {0: error}) from error
    error = caught.value
    assert str(error) == "Training failed:\n[Rank 0] PermissionError: login refused for token ***"
    assert str(error.worker_failures[0]) == str(error.__cause__) == "login refused for token ***"
    assert SECRET not in str(pickle.loads(pickle.dumps(error)))
    assert results.one_line_error(error) == "PermissionError: login refused for token ***"  # the root cause


def test_an_error_whose_text_cannot_be_scrubbed_in_place_is_replaced(monkeypatch):
    class Opaque(Exception):
        def __str__(self):
            return "refused " + "".join(["s3cr3t-", "v4lue-123456"])

    monkeypatch.setenv("TS_TEST_API_TOKEN", SECRET)  # this process's own secrets count too
    with pytest.raises(RedactedError, match=r"^Opaque: refused \*\*\*$"), redacted_errors():
        raise Opaque()


def test_errors_without_secrets_pass_unchanged():
    error = ValueError("plain")
    with pytest.raises(ValueError) as caught, redacted_errors(Fingerprints.of([SECRET])):
        raise error
    assert caught.value is error and error.args == ("plain",)


def test_summary_and_best_config_are_written_without_secrets(monkeypatch, tmp_path):
    monkeypatch.setenv("TS_TEST_API_TOKEN", SECRET)
    best = results.TrialRecord("t1", "completed", {"lr": 0.1, "api_token": "from-the-spec", "note": SECRET},
                               {"val_loss": 0.5}, 1)
    failed = results.TrialRecord("t2", "failed", {"lr": 0.2}, {}, 0,
                                 results.one_line_error(RuntimeError(f"refused {SECRET}")))
    outcome = results.SweepResult(str(tmp_path), "val_loss", "min", (best, failed), best)
    results.write(outcome)
    summary = (tmp_path / "summary.json").read_text()
    assert SECRET not in summary and "from-the-spec" not in summary
    assert json.loads(summary)["trials"][1]["error"] == "RuntimeError: refused ***"
    assert yaml.safe_load((tmp_path / "best_config.yaml").read_text()) == {"lr": 0.1, "api_token": REDACTED,
                                                                           "note": REDACTED}


def test_a_key_in_the_users_netrc_is_a_secret(tmp_path, monkeypatch):
    """wandb login keeps the API key in ~/.netrc, not in the environment: it is redacted and refused alike."""
    from tune_service.errors import SpecError
    from tune_service.redaction import redact_text, refuse_secrets_in_spec

    key = "0123456789abcdef0123456789abcdef01234567"
    netrc = tmp_path / "netrc"
    netrc.write_text(f"machine api.wandb.ai\n  login user\n  password {key}\n")
    netrc.chmod(0o600)
    monkeypatch.setenv("NETRC", str(netrc))
    assert redact_text(f"wandb: 401 for key {key}") == "wandb: 401 for key ***"
    with pytest.raises(SpecError, match=rf"wandb\.tags\[0\]: holds the value of the password of api\.wandb\.ai in {netrc}; "):
        refuse_secrets_in_spec({"wandb": {"tags": [key]}})
    monkeypatch.setenv("NETRC", str(tmp_path / "none"))
    assert redact_text(f"key {key}") == f"key {key}"  # no such file: nothing read
