"""harness.specs: one parser for the manager spec and one for the suite spec, one error format, the same grammar as
the policies the harness builds."""

from __future__ import annotations

import pytest

from harness.manager.policy_registry import POLICIES, get_policy
from harness.specs import (
    MANAGER_GRAMMAR,
    MANAGER_KINDS,
    ManagerSpec,
    SuiteRef,
    parse_manager_spec,
    parse_manager_specs,
    parse_suite_spec,
)


def test_every_name_of_the_grammar_has_a_registered_policy():
    assert set(MANAGER_KINDS) == set(POLICIES)
    assert [part.split(":")[0].split("[")[0] for part in MANAGER_GRAMMAR.split(" | ")] == [
        name for name in MANAGER_KINDS for _ in range({"hier": 3, "hier-checks": 4}.get(name, 1))
    ]


@pytest.mark.parametrize(
    ("spec", "parsed"),
    [
        ("none", ManagerSpec("none")),
        ("rule", ManagerSpec("rule")),
        ("window-rule", ManagerSpec("window-rule")),
        ("window-rule:4", ManagerSpec("window-rule", 4)),
        ("windowed:3:http://h:8000/v1", ManagerSpec("windowed", 3, "http://h:8000/v1")),
        ("llm:https://h/v1", ManagerSpec("llm", None, "https://h/v1")),
        ("freeform:http://h/v1", ManagerSpec("freeform", None, "http://h/v1")),
        ("hier:none", ManagerSpec("hier", tier1="none")),
        ("hier:llm:http://h:8000/v1", ManagerSpec("hier", None, "http://h:8000/v1", "llm")),
    ],
)
def test_good_specs_parse_and_print_back(spec, parsed):
    assert parse_manager_spec(spec) == parsed and str(parsed) == spec


def test_local_models(tmp_path):
    spec = parse_manager_spec(f"llm-hf:{tmp_path}")
    assert spec.in_process and spec.model_backed and spec.model == str(tmp_path)
    assert parse_manager_spec(f"windowed-hf:2:{tmp_path}") == ManagerSpec("windowed-hf", 2, str(tmp_path))
    assert parse_manager_spec("llm-hf:/no/such", check_paths=False).model == "/no/such"
    assert not parse_manager_spec("llm:http://h/v1").in_process and not parse_manager_spec("rule").model_backed
    hier = parse_manager_spec(f"hier:llm-hf:{tmp_path}")
    assert hier.in_process and hier.model_backed and str(hier) == f"hier:llm-hf:{tmp_path}"
    assert not parse_manager_spec("hier:none").model_backed and not parse_manager_spec("hier:none").in_process


@pytest.mark.parametrize(
    ("spec", "reason"),
    [
        ("oracle", "unknown variant(s) ['oracle']; valid names: none, rule, "),
        ("rule:3", "rule takes no argument, got '3'"),
        ("window-rule:0", "K must be a whole number >= 1"),
        ("window-rule:2:x", "window-rule takes no further argument, got 'x'"),
        ("windowed:3", "the windowed ablation is model-backed"),
        ("windowed:x:http://h/v1", "K must be a whole number >= 1"),
        ("llm", "URL (the endpoint's API root, such as http://localhost:8000/v1) is missing"),
        ("llm:localhost:8000", "URL must be an http(s) API root"),
        ("llm-hf:/no/such/folder", "model folder /no/such/folder does not exist"),
        ("hier", "the hierarchical manager takes its model: hier:none (the harness alone), hier:llm:URL"),
        ("hier:none:x", "the hierarchical manager takes its model: hier:none (the harness alone)"),
        ("hier:gold", "the hierarchical manager takes its model: hier:none (the harness alone), hier:llm:URL"),
        ("hier-checks:x", "the hierarchical manager takes its model: hier-checks:none (the harness alone)"),
        ("hier:llm:localhost:8000", "URL must be an http(s) API root"),
        ("hier:llm-hf:/no/such/folder", "model folder /no/such/folder does not exist"),
    ],
)
def test_bad_specs_one_format_and_get_policy_refuses_them_too(spec, reason):
    with pytest.raises(ValueError) as info:
        parse_manager_spec(spec)
    message = str(info.value)
    assert message.startswith(f"--manager {spec}: {reason}"), message
    assert f"; grammar: {MANAGER_GRAMMAR}; e.g. --manager rule" in message and "\n" not in message
    with pytest.raises(ValueError):
        get_policy(spec)


def test_a_list_reports_every_problem_at_once():
    with pytest.raises(ValueError) as info:
        parse_manager_specs(["none", "rulez", "llm:x", "oracle"], flag="managers=")
    message = str(info.value)
    assert message.startswith("managers='none,rulez,llm:x,oracle': unknown variant(s) ['rulez', 'oracle']")
    assert "; llm:x: URL must be an http(s) API root" in message
    with pytest.raises(ValueError, match="give at least one variant"):
        parse_manager_specs([])
    assert [str(s) for s in parse_manager_specs(["none", "rule"])] == ["none", "rule"]


def test_suite_specs(tmp_path):
    assert parse_suite_spec("smoke") == SuiteRef("smoke", name="smoke") and parse_suite_spec("smoke").named
    assert parse_suite_spec(str(tmp_path)) == SuiteRef(str(tmp_path), folder=tmp_path)
    (tmp_path / "smoke").mkdir()
    assert parse_suite_spec(str(tmp_path / "smoke")).folder == tmp_path / "smoke"  # a folder wins over a name
    with pytest.raises(ValueError) as info:
        parse_suite_spec("heldout", flag="suite=")
    message = str(info.value)
    assert message.startswith("suite='heldout': unknown suite 'heldout' and no such folder; valid suites: ")
    assert "heldout-seeds" in message and "pass a folder of task folders" in message
