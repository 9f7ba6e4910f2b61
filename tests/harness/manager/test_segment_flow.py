"""The segment-induced flow on a single-question task built on a DABench table (real sandbox), and the runtime
features both flows share: flow selection, turn-start checkpoints and rollback, invalidated states in state hints,
live-view events, and the windowed-hint hook."""

import json
import re
import shutil
from pathlib import Path
from types import SimpleNamespace

import pytest

from harness.llm import ChatReply
from harness.manager.flows import FLOWS
from harness.manager.hints import INVALIDATED_NOTE, STATE_HINT_NOTE
from harness.manager.policies import RulePolicy
from harness.manager.policy_registry import get_policy
from harness.manager.records import AnalyticalState, Relation
from harness.manager.runtime import EVENTS, ManagerRuntime, RuntimeConfig, closed_form_text
from harness.manager.runtime_types import FLOW_NAMES
from harness.sandbox import Sandbox, SandboxConfig
from harness.tasks import TaskConfig, TaskConfigError, Turn, TurnConstraint, load_task
from harness.worker import SINGLE_TURN_ID, Fault, ScriptedWorker, faults_for_task, load_faults, split_cells
from harness.worker.react import ReActConfig, ReActWorker

ROOT = Path(__file__).resolve().parents[3]
FIXTURE = Path(__file__).resolve().parent / "fixtures" / "happiness-single"
TABLE = ROOT / ".." / "shared" / "benchmarks" / "dabench-dev" / "tables" / "2015.csv"
needs_table = pytest.mark.skipif(not TABLE.exists(), reason=f"DABench dev table not found at {TABLE}")
RETAIL = ROOT / "harness" / "builtin_tasks" / "retail-sales"
ISOLATION = "bwrap" if shutil.which("bwrap") else "none"
MARKER = "PRIVATE-MARKER-51d0a6c3"
ORACLES = {"oracle_relations": True, "executable_constraints": True}
"""The task graph and the constraint code in the manager's view: what the rule policy needs to relate states by
the declared graph and to find faults by probing constraints (the mechanics these tests check)."""


@pytest.fixture(scope="module")
def sandbox():
    with Sandbox(SandboxConfig(isolation=ISOLATION)) as sb:
        yield sb


@pytest.fixture(scope="module")
def single(sandbox, tmp_path_factory):
    """The closed_form fixture task built in a temp dir: table in public/, solution and labels in private/."""
    root = tmp_path_factory.mktemp("task") / "happiness-single"
    (root / "public" / "data").mkdir(parents=True)
    (root / "private").mkdir()
    for name in ("config.yaml", "description.md"):
        shutil.copy(FIXTURE / name, root / name)
    shutil.copy(TABLE, root / "public" / "data" / "2015.csv")
    solution = (FIXTURE / "solution.py").read_text()
    with sandbox.new_kernel(root / "public") as kernel:
        result = kernel.execute(solution)
    assert result.ok, result.error_message
    labels = re.findall(r"@(\w+)\[(.*?)\]", result.results[-1])
    assert [name for name, _ in labels] == ["n_happy", "mean_gdp"]
    (root / "private" / "answers.json").write_text(json.dumps(labels))
    (root / "private" / "solution.py").write_text(f"{solution}\n# {MARKER}\n")
    return load_task(root)


def play(sandbox, task, policy, faults=None, config=None, on_event=None):
    with sandbox.new_kernel(task.public_dir) as kernel:
        worker = ScriptedWorker.for_task(task, kernel, faults)
        policy = get_policy(policy) if isinstance(policy, str) else policy
        runtime = ManagerRuntime(task, kernel, worker, policy, config, on_event=on_event)
        return runtime.run(), runtime


def fault_of(task):
    return faults_for_task(load_faults(FIXTURE / "faults.jsonl"), task.id)


def controls(record):
    """(event_type, the control action that ended it) per policy activation."""
    out = []
    for activation in record.activations:
        names = [a["parsed"]["name"] for a in activation["actions"] if a["legal"] and a["kind"] == "control"]
        out.append((activation["event_type"], names[-1] if names else None))
    return out


# ---------------------------------------------------------------- the segment flow


@needs_table
def test_none_plays_every_cell_and_the_fault_makes_the_answer_wrong(sandbox, single):
    record, _ = play(sandbox, single, "none", fault_of(single))
    assert record.config["flow"] == "segment" and record.config["faults"] == {SINGLE_TURN_ID: "wrong_threshold"}
    assert len(record.worker_steps) == 5 and all(s["turn_id"] == SINGLE_TURN_ID for s in record.worker_steps)
    assert record.activations == [] and record.grade["valid"] and record.grade["score"] == 0.0
    clean, _ = play(sandbox, single, "none")
    assert clean.grade["score"] == 1.0


@needs_table
def test_rule_resumes_until_a_unit_then_detects_repairs_and_commits_post_hoc(sandbox, single):
    config = RuntimeConfig(segment_steps=2, **ORACLES)  # pauses after steps 2 and 4; rule opens at >= 3 pending
    record, runtime = play(sandbox, single, "rule", fault_of(single), config)
    assert record.grade["score"] == 1.0
    assert controls(record) == [
        ("segment_pause", "RESUME_WORKER"),  # 2 pending steps: not yet a unit, they stay pending
        ("segment_pause", "OPEN_STATE"),
        ("segment_pause", "UPDATE_STATE"),
        ("segment_pause", "REPAIR"),  # the constraint on `happy` fails
        ("segment_pause", "UPDATE_STATE"),
        ("segment_pause", "FINALIZE_RELATIONS"),
        ("segment_pause", "COMMIT_STATE"),
        ("task_end", "OPEN_STATE"),
        ("task_end", "UPDATE_STATE"),
        ("task_end", "FINALIZE_RELATIONS"),
        ("task_end", "COMMIT_STATE"),
    ]
    first = record.activations[0]["observation"]
    assert (first["untraced_steps"], first["pending_start_step"], first["pending_end_step"]) == (2, 0, 1)
    assert record.activations[-1]["observation"]["terminal_pending_review"] is True
    (repair,) = record.repairs
    assert (repair["mode"], repair["variable"], repair["worker_reaction"], repair["steps"]) == (
        "light", "happy", "localized", [4]
    )  # fmt: skip
    # the repair step re-ran the correct cells 1-4; the worker then carried on with the correct answer cell
    assert record.worker_steps[4]["meta"]["repair"] == "localized" and "6.0" in record.worker_steps[4]["code"]
    # states are formed post hoc with one inclusive interval each, covering every step once, in order
    intervals = [(s["id"], s["source_step_start"], s["source_step_end"]) for s in record.states]
    assert intervals == [("S1", 0, 4), ("S2", 5, 5)]
    assert [[(r["type"], r["related_state_id"]) for r in s["relations"]] for s in record.states] == [
        [("init", None)],
        [("progress", "S1")],
    ]
    assert {"df", "happy"} <= {v["name"] for v in record.states[0]["used_variables"]}
    assert [c["op"] for c in record.checkpoints] == ["turn_start", "take", "take"]
    # the solution is the (scripted) worker's code: the manager sees it through check_execution, the worker's
    # prompts never hold it
    assert not [text for channel, text in runtime.transcript if channel == "worker" and MARKER in text]
    assert any(MARKER in text for channel, text in runtime.transcript if channel == "policy")


@needs_table
def test_rule_on_a_clean_single_task_makes_no_repair(sandbox, single):
    record, _ = play(sandbox, single, "rule", config=RuntimeConfig(segment_steps=3))
    assert record.repairs == [] and record.grade["score"] == 1.0
    assert [(s["source_step_start"], s["source_step_end"]) for s in record.states] == [(0, 2), (3, 4)]
    assert all(a["legal"] for act in record.activations for a in act["actions"])


class IntervalPolicy:
    """Opens at the first pause, then updates with an interval reaching outside the pending steps."""

    name = "interval"
    active = True

    def __init__(self, interval):
        self.interval = interval

    def respond(self, inp):
        from harness.manager.actions import make_action
        from harness.manager.wire import render_action

        obs, legal = json.loads(inp.observation), set(inp.legal_actions)
        if "COMMIT_STATE" in legal:
            name, args = "COMMIT_STATE", {}
        elif "OPEN_STATE" in legal and obs["untraced_steps"]:
            name, args = "OPEN_STATE", {"issue": "i", "constraints": [], "relations": [{"type": "init"}]}
        elif "FINALIZE_RELATIONS" in legal:
            name, args = "FINALIZE_RELATIONS", {"mode": "confirm", "relations": [], "conflict_evidence": ""}
        elif "UPDATE_STATE" in legal:
            start, end = self.interval
            name, args = "UPDATE_STATE", {"issue": "i", "source_interval": {"start_step": start, "end_step": end},
                                          "used_variables": [], "conclusions": ["c"]}  # fmt: skip
        else:
            name, args = "ABSTAIN", {}
        return render_action(make_action(name, args))


@needs_table
def test_the_harness_clips_the_source_interval_to_the_pending_steps(sandbox, single):
    record, _ = play(sandbox, single, IntervalPolicy((1, 99)), config=RuntimeConfig(segment_steps=3))
    # pause after step 3: pending 0-2, [1, 99] is clipped to [1, 2] (step 0 is left untraced); the task-end review
    # sees pending 3-4 and [1, 99] is clipped to [3, 4]
    assert [(s["source_step_start"], s["source_step_end"]) for s in record.states] == [(1, 2), (3, 4)]
    updates = [a["result"] for act in record.activations for a in act["actions"] if a["result"].startswith("UPDATE")]
    assert updates[0].startswith("UPDATE_STATE: S1 bound to steps 1-2")


def test_flow_mismatch_names_the_kind_and_the_fix(sandbox):
    task = load_task(RETAIL)
    with pytest.raises(ValueError, match=r"multi_turn.*flow='turn'.*Fix: set flow='turn' or leave it unset"):
        ManagerRuntime(task, None, None, get_policy("none"), RuntimeConfig(flow="segment"))
    single_kind = SimpleNamespace(id="t", kind="closed_form")
    with pytest.raises(ValueError, match=r"closed_form.*Fix: set flow='segment'"):
        ManagerRuntime(single_kind, None, None, get_policy("none"), RuntimeConfig(flow="turn"))
    with pytest.raises(ValueError, match=r"flow='zigzag' is unknown; use one of \['segment', 'turn'\]"):
        RuntimeConfig(flow="zigzag")
    assert set(FLOWS) == set(FLOW_NAMES)  # the config checks the names the flows module plays
    with pytest.raises(ValueError, match="segment_steps=0"):
        RuntimeConfig(segment_steps=0)


def test_closed_form_text():
    assert closed_form_text({"n": 3, "m": 0.5}) == "@n[3] @m[0.5]"
    assert closed_form_text("@n[3]") == "@n[3]" and closed_form_text(None) == ""


# ---------------------------------------------------------------- turn-start checkpoints and rollback


def test_abandon_after_a_repair_on_turn_1_rolls_back_to_before_turn_1(sandbox):
    """The turn-1 fault's hint names the wrong variable, so repairs never help and the state is abandoned: the
    kernel is restored to the turn-start checkpoint of turn 1, so turn 2 starts from an empty namespace."""
    task = load_task(RETAIL)
    code = task.load_answers()["1"].code.replace("sales['unit_price']\n", "sales['unit_price'] * 2\nextra = 1\n")
    faults = {"1": Fault(task.id, "1", "x", code, variables=("extra",))}
    seen: dict[str, set[str]] = {}

    def on_event(name, payload):
        if name == "turn_start":
            seen[payload["turn_id"]] = set(kernel.variables())

    with sandbox.new_kernel(task.public_dir) as kernel:
        worker = ScriptedWorker.for_task(task, kernel, faults)
        config = RuntimeConfig(max_repairs=1, **ORACLES)
        record = ManagerRuntime(task, kernel, worker, get_policy("rule"), config, on_event=on_event).run()
    turn_1 = [c for c in record.checkpoints if c["turn_id"] == "1"]
    assert [c["op"] for c in turn_1] == ["turn_start", "restore"]
    assert turn_1[1]["checkpoint_id"] == turn_1[0]["checkpoint_id"]
    assert seen["1"] == set() and seen["2"] == set()  # `sales` and `extra` of turn 1 are gone
    assert not record.worker_steps[2]["execution"]["ok"]  # turn 2 finds no `sales`


# ---------------------------------------------------------------- state hints: invalidated states


def _state(state_id, relations=(), start=0):
    return AnalyticalState(state_id, f"issue {state_id}", relations=tuple(relations), source_step_start=start,
                           source_step_end=start)  # fmt: skip


def test_a_state_invalidated_by_a_later_state_is_marked_in_the_hint():
    task = load_task(RETAIL)
    runtime = ManagerRuntime(task, None, SimpleNamespace(steps=[], answers={}), get_policy("none"))
    runtime.committed = {
        "S1": _state("S1"),
        "S2": _state("S2", [Relation("progress", "S1")], 1),
        "S3": _state("S3", [Relation("invalidate", "S1")], 2),
    }
    runtime.draft = _state("S4", [Relation("combine", "S1"), Relation("combine", "S2")], 3)
    hint = runtime.state_hint(task.turns[4])
    body = json.loads(hint.split("\n")[1])
    assert [(s["id"], s.get("invalidated_by")) for s in body] == [("S1", "S3"), ("S2", None)]
    assert hint.endswith(f"{STATE_HINT_NOTE} {INVALIDATED_NOTE}")
    runtime.draft = _state("S4", [Relation("progress", "S2")], 3)
    assert INVALIDATED_NOTE not in runtime.state_hint(task.turns[4])  # nothing invalidated among the selected


def test_the_turn_that_invalidates_a_state_gets_it_marked(sandbox):
    record, _ = play(sandbox, load_task(RETAIL), "rule", config=RuntimeConfig(**ORACLES))
    hints = {h["turn_id"]: h["text"] for h in record.hints if h["kind"] == "state"}
    body = json.loads(hints["4"].split("\n")[1])
    assert [(s["id"], s["invalidated_by"]) for s in body] == [("S2", "S4")] and INVALIDATED_NOTE in hints["4"]
    assert [r["type"] for r in record.states[3]["relations"]] == ["invalidate"]


# ---------------------------------------------------------------- live-view events


def test_events_follow_the_episode_and_a_failing_callback_does_not_break_it(sandbox, caplog):
    task = load_task(RETAIL)
    events = []

    def on_event(name, payload):
        events.append((name, payload))
        if name == "worker_step":
            raise RuntimeError("the live view crashed")

    fault = task.load_answers()["1"].code.replace("* sales['unit_price']", "+ sales['unit_price']")
    faults = {"1": Fault(task.id, "1", "unit_slip", fault)}
    record, _ = play(sandbox, task, "rule", faults, RuntimeConfig(**ORACLES), on_event=on_event)
    names = [name for name, _ in events]
    assert set(names) <= set(EVENTS) and set(names) == set(EVENTS) - {"abandon"}
    assert names[0] == "turn_start" and names[-1] == "episode_end"
    assert events[0][1] == {"turn_id": "1", "question": task.turns[0].question}
    assert [p for n, p in events if n == "worker_step"] == record.worker_steps
    assert [p for n, p in events if n == "activation"] == record.activations
    assert [p for n, p in events if n == "hint"] == record.hints
    assert [p for n, p in events if n == "repair"] == record.repairs
    assert [p for n, p in events if n == "commit"] == record.states
    assert events[-1][1] == {"grade": record.grade} and record.grade["score"] == 1.0
    assert "the live view crashed" in caplog.text


# ---------------------------------------------------------------- the windowed ablation hook


class WindowPolicy:
    """A stand-in windowed policy: names the last K steps' codes; empty before any step."""

    name = "window-stand-in"
    active = True
    style = "windowed"

    def __init__(self, k=2):
        self.k, self.calls = k, []

    def window_hint(self, steps, turn):
        self.calls.append(len(steps))
        return "" if not steps else f"<window_hint>last steps: {[s.step_id for s in steps[-self.k :]]}</window_hint>"

    def respond(self, inp):  # never called: a windowed policy gets no activations
        raise AssertionError("a windowed policy was activated")


def test_windowed_turn_flow_hints_at_each_turn_start(sandbox):
    task = load_task(RETAIL)
    policy = WindowPolicy()
    record, runtime = play(sandbox, task, policy)
    assert record.activations == [] and record.states == []
    assert policy.calls == [0, 1, 2, 3, 4]
    hints = [(h["kind"], h["turn_id"], h["step_id"]) for h in record.hints]
    assert hints == [("window", "2", 1), ("window", "3", 2), ("window", "4", 3), ("window", "5", 4)]
    prompts = [text for channel, text in runtime.transcript if channel == "worker"]
    assert prompts[1].endswith("<window_hint>last steps: [0]</window_hint>") and "Question:" in prompts[1]
    assert record.config["manager_style"] == "windowed"


@needs_table
def test_windowed_segment_flow_notes_at_each_pause(sandbox, single):
    policy = WindowPolicy(k=1)
    record, runtime = play(sandbox, single, policy, config=RuntimeConfig(segment_steps=2))
    assert record.activations == [] and policy.calls == [2, 4]
    assert [(h["kind"], h["step_id"], h["text"]) for h in record.hints] == [
        ("window", 2, "<window_hint>last steps: [1]</window_hint>"),
        ("window", 4, "<window_hint>last steps: [3]</window_hint>"),
    ]
    assert runtime.worker.notes == [h["text"] for h in record.hints]
    assert record.grade["score"] == 1.0


def test_rule_policy_unit_steps_must_be_positive():
    with pytest.raises(ValueError, match="unit_steps=0"):
        RulePolicy(unit_steps=0)


# ---------------------------------------------------------------- other workers and kinds


class CellBackend:
    """A chat backend that replies with the given cells, one per call, then a final answer."""

    def __init__(self, cells):
        self.replies = [f"Next.\n```python\n{cell}\n```" for cell in cells] + ["Final Answer: done"]

    def chat(self, messages):
        return ChatReply(
            self.replies.pop(0), prompt_tokens=sum(len(m["content"]) for m in messages), completion_tokens=7
        )


@needs_table
def test_the_segment_flow_drives_a_react_worker_step_by_step(sandbox, single):
    cells = split_cells((FIXTURE / "solution.py").read_text())
    with sandbox.new_kernel(single.public_dir) as kernel:
        worker = ReActWorker(CellBackend(cells), kernel, ReActConfig(max_steps=8))
        config = RuntimeConfig(segment_steps=2)
        record = ManagerRuntime(single, kernel, worker, get_policy("rule"), config).run()
    assert record.grade["score"] == 1.0 and not record.simulated
    assert len(record.worker_steps) == 6 and record.worker_steps[-1]["meta"] == {"final": True}
    assert all(s["completion_tokens"] == 7 and s["prompt_tokens"] > 0 for s in record.worker_steps)
    assert record.repairs == [] and [(s["source_step_start"], s["source_step_end"]) for s in record.states] == [
        (0, 3), (4, 5)
    ]  # fmt: skip


def test_an_artifact_task_is_graded_on_the_file_in_the_workspace(sandbox, tmp_path):
    root = tmp_path / "artifact"
    (root / "public").mkdir(parents=True)
    (root / "private").mkdir()
    (root / "config.yaml").write_text(
        "id: tiny-artifact\nkind: artifact\nsubmission:\n  id_column: id\n  metric: accuracy\n"
        "constraints:\n- text: pred is a 0/1 label per row\n  code: assert set(pred) <= {0, 1}\n"
        "metadata:\n  constraint_code_public: true\n"  # the task publishes its check: rule probes it by default
    )
    (root / "description.md").write_text("Predict y = x > 1 for each row of data.csv; write submission.csv.\n")
    (root / "public" / "data.csv").write_text("id,x\n1,0\n2,2\n3,5\n")
    (root / "public" / "sample_submission.csv").write_text("id,y\n1,0\n2,0\n3,0\n")
    (root / "private" / "answers.csv").write_text("id,y\n1,0\n2,1\n3,1\n")
    (root / "private" / "solution.py").write_text(
        "import pandas as pd\ndata = pd.read_csv(f'{DATA_DIR}/data.csv')\n# %%\npred = [int(x > 1) for x in data.x]\n"
        "# %%\npd.DataFrame({'id': data.id, 'y': pred}).to_csv('submission.csv', index=False)\n"
    )
    task = load_task(root)
    assert [c.code for c in task.config.constraints] == ["assert set(pred) <= {0, 1}"]
    record, runtime = play(sandbox, task, "rule", config=RuntimeConfig(segment_steps=2))
    assert record.config["flow"] == "segment" and record.grade["valid"] and record.grade["score"] == 1.0
    assert runtime.submission().endswith("submission.csv") and record.repairs == []
    assert [c["code"] for c in record.states[0]["constraints"]] == ["assert set(pred) <= {0, 1}"]
    assert record.config["constraint_code_public"] is True and record.config["executable_constraints"] is False
    assert record.config["manager_view"] == {"oracle_relations": False, "executable_constraints": True}


def test_task_level_constraints_are_for_single_tasks_only():
    constraint = TurnConstraint("x is positive", "assert x > 0")
    config = TaskConfig(id="t", kind="closed_form", answer_format="@x[value]", constraints=(constraint,))
    assert TaskConfig.from_dict(config.to_dict()) == config
    with pytest.raises(TaskConfigError, match=r"constraints: task-level constraints are for single-question"):
        TaskConfig(id="t", kind="multi_turn", turns=(Turn("1", "q"),), constraints=(constraint,))
    with pytest.raises(TaskConfigError, match=r"constraints\[0\]\.code: is not valid Python"):
        TaskConfig.from_dict({"id": "t", "kind": "closed_form", "answer_format": "@x[v]",
                              "constraints": [{"text": "t", "code": "x ="}]})  # fmt: skip


class ReplyBackend:
    """A chat backend that replays fixed replies and keeps the last conversation it saw."""

    def __init__(self, replies):
        self.replies, self.seen = list(replies), []

    def chat(self, messages):
        self.seen = [dict(m) for m in messages]
        return ChatReply(self.replies.pop(0), prompt_tokens=3, completion_tokens=2)


def test_the_turn_flow_drives_a_react_worker_and_its_prompts_carry_the_state_hints(sandbox):
    task = load_task(RETAIL)
    replies = []
    for reference in task.load_answers().values():
        replies += [f"Compute.\n```python\n{reference.code}\n```", "Final Answer: see the result above"]
    backend = ReplyBackend(replies)
    with sandbox.new_kernel(task.public_dir) as kernel:
        worker = ReActWorker(backend, kernel, ReActConfig(max_steps=3))
        record = ManagerRuntime(task, kernel, worker, get_policy("rule"), RuntimeConfig(oracle_relations=True)).run()
    assert record.grade["score"] == 1.0 and len(record.worker_steps) == 10 and len(record.states) == 5
    users = [m["content"] for m in backend.seen if m["role"] == "user"]
    hinted = [text for text in users if "<analytical_state_hint>" in text]
    assert len(hinted) == 4 and all(STATE_HINT_NOTE in text for text in hinted)
    assert [(h["turn_id"], h["step_id"]) for h in record.hints] == [("2", 2), ("3", 4), ("4", 6), ("5", 8)]
