"""The ``read`` manager (harness.manager.read_policy): the question reader's specs run with ``run_check`` on a
synthesized task; a clean run commits every turn without a repair, a wrong total is repaired at its turn quoting the
failed check, and its notes round-trip."""

import json
import shutil

import pytest

from harness.checks.spec import CheckSpec
from harness.evaluation.spec_metrics import spec_scores
from harness.manager import ACTION_NAMES, ManagerRuntime, get_policy
from harness.manager.read_policy import _columns_probe, note, parse_note, written_variables
from harness.manager.reader import NotedTurn, Variable
from harness.sandbox import Sandbox, SandboxConfig
from harness.tasks import load_task
from harness.worker import Fault, ScriptedWorker

ISOLATION = "bwrap" if shutil.which("bwrap") else "none"
needs_run_check = pytest.mark.skipif("run_check" not in ACTION_NAMES, reason="needs the run_check action")


def test_a_note_round_trips_and_lists_what_a_step_wrote():
    variables = [Variable("orders_clean", "frame", ("a", "b_c")), Variable("total", "scalar")]
    text = note("3", "Using the result of turn 2: What?", "Round to 2 decimals.", variables)
    assert parse_note(text) == NotedTurn(
        "3", "Using the result of turn 2: What?", "Round to 2 decimals.", tuple(variables)
    )
    assert parse_note("Turn 4: Which?") == NotedTurn("4", "Which?")
    assert parse_note("steps 1-3 of: a segment") is None
    steps = [
        {"ok": True, "variables": [
            {"name": "df", "type": "pd.DataFrame", "summary": "DataFrame 3x9 columns=[a, b, ...]"},
            {"name": "gone", "type": "int", "summary": "1"},
        ]},
        {"ok": True, "variables": [{"name": "gone", "type": None, "summary": ""}, {"name": "s", "type": "pd.Series"}]},
        {"ok": False, "variables": [{"name": "bad", "type": "int"}]},
    ]  # fmt: skip
    assert written_variables(steps) == [Variable("df", "frame", ("a", "b")), Variable("s", "series")]
    assert written_variables(steps, {"df": ["a", "b", "c"]})[0].columns == ("a", "b", "c")
    assert _columns_probe(["df"]) == "print_result({'df': [str(c) for c in df.columns]})"


@pytest.fixture(scope="module")
def synthesized(tmp_path_factory):
    from synthesis.checks import task_checks
    from synthesis.domains import generate_task
    from synthesis.domains.writer import write_task_folder

    spec = generate_task("commerce", 2, 6)  # a filter and its total, a revision, both standing after it
    with Sandbox(SandboxConfig(isolation=ISOLATION)) as sandbox:
        task = load_task(write_task_folder(spec, tmp_path_factory.mktemp("read") / "task", sandbox))
        gold = {t: tuple(c.spec for c in checks) for t, checks in task_checks(spec).items()}
        yield sandbox, task, gold


def _play(sandbox, task, faults=None):
    programs = {t: ref.code for t, ref in task.load_answers().items()}
    with sandbox.new_kernel(task.public_dir) as kernel:
        worker = ScriptedWorker(kernel, programs, faults or {})
        return ManagerRuntime(task, kernel, worker, get_policy("read"), None).run()


def _actions(record, name):
    return [
        (a["turn_id"], action)
        for a in record.activations
        for action in a.get("actions", [])
        if (action.get("parsed") or {}).get("name") == name
    ]


@needs_run_check
def test_a_clean_run_checks_what_the_turns_state_and_repairs_nothing(synthesized):
    sandbox, task, gold = synthesized
    record = _play(sandbox, task)
    assert record.repairs == [] and len(record.states) == len(task.turns)
    checks = _actions(record, "run_check")
    assert checks and all(action["legal"] for _, action in checks)
    assert {turn for turn, _ in checks} == {t.turn_id for t in task.turns}
    scores = spec_scores([record], {task.id: gold})
    assert scores["recall"] >= 0.8 and scores["precision"] >= 0.9, scores
    assert all(isinstance(s, CheckSpec) for specs in gold.values() for s in specs)


@needs_run_check
def test_a_wrong_total_is_repaired_at_its_turn_quoting_the_failed_check(synthesized):
    sandbox, task, _ = synthesized
    turn = next(t for t in task.turns if "their total" in t.question)
    code = task.load_answers()[turn.turn_id].code
    faulty = code.replace(".sum()), 2)", ".mean()), 2)", 1)
    assert faulty != code
    record = _play(sandbox, task, {turn.turn_id: Fault(task.id, turn.turn_id, "wrong_agg", faulty)})
    repairs = _actions(record, "REPAIR")
    assert [t for t, _ in repairs] == [turn.turn_id]
    arguments = repairs[0][1]["parsed"]["arguments"]
    assert arguments["analytical_evidence"].startswith("run_check failed: ")
    assert arguments["error_hint"]["error_variable"].endswith("_total")


def test_the_update_lists_the_columns_a_summary_cut_off_and_notes_them():
    from harness.manager.policy_types import PolicyInput
    from harness.manager.wire import parse_response
    from harness.tasks import Turn

    turn = Turn("2", "Using the result of turn 1: Clean the data.", "Drop rows with no a or no b.")
    draft = {"issue": "Turn 2: ...", "constraints": [], "used_variables": []}
    obs = {"event_type": "turn_end", "current_draft": draft, "pending_start_step": 3, "pending_end_step": 3}
    legal = ("UPDATE_STATE", "check_execution", "run_probe")
    step = {"ok": True, "step_id": 3, "results": [], "variables": [
        {"name": "wide", "type": "pd.DataFrame", "summary": "DataFrame 2x9 columns=[a, b, ...]"}]}  # fmt: skip
    policy = get_policy("read")

    def respond(*results):
        inp = PolicyInput(json.dumps(obs), tuple(json.dumps(r) for r in results), legal, turn)
        return parse_response(policy.respond(inp)).action

    assert respond().name == "check_execution" and respond().arguments == {"step_id": 3}
    probe = respond(step)
    assert probe.name == "run_probe" and "wide.columns" in probe.arguments["code"]
    update = respond(step, {"ok": True, "results": [{"wide": ["a", "b", "c"]}]})
    assert update.name == "UPDATE_STATE" and update.arguments["used_variables"] == ["wide"]
    assert parse_note(update.arguments["issue"]).variables == (Variable("wide", "frame", ("a", "b", "c")),)
