"""The scripted worker on the built-in task: a fault on turn 1 propagates to the turns that reuse its variable;
a repair hint that names the corrupted variable restores the correct program; any other hint is ignored."""

import shutil
from pathlib import Path
from types import SimpleNamespace

import pytest

from harness.sandbox import Sandbox, SandboxConfig
from harness.tasks import grade_task, load_task
from harness.worker import SINGLE_TURN_ID, SOLUTION_FILE, Fault, ScriptedWorker, Worker, hint_localizes, split_cells

TASK = Path(__file__).resolve().parents[3] / "harness" / "builtin_tasks" / "retail-sales"
ISOLATION = "bwrap" if shutil.which("bwrap") else "none"
# unit slip on turn 1: revenue = quantity + unit_price; turns 2 and 3 reuse sales['revenue']; turn 4 recomputes it
FAULTY_TURN_1 = "\n".join(
    line.replace("sales['quantity'] * sales['unit_price']", "sales['quantity'] + sales['unit_price']")
    for line in load_task(TASK).load_answers()["1"].code.splitlines()
)


@pytest.fixture(scope="module")
def sandbox():
    with Sandbox(SandboxConfig(isolation=ISOLATION)) as sb:
        yield sb


@pytest.fixture()
def setup(sandbox):
    task = load_task(TASK)
    programs = {t: ref.code for t, ref in task.load_answers().items()}
    kernel = sandbox.new_kernel(task.public_dir)
    worker = ScriptedWorker(kernel, programs, {"1": Fault(task.id, "1", "unit_slip", FAULTY_TURN_1)})
    yield task, worker
    kernel.close()


def _per_turn(task, answers):
    grade = grade_task(task, answers)
    return {turn: detail["correct"] for turn, detail in grade.details["turns"].items()}


def test_without_repair_the_fault_propagates_to_dependent_turns(setup):
    task, worker = setup
    assert worker.corrupted_variables("1") == ("sales",)
    for turn in task.turns:
        (step,) = worker.run_turn(turn.turn_id, turn.question)
        assert step.simulated and step.result.ok
    assert _per_turn(task, worker.answers) == {"1": False, "2": False, "3": False, "4": True, "5": True}
    assert [s.meta["faulty"] for s in worker.steps] == [True, False, False, False, False]


def test_a_localizing_repair_hint_fixes_the_turn_and_its_dependents(setup):
    task, worker = setup
    worker.run_turn("1", "q")
    (step,) = worker.repair("1", "<error_hint>The variable `sales` has a wrong revenue column.</error_hint>")
    assert step.meta["repair"] == "localized" and step.code == task.load_answers()["1"].code
    for turn in task.turns[1:]:
        worker.run_turn(turn.turn_id, turn.question)
    assert all(_per_turn(task, worker.answers).values())


def test_a_hint_naming_another_variable_leaves_the_answer_unchanged(setup):
    task, worker = setup
    (first,) = worker.run_turn("1", "q")
    (step,) = worker.repair("1", "check by_region for rounding")
    assert step.meta["repair"] == "ignored" and step.code is None and step.answer == first.answer
    assert worker.fault_active("1")


def test_hint_localization_matches_whole_names_only():
    assert hint_localizes("the `sales` frame", ("sales",))
    assert not hint_localizes("presales figures", ("sales",))
    assert not hint_localizes("df.sales column", ("sales",))  # an attribute, not the variable
    assert hint_localizes("sales['revenue'] is wrong", ("sales",))


def test_faults_for_unknown_turns_are_rejected():
    with pytest.raises(ValueError, match=r"faults name turns \['9'\]"):
        ScriptedWorker(kernel=None, programs={"1": "x = 1"}, faults={"9": Fault("t", "9", "x", "y")})


# ---------------------------------------------------------------- cells, step by step (segment flow)

PROGRAM = "x = 2\n# %% scale\ny = x * 10\n# %%\nprint_result({'y': y})\n# %%\nz = y + 1\n"
FAULTY = "x = 3\n# %%\ny = x * 10\n# %%\nprint_result({'y': y})\n# %%\nz = y + 1\n"


@pytest.fixture()
def kernel(sandbox, tmp_path):
    with sandbox.new_kernel(tmp_path) as k:
        yield k


def test_split_cells_at_markers():
    assert split_cells(PROGRAM) == ["x = 2", "y = x * 10", "print_result({'y': y})", "z = y + 1"]
    assert split_cells("a = 1\nb = 2") == ["a = 1\nb = 2"]  # no marker: one cell


def test_single_task_program_is_stepped_one_cell_at_a_time(kernel):
    worker = ScriptedWorker(kernel, {SINGLE_TURN_ID: PROGRAM})
    assert isinstance(worker, Worker)
    worker.begin(SINGLE_TURN_ID, "objective")
    seen = []
    while (step := worker.step()) is not None:
        seen.append((step.code, step.answer))
    assert seen == [("x = 2", None), ("y = x * 10", None), ("print_result({'y': y})", {"y": 20}),
                    ("z = y + 1", {"y": 20})]  # fmt: skip
    assert worker.finished and worker.step() is None and worker.answers == {SINGLE_TURN_ID: {"y": 20}}


def test_a_localized_repair_mid_way_reruns_the_correct_cells_so_far_and_carries_on(kernel):
    fault = Fault("t", SINGLE_TURN_ID, "wrong_constant", FAULTY)
    assert fault.corrupted_variables(PROGRAM) == ("x",)
    worker = ScriptedWorker(kernel, {SINGLE_TURN_ID: PROGRAM}, {SINGLE_TURN_ID: fault})
    worker.begin(SINGLE_TURN_ID, "objective")
    first, _ = worker.step(), worker.step()
    assert first.meta["faulty"] and kernel.variables()["y"].summary == "30"
    (repair,) = worker.repair(SINGLE_TURN_ID, "x is wrong: the constant is off")
    assert repair.meta["repair"] == "localized" and repair.code == "x = 2\n\ny = x * 10"
    rest = []
    while (step := worker.step()) is not None:
        rest.append(step)
    assert [s.code for s in rest] == ["print_result({'y': y})", "z = y + 1"]
    assert not any(s.meta["faulty"] for s in rest) and worker.answers[SINGLE_TURN_ID] == {"y": 20}
    assert [s.step_id for s in worker.steps] == [0, 1, 2, 3, 4]


def test_for_task_needs_the_solution_of_a_single_task(tmp_path):
    task = SimpleNamespace(id="t", kind="closed_form", private_dir=tmp_path)
    with pytest.raises(ValueError, match=r"solution\.py"):
        ScriptedWorker.for_task(task, kernel=None)
    (tmp_path / SOLUTION_FILE).write_text(PROGRAM)
    assert ScriptedWorker.for_task(task, kernel=None).programs == {SINGLE_TURN_ID: PROGRAM}
