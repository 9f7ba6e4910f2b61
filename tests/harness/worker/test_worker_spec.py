"""One parser for the worker spec (``scripted | openai:URL | hf:PATH``): the run command, the evaluation config and
the manager env all refuse the same bad specs with the same message, before any work."""

from __future__ import annotations

import pytest

from harness.evaluation.evaluate import EvaluationConfig, EvaluationError
from harness.worker.spec import WorkerSpec, parse_worker_spec


def test_good_specs_parse(tmp_path):
    assert parse_worker_spec("scripted") == WorkerSpec("scripted") and parse_worker_spec("scripted").scripted
    assert parse_worker_spec("openai:http://localhost:8000/v1") == WorkerSpec("openai", "http://localhost:8000/v1")
    assert str(parse_worker_spec(f"hf:{tmp_path}")) == f"hf:{tmp_path}"


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("gpt", "--worker 'gpt' is not understood; use one of: scripted | openai:URL | hf:PATH."),
        ("openai", "--worker 'openai' is not understood"),
        ("scripted:x", "--worker 'scripted:x' is not understood"),
        ("hf:/nonexistent/ckpt", "--worker hf:/nonexistent/ckpt: /nonexistent/ckpt is not a checkpoint folder"),
    ],
)
def test_bad_specs_name_the_flag_and_the_fix(spec, message):
    with pytest.raises(ValueError, match="^" + message.replace("|", r"\|").replace("(", r"\(")):
        parse_worker_spec(spec)


def test_faults_need_the_scripted_worker_in_every_caller(tmp_path):
    with pytest.raises(ValueError, match=r"--faults replays faulty code .* --worker scripted \(got --worker openai"):
        parse_worker_spec("openai:http://x/v1", faults=True)
    assert parse_worker_spec("scripted", faults=True).scripted
    with pytest.raises(EvaluationError, match="--faults replays faulty code through the scripted worker"):
        EvaluationConfig(suite="smoke", worker="openai:http://x/v1", faults=tmp_path / "f.jsonl", out=str(tmp_path))


def test_a_config_field_is_named_as_a_field():
    with pytest.raises(ValueError, match=r"^worker='bogus' is not understood; .* \| replay, or None\.$"):
        parse_worker_spec("bogus", flag="worker=", also=" | replay, or None")
