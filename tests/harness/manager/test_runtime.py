"""The turn-aligned manager runtime on real tasks (real sandbox): with ``none`` a turn-1 fault propagates, with
``rule`` given the constraint code (``executable_constraints``) it is detected by the turn's executable constraint,
repaired (light) and every turn comes out right, while by default (texts only) it has nothing to probe; a clean run
gets no repair; nothing from ``private/`` reaches the policy or the worker; malformed and illegal responses are
recorded and the episode completes."""

import json
import shutil
from pathlib import Path

import pytest

from harness.manager.actions import make_action
from harness.manager.episode import EpisodeRecord
from harness.manager.policy_registry import get_policy
from harness.manager.policy_types import PolicyInput
from harness.manager.records import Relation
from harness.manager.runtime import ManagerRuntime, RuntimeConfig, normalize_relations
from harness.manager.wire import render_action
from harness.sandbox import Sandbox, SandboxConfig
from harness.tasks import grade_task, load_task
from harness.worker import Fault, ScriptedWorker, faults_for_task, load_faults

ROOT = Path(__file__).resolve().parents[3]
FIXTURE = Path(__file__).resolve().parent / "fixtures" / "happiness"
TABLE = ROOT / ".." / "shared" / "benchmarks" / "dabench-dev" / "tables" / "2015.csv"
needs_table = pytest.mark.skipif(not TABLE.exists(), reason=f"DABench dev table not found at {TABLE}")
RETAIL = ROOT / "harness" / "builtin_tasks" / "retail-sales"
ISOLATION = "bwrap" if shutil.which("bwrap") else "none"
MARKER = "PRIVATE-MARKER-7f3c9e21"
WORKER_CODE = "WORKER-CODE-MARKER-2b8e"
needs_table = pytest.mark.skipif(not TABLE.exists(), reason=f"DABench dev table not found at {TABLE}")
ORACLES = RuntimeConfig(oracle_relations=True, executable_constraints=True)
"""The task graph and the constraint code in the manager's view: the rule policy relates states by the declared
graph and probes the constraints (the mechanics these tests check); without them it sees texts only."""


@pytest.fixture(scope="module")
def sandbox():
    with Sandbox(SandboxConfig(isolation=ISOLATION)) as sb:
        yield sb


@pytest.fixture(scope="module")
def happiness(sandbox, tmp_path_factory):
    """The fixture task folder built in a temp dir: table in public/, reference computed in the sandbox."""
    root = tmp_path_factory.mktemp("task") / "happiness"
    (root / "public" / "data").mkdir(parents=True)
    (root / "private").mkdir()
    for name in ("config.yaml", "description.md"):
        shutil.copy(FIXTURE / name, root / name)
    shutil.copy(TABLE, root / "public" / "data" / "2015.csv")
    programs = json.loads((FIXTURE / "programs.json").read_text())
    reference = {}
    with sandbox.new_kernel(root / "public") as kernel:
        for turn_id, code in programs.items():
            result = kernel.execute(code)
            assert result.ok, result.error_message
            # the scripted worker runs the reference code: it is the worker's code, which the manager sees
            # (check_execution shows it) and the worker's prompts never hold; the private marker is elsewhere
            reference[turn_id] = {"code": f"{code}\n# {WORKER_CODE}", "answer": result.results[-1]}
    (root / "private" / "reference.json").write_text(json.dumps(reference))
    (root / "private" / "notes.md").write_text(f"grader notes {MARKER}\n")
    return load_task(root)


def play(sandbox, task, policy, faults_file=None, fault_code=None, config=None):
    programs = {t: ref.code for t, ref in task.load_answers().items()}
    faults = faults_for_task(load_faults(faults_file), task.id) if faults_file else {}
    if fault_code is not None:
        faults = {"1": Fault(task.id, "1", "unit_slip", fault_code)}
    with sandbox.new_kernel(task.public_dir) as kernel:
        worker = ScriptedWorker(kernel, programs, faults)
        runtime = ManagerRuntime(task, kernel, worker, policy if not isinstance(policy, str) else get_policy(policy),
                                 config)  # fmt: skip
        record = runtime.run()
    return record, runtime


def per_turn(record):
    return {turn: detail["correct"] for turn, detail in record.grade["details"]["turns"].items()}


def retail_fault(task):
    code = task.load_answers()["1"].code
    return code.replace("sales['quantity'] * sales['unit_price']", "sales['quantity'] + sales['unit_price']")


# ---------------------------------------------------------------- done means: DABench-table fixture


@needs_table
def test_none_lets_the_turn_1_fault_propagate(sandbox, happiness):
    record, _ = play(sandbox, happiness, "none", FIXTURE / "faults.jsonl")
    assert per_turn(record) == {"1": False, "2": False, "3": True, "4": False}
    assert record.activations == [] and record.repairs == [] and record.states == []
    assert record.simulated and record.grade["score"] == pytest.approx(0.25)
    assert record.config["manager"] == "none" and record.config["faults"] == {"1": "wrong_threshold"}


@needs_table
def test_rule_detects_repairs_light_and_every_turn_is_right(sandbox, happiness):
    record, runtime = play(sandbox, happiness, "rule", FIXTURE / "faults.jsonl", config=ORACLES)
    assert per_turn(record) == {"1": True, "2": True, "3": True, "4": True}
    assert [(r["turn_id"], r["mode"], r["variable"], r["worker_reaction"]) for r in record.repairs] == [
        ("1", "light", "happy", "localized")
    ]
    repair_hint = [h for h in record.hints if h["kind"] == "repair"]
    assert len(repair_hint) == 1 and "happy" in repair_hint[0]["text"] and "Happiness Score" in repair_hint[0]["text"]
    # one committed state per turn, ids assigned by the harness, relations from the declared structure
    assert [s["id"] for s in record.states] == ["S1", "S2", "S3", "S4"]
    assert [[(r["type"], r["related_state_id"]) for r in s["relations"]] for s in record.states] == [
        [("init", None)],
        [("progress", "S1")],
        [("branch", "S1")],
        [("combine", "S2"), ("combine", "S3")],
    ]
    s1 = record.states[0]
    assert (s1["source_step_start"], s1["source_step_end"]) == (0, 1)  # the faulty run and the repaired re-run
    assert {v["name"] for v in s1["used_variables"]} == {"df", "happy"}
    assert all(v["version"] >= 1 and v["value"] for v in s1["used_variables"])
    assert [c["state_id"] for c in record.checkpoints if c["op"] == "take"] == ["S1", "S2", "S3", "S4"]
    assert [c["turn_id"] for c in record.checkpoints if c["op"] == "turn_start"] == ["1", "2", "3", "4"]
    # state hints went to the dependent turns' prompts and name the related committed states
    state_hints = {h["turn_id"]: h["text"] for h in record.hints if h["kind"] == "state"}
    assert set(state_hints) == {"2", "3", "4"} and '"id": "S1"' in state_hints["2"]
    assert grade_task(happiness, record.final_answers).score == 1.0
    assert EpisodeRecord.from_dict(json.loads(record.to_json())).states == record.states
    assert record.config["manager_view"] == {"oracle_relations": True, "executable_constraints": True}


@needs_table
def test_without_oracles_rule_sees_texts_only_and_misses_the_silent_fault(sandbox, happiness):
    """By default the rule policy has no constraint code to probe (the threshold fault raises nothing, so nothing
    is evidence) and relates states by the questions' words, which name no earlier turn here: every state is init."""
    record, runtime = play(sandbox, happiness, "rule", FIXTURE / "faults.jsonl")
    assert record.repairs == [] and per_turn(record)["1"] is False
    assert [[r["type"] for r in s["relations"]] for s in record.states] == [["init"]] * 4
    assert all(c["code"] is None for s in record.states for c in s["constraints"])
    assert not [h for h in record.hints if h["kind"] == "state"]  # no related state to show the worker
    assert record.config["manager_view"] == {"oracle_relations": False, "executable_constraints": False}
    assert (record.config["oracle_relations"], record.config["executable_constraints"]) == (False, False)
    assert record.config["constraint_code_public"] is False
    code = happiness.turns[0].constraints[0].code
    sent = [text for channel, text in runtime.transcript if channel == "policy"]
    assert sent and not [t for t in sent if code in t or "declared_relation" in t or "depends_on_turns" in t]


@needs_table
def test_rule_makes_no_repair_on_a_clean_run(sandbox, happiness):
    record, _ = play(sandbox, happiness, "rule")
    assert record.repairs == [] and all(per_turn(record).values())
    assert len(record.states) == 4
    assert all(a["legal"] for act in record.activations for a in act["actions"])


@needs_table
def test_nothing_private_reaches_the_policy_or_the_worker(sandbox, happiness):
    assert MARKER in (happiness.private_dir / "notes.md").read_text()
    record, runtime = play(sandbox, happiness, "rule", FIXTURE / "faults.jsonl")
    sent = [text for _, text in runtime.transcript]
    assert {channel for channel, _ in runtime.transcript} == {"policy", "worker"} and len(sent) > 20
    observations = [json.dumps(a["observation"]) for a in record.activations]
    hints = [h["text"] for h in record.hints]
    assert not [text for text in sent + observations + hints if MARKER in text]
    reference_steps = [s for s in record.worker_steps if s["code"] and not s["meta"]["faulty"]]
    assert reference_steps and all(WORKER_CODE in s["code"] for s in reference_steps)  # the worker ran it
    assert not [text for channel, text in runtime.transcript if channel == "worker" and WORKER_CODE in text]
    assert not [text for text in observations + hints if WORKER_CODE in text]
    # the reference answers are private too: no turn's full reference answer object is shown before grading
    for turn_id, ref in happiness.load_answers().items():
        assert not any(json.dumps(ref.answer) in text for text in sent if "Question:" in text), turn_id


# ---------------------------------------------------------------- done means: the built-in task


def test_builtin_task_none_propagates_and_rule_repairs(sandbox):
    task = load_task(RETAIL)
    fault = retail_fault(task)
    plain, _ = play(sandbox, task, "none", fault_code=fault)
    assert per_turn(plain) == {"1": False, "2": False, "3": False, "4": True, "5": True}
    managed, _ = play(sandbox, task, "rule", fault_code=fault, config=ORACLES)
    assert all(per_turn(managed).values())
    assert [(r["mode"], r["variable"]) for r in managed.repairs] == [("light", "sales")]
    clean, _ = play(sandbox, task, "rule")
    assert clean.repairs == [] and all(per_turn(clean).values()) and len(clean.states) == 5


def hint_resistant_worker(task, kernel):
    """A turn-1 fault whose corrupted variable is not the one the constraint names. The fault writes `extra` too,
    but the scripted worker only repairs when the hint names a corrupted variable: the corrupted set is {'extra'}."""
    code = task.load_answers()["1"].code.replace(
        "sales['revenue'] = sales['quantity'] * sales['unit_price']",
        "sales['revenue'] = sales['quantity'] * sales['unit_price'] * 2\nextra = 1",
    )
    programs = {t: ref.code for t, ref in task.load_answers().items()}
    return ScriptedWorker(kernel, programs, {"1": Fault(task.id, "1", "x", code, variables=("extra",))})


def test_a_fault_the_hint_cannot_fix_escalates_to_heavy_and_is_abandoned(sandbox):
    """A fault whose corrupted variable is not the one the constraint names: the worker ignores the hints, the
    harness escalates to heavy repairs (deleting the variable), then the budget is spent and the state abandoned."""
    task = load_task(RETAIL)
    with sandbox.new_kernel(task.public_dir) as kernel:
        worker = hint_resistant_worker(task, kernel)
        record = ManagerRuntime(task, kernel, worker, get_policy("rule"), ORACLES).run()
    modes = [(r["mode"], r["removed"], r["worker_reaction"]) for r in record.repairs if r["turn_id"] == "1"]
    assert modes == [("light", [], "ignored"), ("heavy", ["sales"], "ignored"), ("heavy", [], "ignored")]
    turn_1 = [a for a in record.activations if a["turn_id"] == "1"]
    assert turn_1[-1]["actions"][-1]["parsed"]["name"] == "ABANDON_STATE"  # repair budget spent, evidence remains
    assert not any(s["source_step_start"] == 0 for s in record.states)  # no committed state covers turn 1


def test_id_only_checkpoints_record_the_same_episode_without_forking(sandbox):
    """restorable_checkpoints=False (synthesis): the same record, checkpoint ids and ops included, but the kernel
    never forked a snapshot for them."""
    task = load_task(RETAIL)
    fault = retail_fault(task)
    records = {}
    for restorable in (True, False):
        with sandbox.new_kernel(task.public_dir) as kernel:
            programs = {t: ref.code for t, ref in task.load_answers().items()}
            worker = ScriptedWorker(kernel, programs, {"1": Fault(task.id, "1", "unit_slip", fault)})
            config = RuntimeConfig(restorable_checkpoints=restorable, executable_constraints=True)
            records[restorable] = ManagerRuntime(task, kernel, worker, get_policy("rule"), config).run()
            verifier = [kernel._probes.verifier.pid] if kernel._probes.verifier is not None else []
            forked = [pid for pid in kernel._keep_pids() if pid not in verifier]  # the probes' verifier is no snapshot
            assert (forked != []) is restorable  # the held turn-start/commit checkpoints: processes or ids only
    real, ids_only = (json.loads(records[k].to_json()) for k in (True, False))
    assert ids_only["config"].pop("restorable_checkpoints") is False
    assert real["config"].pop("restorable_checkpoints") is True
    assert len(real["checkpoints"]) > 5 and real["repairs"]
    for key in ("checkpoints", "states", "repairs", "transitions", "final_answers", "grade", "config"):
        assert ids_only[key] == real[key], key
    strip = [{k: v for k, v in a.items() if k != "latency_s"} for a in real["activations"]]
    assert [{k: v for k, v in a.items() if k != "latency_s"} for a in ids_only["activations"]] == strip


def test_abandoning_a_repaired_state_without_snapshots_is_a_clear_error(sandbox):
    task = load_task(RETAIL)
    with sandbox.new_kernel(task.public_dir) as kernel:
        config = RuntimeConfig(restorable_checkpoints=False, executable_constraints=True)
        runtime = ManagerRuntime(task, kernel, hint_resistant_worker(task, kernel), get_policy("rule"), config)
        with pytest.raises(RuntimeError, match="ABANDON_STATE of repaired state S1 .*restorable_checkpoints=True"):
            runtime.run()


# ---------------------------------------------------------------- malformed and illegal responses


class ScriptedPolicy:
    """Replays fixed responses, then repeats the last one."""

    name = "scripted"
    active = True

    def __init__(self, responses):
        self.responses = list(responses)
        self.inputs: list[PolicyInput] = []

    def respond(self, inp):
        self.inputs.append(inp)
        return self.responses.pop(0) if len(self.responses) > 1 else self.responses[0]


def call(name, **arguments):
    return render_action(make_action(name, arguments))


def test_malformed_and_illegal_responses_are_recorded_and_the_episode_completes(sandbox):
    task = load_task(RETAIL)
    policy = ScriptedPolicy(
        [
            "<tool_call>{not json</tool_call>",  # bad JSON
            call("COMMIT_STATE"),  # illegal in phase idle
            "free prose, no tool call",
            call("OPEN_STATE", issue="q", constraints=[], relations=[{"type": "init"}]),
            call("ABSTAIN"),  # from here on: ABSTAIN is illegal while a state is open -> budgets run out
        ]
    )
    config = RuntimeConfig(max_actions=3, max_turn_end_activations=2)
    record, runtime = play(sandbox, task, policy, config=config)
    actions = [a for act in record.activations for a in act["actions"]]
    first = record.activations[0]["actions"]
    assert [a["legal"] for a in first] == [False, False, False]  # budget of 3 spent, activation ended
    assert first[0]["result"].startswith("rejected:") and first[0]["parsed"] is None
    assert first[1]["result"].startswith("illegal:") and "OPEN_STATE" in first[1]["result"]
    # turn 1 end: OPEN_STATE (legal), then 3 illegal ABSTAINs -> the 2 turn-end activations are used up and the
    # harness abandons the never-updated state;
    # later turns: ABSTAIN is legal with no open state, so each activation ends at once
    assert sum(not a["legal"] for a in actions) == 3 + 3
    harness_acts = [a for a in record.activations if a["actor"] == "harness"]
    assert [(a["turn_id"], a["actions"][0]["parsed"]["name"]) for a in harness_acts] == [("1", "ABANDON_STATE")]
    assert record.states == [] and all(per_turn(record).values())
    assert any(not t["legal"] for t in record.transitions)


def test_a_repair_hint_with_code_is_refused_and_counted(sandbox):
    task = load_task(RETAIL)
    open_ = call("OPEN_STATE", issue="q", constraints=[], relations=[{"type": "init"}])
    update = call("UPDATE_STATE", issue="q", source_interval={"start_step": 0, "end_step": 0},
                  used_variables=["sales", "nope"], conclusions=["c"])  # fmt: skip
    bad_repair = call("REPAIR", analytical_evidence="x", error_hint={"error_variable": "sales",
                      "faulty_reasoning": "sales = 1"})  # fmt: skip
    finalize = call("FINALIZE_RELATIONS", mode="confirm", relations=[], conflict_evidence="")
    policy = ScriptedPolicy([open_, update, bad_repair, finalize, call("COMMIT_STATE"), open_])
    record, _ = play(sandbox, task, policy, config=RuntimeConfig(max_turn_end_activations=3))
    refused = [
        a for act in record.activations for a in act["actions"] if a["parsed"] and a["parsed"]["name"] == "REPAIR"
    ]
    assert refused and refused[0]["legal"] is False and "must not carry code" in refused[0]["result"]
    assert record.repairs == []
    s1 = record.states[0]
    assert [v["name"] for v in s1["used_variables"]] == ["sales"]  # the unknown name is dropped by the harness
    update_result = next(a["result"] for act in record.activations for a in act["actions"]
                         if a["parsed"] and a["parsed"]["name"] == "UPDATE_STATE")  # fmt: skip
    assert "nope" in update_result


def test_normalize_relations_dedupes_and_keeps_only_committed_states():
    rels = (
        Relation("progress", "S1"),
        Relation("progress", "S1"),
        Relation("branch", "S9"),
        Relation("combine", "S3"),
    )
    assert normalize_relations(rels, {"S1", "S2"}, "S3") == (Relation("progress", "S1"),)
    assert normalize_relations((Relation("progress", "S3"),), {"S1"}, "S3") == (Relation("init", None),)


class FailingPolicy:
    """A policy whose endpoint is down: every call raises."""

    name = "failing"
    active = True

    def __init__(self):
        self.calls = 0

    def respond(self, inp: PolicyInput) -> str:
        self.calls += 1
        raise ConnectionError("chat endpoint http://127.0.0.1:9/v1 failed")


def test_a_policy_that_raises_costs_actions_not_the_episode(sandbox):
    task = load_task(RETAIL)
    policy = FailingPolicy()
    record, _ = play(sandbox, task, policy, config=RuntimeConfig(max_actions=2, max_turn_end_activations=1))
    actions = [a for act in record.activations if act["actor"] == "policy" for a in act["actions"]]
    assert policy.calls == len(actions) > 0
    assert all(not a["legal"] and "the policy failed to respond (ConnectionError" in a["result"] for a in actions)
    assert all(per_turn(record).values())  # the worker still answered every turn


# ---------------------------------------------------------------- check specs: constraints and run_check

NO_MISSING_REGION = {"kind": "no_missing", "variable": "sales", "columns": ["region"]}


class CheckingPolicy:
    """Turn 1: OPEN_STATE with a constraint that carries a check, UPDATE_STATE, run_check of that check, REPAIR
    quoting the failed check's reason; after the repair, UPDATE_STATE restating the constraints, confirm, commit.
    Other turns: ABSTAIN."""

    name = "checking"
    active = True

    def __init__(self):
        self.repaired, self.last = False, None

    def respond(self, inp):
        if inp.turn.turn_id != "1":
            return call("ABSTAIN")
        response = self._respond(inp, inp.legal_actions)
        self.last = json.loads(response.split("\n")[1])["name"]
        return response

    def _respond(self, inp, legal):
        if "OPEN_STATE" in legal:
            text = "Every order has a region."
            return call("OPEN_STATE", issue="q", constraints=[{"text": text, "check": NO_MISSING_REGION}],
                        relations=[{"type": "init"}])  # fmt: skip
        if "UPDATE_STATE" in legal and self.last in ("OPEN_STATE", "REPAIR"):
            restated = {"constraints": [{"text": "restated"}]} if self.repaired else {}
            return call("UPDATE_STATE", issue="q", source_interval={"start_step": 0, "end_step": 0},
                        used_variables=["sales"], conclusions=["c"], **restated)  # fmt: skip
        if "COMMIT_STATE" in legal:
            return call("COMMIT_STATE")
        if self.repaired:
            return call("FINALIZE_RELATIONS", mode="confirm", relations=[], conflict_evidence="")
        if not inp.tool_results:
            return call("run_check", spec=NO_MISSING_REGION)
        self.repaired = True
        reason = json.loads(inp.tool_results[-1])["reason"]
        hint = {"error_variable": "sales", "faulty_reasoning": "orders without a region were kept"}
        return call("REPAIR", analytical_evidence=f"run_check failed: {reason}", error_hint=hint)


def test_a_constraint_check_from_open_state_runs_as_that_constraint_and_its_failure_is_repair_evidence(sandbox):
    from harness.manager.prompts import render_evidence

    record, _ = play(sandbox, load_task(RETAIL), CheckingPolicy())
    actions = [a for act in record.activations if act["turn_id"] == "1" for a in act["actions"]]
    checked = next(a for a in actions if a["parsed"]["name"] == "run_check")
    result = json.loads(checked["result"])
    assert checked["legal"] and result["passed"] is False and result["constraint"] == "Every order has a region."
    assert result["kind"] == "no_missing" and result["variable"] == "sales" and "region" in result["reason"]
    assert render_evidence([checked["result"]]).startswith("[evidence this activation: 1 failed: run_check failed: ")
    repair = next(a for a in actions if a["parsed"]["name"] == "REPAIR")
    assert repair["legal"] and result["reason"] in repair["parsed"]["arguments"]["analytical_evidence"]
    assert [(r["turn_id"], r["mode"], r["variable"]) for r in record.repairs] == [("1", "light", "sales")]
    assert [s["constraints"] for s in record.states] == [[{"text": "restated", "code": None}]]  # UPDATE_STATE's
