"""No oracle in the manager's prompts on held-out suites: ``heldout-seeds`` and ``heldout-domain`` (built as the
evaluation builds them, cut to one short task each) and an imported LongDS-style folder are played with the rule
policy and the scripted worker, and every activation the manager gets (rendered as the ``llm`` policy sends it, plus
the rest of its input) is checked: by default no task graph and no constraint code; with both switches on they are
there (so the check can fail)."""

from __future__ import annotations

import dataclasses
import shutil
from pathlib import Path

import pytest

from harness.evaluation.suite import missing_synthesized_suite, resolve_suite
from harness.manager.policies import RulePolicy
from harness.manager.policy_types import PolicyInput
from harness.manager.prompts import render_activation
from harness.manager.runtime import ManagerRuntime, RuntimeConfig
from harness.sandbox import Sandbox, SandboxConfig
from harness.tasks import load_task
from harness.tasks.importers import ImportOptions, run_import
from harness.worker import ScriptedWorker

LONGDS = Path(__file__).resolve().parents[1] / "tasks" / "fixtures" / "longds_shop"
ISOLATION = "bwrap" if shutil.which("bwrap") else "none"
ORACLE_FIELDS = ("depends_on_turns", "declared_relation", "committed_states_of_those_turns")


class RenderingRule(RulePolicy):
    """The rule policy, keeping every input's rendered activation and full text."""

    def __init__(self) -> None:
        super().__init__()
        self.seen: list[str] = []

    def respond(self, inp: PolicyInput) -> str:
        self.seen.append(f"{render_activation(inp)}\n{inp.text()}")
        return super().respond(inp)


@pytest.fixture(scope="module")
def tasks(tmp_path_factory):
    """One task of each held-out suite: the synthesized ones with their own domains and seeds, one 6-turn task and
    no faults (building the full suites takes ~30 s); and the imported LongDS-style fixture."""
    from synthesis.config import SynthesisConfig
    from synthesis.driver import synthesize

    cache = tmp_path_factory.mktemp("suites")
    found = {}
    for name in ("heldout-seeds", "heldout-domain"):
        missing = missing_synthesized_suite(name, cache)
        assert missing is not None
        config = SynthesisConfig.from_yaml(missing[0])
        small = {"domains": config.domains[:1], "tasks_per_domain": 1, "n_turns": [6, 6], "generate_faults": False}
        synthesize(dataclasses.replace(config, **small), missing[1], progress=False)
        found[name] = load_task(resolve_suite(name, cache=cache).task_dirs[0])
    imported = tmp_path_factory.mktemp("longds")
    run_import("longds", ImportOptions(src=LONGDS, out=imported, task_id="shop"))
    found["longds"] = load_task(resolve_suite(str(imported)).task_dirs[0])
    return found


@pytest.fixture(scope="module")
def sandbox():
    with Sandbox(SandboxConfig(isolation=ISOLATION)) as sb:
        yield sb


def prompts(sandbox, task, config):
    policy = RenderingRule()
    with sandbox.new_kernel(task.public_dir) as kernel:
        ManagerRuntime(task, kernel, ScriptedWorker.for_task(task, kernel, {}), policy, config).run()
    assert policy.seen
    return policy.seen


@pytest.mark.parametrize("suite", ["heldout-seeds", "heldout-domain", "longds"])
def test_the_manager_sees_no_oracle_by_default_and_sees_them_with_the_switches(sandbox, tasks, suite):
    task = tasks[suite]
    codes = [c.code for turn in task.turns for c in turn.constraints if c.code]
    if suite != "longds":
        assert codes, "a synthesized task states its constraints with code"
    assert any(turn.depends_on for turn in task.turns)  # there is a graph to leak
    for text in prompts(sandbox, task, RuntimeConfig()):
        assert not [name for name in ORACLE_FIELDS if name in text]
        assert not [code for code in codes if code in text]
        assert "committed_states_by_turn" in text or "## Public turn" not in text
    seen = "\n".join(prompts(sandbox, task, RuntimeConfig(oracle_relations=True, executable_constraints=True)))
    assert all(name in seen for name in ORACLE_FIELDS)
    assert all(code in seen for code in codes)
