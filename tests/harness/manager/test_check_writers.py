"""``hier-checks``: the check-writing hier manager by spec name, and its oracle arm ``hier-checks:gold`` (the gold's
specs from the task's private folder, only under the ``oracle_checks`` switch)."""

from __future__ import annotations

import json
import shutil

import pytest

from harness.checks.gold import gold_specs_of
from harness.cli import main
from harness.evaluation.errored import policy_failure
from harness.manager import RuntimeConfig, get_policy
from harness.manager.check_writers import GoldChecksPolicy
from harness.manager.runtime import ManagerRuntime
from harness.tasks import load_task
from harness.worker import Fault, ScriptedWorker
from tests.harness.manager.test_hier import correct, sandbox, task  # noqa: F401  (fixtures)
from tests.harness.manager.test_hier_checks import BY_REGION, MEAN_NOT_SUM


@pytest.fixture(scope="module")
def gold_task(task, tmp_path_factory):  # noqa: F811
    """The retail task with the gold's spec of turn 2 written where synthesis writes it."""
    folder = tmp_path_factory.mktemp("gold") / task.id
    shutil.copytree(task.public_dir.parent, folder)
    (folder / "private" / "synthesis.json").write_text(json.dumps({"turns": {"2": {"checks": [BY_REGION]}}}))
    return load_task(folder)


def play(sandbox, task, policy, oracle_checks, fault_code=None):  # noqa: F811
    programs = {t: ref.code for t, ref in task.load_answers().items()}
    faults = {"2": Fault(task.id, "2", "test", fault_code)} if fault_code else {}
    with sandbox.new_kernel(task.public_dir) as kernel:
        config = RuntimeConfig(oracle_checks=oracle_checks)
        return ManagerRuntime(task, kernel, ScriptedWorker(kernel, programs, faults), policy, config).run()


def test_the_spec_names_build_the_check_writing_policies():
    assert get_policy("hier-checks:none").writes == "checks"
    assert isinstance(get_policy("hier-checks:gold"), GoldChecksPolicy)
    assert get_policy("hier-checks:llm:http://127.0.0.1:9/v1").name == "hier-checks-llm"


def test_the_oracle_arm_runs_the_gold_specs_only_under_its_switch(sandbox, gold_task):  # noqa: F811
    assert gold_specs_of(gold_task.private_dir)["2"][0].to_dict()["variable"] == "by_region"
    code = gold_task.load_answers()["2"].code.replace(*MEAN_NOT_SUM)
    record = play(sandbox, gold_task, GoldChecksPolicy(), True, code)
    assert [(r["turn_id"], r["variable"]) for r in record.repairs] == [("2", "by_region")] and correct(record)
    assert record.config["manager_view"]["oracle_checks"] is True and record.config["oracle_checks"] is True
    clean = play(sandbox, gold_task, GoldChecksPolicy(), True)
    assert clean.repairs == [] and correct(clean)
    unswitched = play(sandbox, gold_task, GoldChecksPolicy(), False, code)  # evaluation errors such an episode
    assert unswitched.repairs == [] and "add --oracle-checks" in policy_failure(unswitched, 0)["message"]


def test_run_refuses_the_oracle_arm_without_its_switch_before_any_episode(capsys, tmp_path):
    rc = main(["run", "--task", "retail-sales", "--manager", "hier-checks:gold", "--out", str(tmp_path)])
    assert (
        rc == 2
        and "--manager hier-checks:gold: hier-checks:gold runs the gold's check specs" in capsys.readouterr().err
    )
    assert not list(tmp_path.iterdir())


def test_without_the_switch_no_manager_view_holds_the_gold_specs(sandbox, gold_task):  # noqa: F811
    record = play(sandbox, gold_task, get_policy("hier-checks:none"), False)
    assert "oracle_checks" not in record.config["manager_view"] and record.repairs == []
