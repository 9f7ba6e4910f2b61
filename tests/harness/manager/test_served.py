"""A checkpoint's ``manager.json`` (harness.manager.checkpoint_settings) and the model specs that follow it
(harness.manager.served): the file round-trips and every malformed one is refused in one line; ``hier:llm-hf:DIR``
becomes the check-writing hier manager with the bare view, the checks grammar and the file's reply cap; an explicit
flag wins; a file that contradicts the spec is refused before the model loads; an endpoint that names its folder is
followed, a foreign one is not."""

from __future__ import annotations

import json

import pytest

from harness.manager.checkpoint_settings import (
    MANAGER_FILE,
    ManagerSettings,
    ManagerSettingsError,
    read_manager_settings,
    used_settings,
    write_manager_settings,
)
from harness.manager.hier import HierPolicy
from harness.manager.hier_checks import checks_grammar
from harness.manager.hier_prompts import CHECKS_SYSTEM
from harness.manager.llm_policy import LLMPolicy
from harness.manager.policy_registry import get_policy
from tests.harness.manager.test_hier import sandbox, task  # noqa: F401  (fixtures)
from tests.harness.manager.test_hier_checks import first_request
from tests.harness.test_grammar import needs_grammar
from tests.harness.test_llm import FakeOpenAI, build_tiny_chat_model

CHECKS_BARE = ManagerSettings(policy="hier", writes="checks", prompt_view="bare", max_new_tokens=24)


def test_the_settings_round_trip_and_a_folder_without_them_has_none(tmp_path):
    assert read_manager_settings(tmp_path) is None
    path = write_manager_settings(tmp_path / "ckpt", CHECKS_BARE)
    assert path == tmp_path / "ckpt" / MANAGER_FILE
    assert json.loads(path.read_text()) == {
        "stateguard_manager": 1, "policy": "hier", "writes": "checks", "prompt_view": "bare",
        "constrained_decoding": True, "legal_actions_only": False, "max_new_tokens": 24, "temperature": 0.0,
    }  # fmt: skip
    assert read_manager_settings(tmp_path / "ckpt") == CHECKS_BARE
    assert ManagerSettings.from_dict(ManagerSettings().to_dict()) == ManagerSettings()
    assert "writes" not in ManagerSettings().to_dict()  # the flat manager writes actions
    assert ManagerSettings(policy="hier").writes == "decisions"


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("{not json", "not JSON"),
        ("[1]", "holds list, not a JSON object"),
        ('{"policy": "llm"}', "stateguard_manager=None; this StateGuard reads version 1"),
        ('{"stateguard_manager": 2}', "stateguard_manager=2; this StateGuard reads version 1"),
        ('{"stateguard_manager": 1, "view": "bare"}', "unknown field 'view'; use only stateguard_manager, policy"),
        ('{"stateguard_manager": 1, "max_new_tokens": "384"}', "field max_new_tokens='384' is not int"),
        ('{"stateguard_manager": 1, "max_new_tokens": true}', "field max_new_tokens=True is not int"),
        ('{"stateguard_manager": 1, "constrained_decoding": "yes"}', "field constrained_decoding='yes' is not bool"),
        ('{"stateguard_manager": 1, "policy": "flat"}', "field policy='flat': use one of llm, hier"),
        ('{"stateguard_manager": 1, "writes": "checks"}', "field writes='checks': only a hier manager's tier 1"),
        ('{"stateguard_manager": 1, "policy": "hier", "writes": "both"}', "field writes='both': use one of"),
        ('{"stateguard_manager": 1, "prompt_view": "short"}', "field prompt_view='short': use one of full, bare"),
        ('{"stateguard_manager": 1, "max_new_tokens": 0}', "field max_new_tokens=0: use a positive number"),
        ('{"stateguard_manager": 1, "temperature": -1}', "field temperature=-1: use 0 \\(greedy\\) up to 2"),
        ('{"stateguard_manager": 1, "policy": "hier", "legal_actions_only": true}', "field legal_actions_only=True"),
    ],
)
def test_a_malformed_file_is_refused_in_one_line_naming_it_and_the_field(tmp_path, content, message):
    (tmp_path / MANAGER_FILE).write_text(content)
    with pytest.raises(ManagerSettingsError, match=message) as info:
        read_manager_settings(tmp_path)
    assert str(info.value).startswith(f"{tmp_path / MANAGER_FILE}: ") and "\n" not in str(info.value)


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    return build_tiny_chat_model(tmp_path_factory.mktemp("served") / "tiny", [CHECKS_SYSTEM, "checks kind variable"])


@needs_grammar
def test_hier_llm_hf_follows_the_file_checks_bare_grammar_and_cap(model_dir, sandbox, task):  # noqa: F811
    from harness.grammar import added_tokens

    write_manager_settings(model_dir, CHECKS_BARE)
    policy = get_policy(f"hier:llm-hf:{model_dir}")
    assert isinstance(policy, HierPolicy) and policy.writes == "checks" and policy.name == "hier-checks-llm-hf"
    backend = policy.tier1
    assert backend.max_new_tokens == 24 and backend.temperature == 0.0
    text = checks_grammar(added_tokens(backend.tokenizer))
    assert backend.grammar is backend._grammars[text] and list(backend._grammars) == [text]  # the checks grammar
    assert used_settings(policy) == {
        "file": str(model_dir / MANAGER_FILE), "writes": "checks", "prompt_view": "bare",
        "constrained_decoding": True, "legal_actions_only": False, "max_new_tokens": 24, "temperature": 0.0,
    }  # fmt: skip
    inp = first_request(sandbox, task, policy, turn="1")
    bare = policy.tier1_messages(inp)
    full = HierPolicy(None, writes="checks").tier1_messages(inp)
    assert [m["role"] for m in full] == ["system", "user"] and full[0]["content"] == CHECKS_SYSTEM
    assert bare == full[1:] and policy.tools is None  # no system message, no tools block


@needs_grammar
def test_llm_hf_follows_the_file_and_an_explicit_flag_wins(model_dir, tmp_path):
    from harness.evaluation.evaluate import EvaluationConfig, make_policy

    settings = ManagerSettings(prompt_view="bare", legal_actions_only=True, max_new_tokens=24, temperature=0.5)
    write_manager_settings(model_dir, settings)
    spec = f"llm-hf:{model_dir}"
    policy = get_policy(spec)
    assert isinstance(policy, LLMPolicy) and policy.prompt_view == "bare" and policy.tools is None
    assert policy.backend.temperature == 0.5 and policy.before_reply is not None  # legal actions only
    config = EvaluationConfig(suite="smoke", out=str(tmp_path), managers=[spec], manager_max_tokens=7)
    used = used_settings(make_policy(spec, config))
    assert used["max_new_tokens"] == 7 and used["legal_actions_only"] and used["constrained_decoding"]


@pytest.mark.parametrize(
    ("spec", "settings", "message"),
    [
        ("hier:llm-hf:{}", ManagerSettings(), "field policy='llm': the model is the flat llm manager, not --manager "
         "hier:llm-hf:{}; use --manager llm-hf:{}, or set policy hier"),
        ("llm-hf:{}", CHECKS_BARE, "field policy='hier': the model is tier 1 of the hier manager, not --manager "
         "llm-hf:{}; use --manager hier:llm-hf:{}, or set policy llm"),
        ("hier-checks:llm-hf:{}", ManagerSettings(policy="hier"), "field writes='decisions': tier 1 writes "
         "decisions, not checks, not --manager hier-checks:llm-hf:{}; use --manager hier:llm-hf:{} \\(it follows"),
    ],
)  # fmt: skip
def test_a_file_that_contradicts_the_spec_is_refused_before_the_model_loads(tmp_path, spec, settings, message):
    write_manager_settings(tmp_path, settings)  # no weights there: the refusal comes first
    with pytest.raises(ManagerSettingsError, match=f"^{tmp_path / MANAGER_FILE}: " + message.format(*[tmp_path] * 3)):
        get_policy(spec.format(tmp_path))


def test_stateguard_run_refuses_the_contradiction_in_one_line(tmp_path, capsys):
    from harness.cli import main

    write_manager_settings(tmp_path / "ckpt", ManagerSettings())
    rc = main(["run", "--task", "retail-sales", "--manager", f"hier:llm-hf:{tmp_path / 'ckpt'}", "--out",
               str(tmp_path / "out"), "--view", "quiet"])  # fmt: skip
    err = capsys.readouterr().err.strip()
    assert rc == 2 and "\n" not in err
    assert err.startswith(f"stateguard run: {tmp_path / 'ckpt' / MANAGER_FILE}: field policy='llm'")


def test_an_endpoint_that_names_its_folder_is_followed_and_a_foreign_one_is_not(tmp_path, monkeypatch, caplog):
    from harness.llm import OpenAIChatBackend

    with FakeOpenAI([(200, {})]) as server:  # lists its model without a root, as transformers serve and APIs do
        plain = get_policy(f"hier:llm:{server.url}")
    assert plain.writes == "decisions" and plain.tier1.model == "tiny-manager" and plain.tier1.grammar is None
    assert "names no folder here with a manager.json" in caplog.text and used_settings(plain)["file"] is None
    write_manager_settings(tmp_path, CHECKS_BARE)
    monkeypatch.setattr(OpenAIChatBackend, "model_cards", lambda self: [{"id": "m", "root": str(tmp_path)}])
    policy = get_policy("hier:llm:http://127.0.0.1:9/v1")  # as vLLM lists the folder it serves
    assert policy.name == "hier-checks-llm" and policy.prompt_view == "bare" and policy.tier1.max_tokens == 24
    assert policy.tier1.grammar == checks_grammar()
    with pytest.raises(ManagerSettingsError, match="policy='hier'"):
        get_policy("llm:http://127.0.0.1:9/v1")
