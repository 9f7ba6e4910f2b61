"""The hierarchical manager ``hier`` on the built-in task with the scripted worker: tier 0 alone commits what the rule
policy commits; a failed execution is repaired by tier 0 without a model call; bad tier-1 replies (garbage, an
illegal action, a raising backend, a REPAIR without evidence) are recorded and the state is confirmed; a tier-1
REPAIR that quotes its probe reaches the worker. Also the evidence rule, the tier-1 prompt and the spec."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from harness.llm import ChatReply
from harness.manager.actions import make_action
from harness.manager.hier import HARNESS, POLICY, HierPolicy, quotes_tool_result
from harness.manager.hier_prompts import DECISIONS, HIER_SYSTEM, TIER1_TOOLS, tier1_tool_schemas
from harness.manager.policies import RulePolicy
from harness.manager.policy_registry import get_policy
from harness.manager.policy_types import PolicyInput
from harness.manager.prompts import tool_response_body
from harness.manager.runtime import ManagerRuntime
from harness.manager.wire import parse_response, render_action
from harness.sandbox import Sandbox, SandboxConfig
from harness.tasks import load_task
from harness.worker import Fault, ScriptedWorker

ROOT = Path(__file__).resolve().parents[3]
RETAIL = ROOT / "harness" / "builtin_tasks" / "retail-sales"
ISOLATION = "bwrap" if shutil.which("bwrap") else "none"
STATE_KEYS = ("issue", "constraints", "relations", "used_variables", "conclusions", "source_step_start",
              "source_step_end")  # fmt: skip


@pytest.fixture(scope="module")
def sandbox():
    with Sandbox(SandboxConfig(isolation=ISOLATION)) as sb:
        yield sb


@pytest.fixture(scope="module")
def task():
    return load_task(RETAIL)


class ActorSpy:
    """Wraps a policy and records ``(actor, raw response)`` of every response (what the runtime will record)."""

    active = True

    def __init__(self, policy):
        self.policy, self.name = policy, policy.name
        self.log: list[tuple[str, str]] = []

    @property
    def last_actor(self):
        return getattr(self.policy, "last_actor", None)

    def respond(self, inp):
        raw = self.policy.respond(inp)
        self.log.append((getattr(self.policy, "last_actor", HARNESS), raw))
        return raw


def play(sandbox, task, policy, fault_turn=None, fault_code=None):
    programs = {t: ref.code for t, ref in task.load_answers().items()}
    faults = {fault_turn: Fault(task.id, fault_turn, "test", fault_code)} if fault_code else {}
    spy = ActorSpy(policy)
    with sandbox.new_kernel(task.public_dir) as kernel:
        record = ManagerRuntime(task, kernel, ScriptedWorker(kernel, programs, faults), spy).run()
    return record, spy


def correct(record):
    return all(d["correct"] for d in record.grade["details"]["turns"].values())


def actions(record, turn_id=None):
    return [a for act in record.activations if turn_id in (None, act["turn_id"]) for a in act["actions"]]


def call(name, **arguments):
    return render_action(make_action(name, arguments))


CONFIRM = call("FINALIZE_RELATIONS", mode="confirm", relations=[], conflict_evidence="")


class StubBackend:
    """A tier-1 chat backend: ``reply(turn_id, messages)`` gives the text (or raises); calls are counted per turn."""

    def __init__(self, reply):
        self.reply = reply
        self.turns: list[str] = []
        self.requests: list[list[dict]] = []

    def chat(self, messages, tools=None):
        assert [t["function"]["name"] for t in tools] == [*DECISIONS, *TIER1_TOOLS]
        turn_id = re.search(r'"turn_id": "(\w+)"', messages[1]["content"]).group(1)
        self.turns.append(turn_id)
        self.requests.append(messages)
        return ChatReply(self.reply(turn_id, messages), prompt_tokens=100, completion_tokens=10)


# ---------------------------------------------------------------- tier 0


def test_tier0_alone_keeps_the_books_without_a_model(sandbox, task):
    policy = get_policy("hier:none")
    hier, spy = play(sandbox, task, policy)
    assert policy.name == "hier-none" and policy.tier1 is None and policy.stats.calls == 0
    assert len(hier.states) == 5 and hier.repairs == [] and correct(hier)
    assert [s["issue"].split(":")[0] for s in hier.states] == [f"Turn {t}" for t in "12345"]
    assert all(s["used_variables"] and s["conclusions"] for s in hier.states)
    assert {actor for actor, _ in spy.log} == {HARNESS}
    # the same states as the gold manager of synthesis: tests/synthesis/test_gold.py


def test_a_failed_execution_is_repaired_by_tier0_without_a_model_call(sandbox, task):
    code = task.load_answers()["2"].code.replace("clean['region'].str", "clean['Region'].str")
    backend = StubBackend(lambda turn_id, messages: CONFIRM)
    policy = HierPolicy(backend)
    record, spy = play(sandbox, task, policy, "2", code)
    assert backend.turns == ["1", "2", "3", "4", "5"]  # turn 2: only the repaired state's check asks tier 1
    assert "attempt 2 of" in backend.requests[1][1]["content"]  # the request came after tier 0's repair
    assert [(r["turn_id"], r["mode"], r["variable"], r["worker_reaction"]) for r in record.repairs] == [
        ("2", "light", "clean", "localized")
    ]
    repair = next(a for a in actions(record, "2") if a["parsed"]["name"] == "REPAIR")
    assert "KeyError" in repair["parsed"]["arguments"]["analytical_evidence"]
    assert len(record.states) == 5 and correct(record)
    assert repair["actor"] == HARNESS
    assert policy.stats.calls == 5 and policy.stats.prompt_tokens == 500 and policy.rejected == []
    assert [actor for actor, _ in spy.log].count(POLICY) == 5


# ---------------------------------------------------------------- tier 1: rejected replies, a quoted repair


def bad_replies(turn_id, messages):
    if turn_id == "1":
        return "the state looks fine to me <tool_call>{not json"
    if turn_id == "2":
        return call("COMMIT_STATE")  # not a tier-1 action
    if turn_id == "3":
        raise ConnectionError("chat endpoint http://127.0.0.1:9/v1 failed")
    if turn_id == "4":
        hint = {"error_variable": "by_region", "faulty_reasoning": "the totals look too high"}
        return call("REPAIR", analytical_evidence="I suspect the revenue is wrong", error_hint=hint)
    return call("run_probe", code="print(len(sales))")  # turn 5: probes until no action is left for the decision


def test_bad_tier1_replies_are_recorded_and_the_state_is_confirmed(sandbox, task):
    backend = StubBackend(bad_replies)
    policy = HierPolicy(backend)
    record, spy = play(sandbox, task, policy)
    assert len(record.states) == 5 and record.repairs == [] and correct(record)
    assert all(a["legal"] for a in actions(record))  # every rejected reply was replaced before the runtime saw it
    assert [r["turn_id"] for r in policy.rejected] == ["1", "2", "3", "4", "5"]
    reasons = [r["reason"] for r in policy.rejected]
    assert reasons[0].startswith("unparseable") and "not a tier-1 action" in reasons[1]
    assert "ConnectionError" in reasons[2] and reasons[3].startswith("REPAIR without evidence")
    assert reasons[4] == "run_probe would use the activation's last action, which the decision needs"
    assert (policy.stats.calls, policy.stats.failures, policy.stats.rejected) == (4 + 7, 1, 5)
    for turn_id, rejected in zip("12345", policy.rejected, strict=True):
        finalize = next(a for a in actions(record, turn_id) if a["parsed"]["name"] == "FINALIZE_RELATIONS")
        thought = parse_response(finalize["raw"]).thought
        assert thought.startswith("tier-1 reply rejected (") and "confirmed by the harness" in thought
        quoted = json.loads(thought.split("reply: ", 1)[1])  # the raw reply, verbatim
        assert quoted == rejected["raw"]
    turn_5 = [a["parsed"]["name"] for a in actions(record, "5")][-9:]
    assert turn_5 == ["check_execution", *["run_probe"] * 6, "FINALIZE_RELATIONS", "COMMIT_STATE"]
    assert [actor for actor, _ in spy.log].count(POLICY) == 6  # only turn 5's probes passed through


def probe_then_repair(turn_id, messages):
    if turn_id != "1" or "attempt 2 of" in messages[1]["content"]:  # other turns, and the repaired state: confirm
        return CONFIRM
    if len(messages) == 2:
        return call(
            "run_probe", code="print(float((sales['revenue'] - sales['quantity'] * sales['unit_price']).abs().max()))"
        )
    # tier 0's check and the probe ran cleanly: the digest under the probe's result says so (a wrong value is no error)
    assert messages[-1]["content"].splitlines()[-2] == (
        "[evidence this activation: every check and probe passed (1 check, 1 probe)]"
    )
    printed = json.loads(tool_response_body(messages[-1]["content"]))
    gap = printed["stdout"].strip()
    hint = {"error_variable": "sales", "faulty_reasoning": "revenue was not computed as quantity times unit price"}
    return call(
        "REPAIR", analytical_evidence=f"revenue minus quantity times unit_price reaches {gap}", error_hint=hint
    )


def test_a_tier1_repair_quoting_its_probe_reaches_the_worker(sandbox, task):
    code = task.load_answers()["1"].code.replace(
        "sales['quantity'] * sales['unit_price']", "sales['quantity'] + sales['unit_price']"
    )
    backend = StubBackend(probe_then_repair)
    policy = HierPolicy(backend)
    record, spy = play(sandbox, task, policy, "1", code)
    assert [(r["turn_id"], r["mode"], r["variable"], r["worker_reaction"]) for r in record.repairs] == [
        ("1", "light", "sales", "localized")
    ]
    assert backend.turns == ["1", "1", "1", "2", "3", "4", "5"]  # turn 1: probe, repair; the repaired state: confirm
    assert policy.rejected == [] and len(record.states) == 5 and correct(record)
    check = next(act for act in record.activations if any(a["parsed"]["name"] == "REPAIR" for a in act["actions"]))
    assert [a["parsed"]["name"] for a in check["actions"]] == ["check_execution", "run_probe", "REPAIR"]
    assert [a["actor"] for a in check["actions"]] == [HARNESS, POLICY, POLICY]  # the record says which tier
    assert [actor for actor, raw in spy.log if "run_probe" in raw or '"REPAIR"' in raw] == [POLICY, POLICY]
    second = backend.requests[1]  # tier 1's conversation: its own call and result only, not tier 0's check
    assert [m["role"] for m in second] == ["system", "user", "assistant", "user"]
    assert second[2]["content"] == check["actions"][1]["raw"] and "check_execution" not in second[2]["content"]


# ---------------------------------------------------------------- pieces


def test_the_evidence_rule():
    probe = json.dumps({"ok": True, "succeeded": True, "stdout": "2487.5\n", "error_type": None})
    failed = json.dumps({"ok": True, "verdict": "failed", "error_type": "KeyError", "error_message": "'Regio'"})
    assert quotes_tool_result("the gap reaches 2487.50", [probe])  # a number, compared as a number
    assert quotes_tool_result("the step raised KeyError: 'Regio'", [failed])  # 12+ normalized characters
    assert not quotes_tool_result("I suspect the revenue is wrong", [probe, failed])
    assert not quotes_tool_result("the verdict was failed", [failed])  # the tool's own field names are no quote
    assert not quotes_tool_result("step 1 and 2 are wrong", [json.dumps({"ok": True, "step_id": 1})])


def test_repair_evidence_must_quote_a_check_or_probe_result_not_the_worker():
    code = "sales['revenue'] = sales['quantity'] + sales['unit_price']"
    echoed = {
        "ok": True,
        "step_id": 3,
        "code": code,
        "stdout_tail": "revenue ready for all 240 rows\n",
        "results": [{"note": "totals recomputed by hand"}],
        "verdict": "verified",
        "error_type": None,
    }
    failed = {
        "ok": True,
        "step_id": 4,
        "code": "x = by_region['Regio']",
        "verdict": "failed",
        "error_type": "KeyError",
        "error_message": "'Regio'",
    }
    constraint = {"ok": True, "passed": False, "reason": "raised AssertionError: (no message)",
                  "values": {"total": "26592.76"}, "succeeded": False, "stdout": ""}  # fmt: skip
    previous = (
        (call("check_execution", step_id=3), json.dumps(echoed)),
        (call("check_execution", step_id=4), json.dumps(failed)),
        (call("run_probe", code="assert total == expected"), json.dumps(constraint)),
        (call("compile_python", code="totals recomputed by hand"), json.dumps({"ok": True, "valid": True})),
        (call("run_probe", code="print(revenue ready for all)"), "illegal: run_probe is not legal now"),
    )
    inp = PolicyInput(observation="", legal_actions=("REPAIR", "FINALIZE_RELATIONS"), previous=previous)
    policy = HierPolicy(None)
    hint = {"error_variable": "sales", "faulty_reasoning": "revenue adds quantity and unit price"}

    def vet(evidence):
        return policy.vet(call("REPAIR", analytical_evidence=evidence, error_hint=hint), inp)

    for worker_text in (
        "it adds sales['quantity'] + sales['unit_price']",
        "the step printed: revenue ready for all 240 rows",
        "totals recomputed by hand",
    ):
        assert vet(worker_text).startswith("REPAIR without evidence"), worker_text  # echoed by check_execution
    assert vet("the total is 26592.76 where the constraint expects more") is None  # a failed check's value
    assert vet("the lookup raised KeyError: 'Regio'") is None  # a failed step's error
    assert vet("the total of 26592.760 is wrong") is None  # numbers compare as numbers


def test_the_tier1_prompt_is_short_and_lists_only_its_actions():
    names = [t["function"]["name"] for t in tier1_tool_schemas()]
    assert names == ["FINALIZE_RELATIONS", "REPAIR", *TIER1_TOOLS]
    assert len(HIER_SYSTEM) < 5_000  # about 2,300 characters of rules plus the check kinds, one line each
    with pytest.raises(ValueError, match="max_actions=4"):
        HierPolicy(None, max_actions=4)


SOLUTION = """\
# %% load
import pandas as pd
sales = pd.read_csv(f"{BASE_PATH}/data/sales.csv")
# %% revenue
sales['revenue'] = sales['quantity'] * sales['unit_price']
# %% count
n = int(len(sales))
# %% total
total = round(float(sales['revenue'].sum()), 2)
# %% answer
print_result(f"@n[{n}] @total[{total}]")
"""


@pytest.fixture(scope="module")
def single(tmp_path_factory):
    """A closed_form task on the built-in task's table, solved in five cells (played with the segment flow)."""
    root = tmp_path_factory.mktemp("task") / "retail-single"
    shutil.copytree(RETAIL / "public", root / "public")
    (root / "private").mkdir()
    (root / "config.yaml").write_text(
        "id: test-retail-single\nname: retail total\nkind: closed_form\nanswer_format: '@n[count] @total[value]'\n"
    )
    (root / "description.md").write_text("Load data/sales.csv. How many orders are there, and what is the revenue?\n")
    (root / "private" / "solution.py").write_text(SOLUTION)
    (root / "private" / "answers.json").write_text(json.dumps([["n", "240"], ["total", "51996.97"]]))
    return load_task(root)


def test_segment_flow_follows_the_rule_policy_and_asks_tier1_once_per_state(sandbox, single):
    def run(policy):
        with sandbox.new_kernel(single.public_dir) as kernel:
            return ManagerRuntime(single, kernel, ScriptedWorker.for_task(single, kernel), policy).run()

    rule = run(RulePolicy())
    backend = StubBackend(lambda turn_id, messages: CONFIRM)
    hier = run(HierPolicy(backend))
    assert hier.config["flow"] == "segment" and len(hier.states) == 2 and hier.grade["score"] == 1.0
    assert [{k: s[k] for k in STATE_KEYS} for s in hier.states] == [{k: s[k] for k in STATE_KEYS} for s in rule.states]
    assert len(backend.turns) == len(hier.states)
    assert "segment_pause" in backend.requests[0][1]["content"] and "task_end" in backend.requests[1][1]["content"]


# ---------------------------------------------------------------- the public steps an outside driver uses


def test_the_public_steps_compose_to_respond(sandbox, task):
    """tier1_messages / tier0_respond / vet / fallback, driven by hand with a scripted tier 1, play the episode that
    respond plays with the same replies through a backend (what envs.ManagerEnv's hier format does)."""
    code = task.load_answers()["1"].code.replace(
        "sales['quantity'] * sales['unit_price']", "sales['quantity'] + sales['unit_price']"
    )
    composed, _ = play(sandbox, task, HierPolicy(StubBackend(probe_then_repair)), "1", code)

    from harness.manager.episode_loop import Reply

    policy = HierPolicy(None)
    programs = {t: ref.code for t, ref in task.load_answers().items()}
    asked = []
    with sandbox.new_kernel(task.public_dir) as kernel:
        worker = ScriptedWorker(kernel, programs, {"1": Fault(task.id, "1", "test", code)})
        episode = ManagerRuntime(task, kernel, worker, ActorSpy(policy)).start()
        while (inp := episode.next_request()) is not None:
            messages = policy.tier1_messages(inp)
            if messages is None:
                episode.answer(Reply(policy.tier0_respond(inp), HARNESS))
                continue
            turn_id = re.search(r'"turn_id": "(\w+)"', messages[1]["content"]).group(1)
            asked.append(turn_id)
            text = probe_then_repair(turn_id, messages)
            assert policy.vet(text, inp) is None
            episode.answer(Reply(text, POLICY))
        record = episode.record
    assert asked == ["1", "1", "1", "2", "3", "4", "5"]
    assert [[(a["raw"], a.get("actor")) for a in act["actions"]] for act in record.activations] == [
        [(a["raw"], a.get("actor")) for a in act["actions"]] for act in composed.activations
    ]
    assert record.final_answers == composed.final_answers and policy.rejected == []


def test_vet_and_fallback_at_the_first_tier1_request(sandbox, task):
    policy = HierPolicy(None)
    programs = {t: ref.code for t, ref in task.load_answers().items()}
    with sandbox.new_kernel(task.public_dir) as kernel:
        episode = ManagerRuntime(task, kernel, ScriptedWorker(kernel, programs, {}), policy).start()
        while policy.tier1_messages(inp := episode.next_request()) is None:
            episode.answer(policy.tier0_respond(inp))
        episode.close()
    assert [m["role"] for m in policy.tier1_messages(inp)] == ["system", "user"] and inp.turn.turn_id == "1"
    assert policy.tier0_respond(inp) == CONFIRM and policy.last_actor == HARNESS  # tier 0 alone confirms
    assert policy.vet(CONFIRM, inp) is None
    assert policy.vet("garbage", inp).startswith("unparseable")
    assert "not a tier-1 action" in policy.vet(call("COMMIT_STATE"), inp)
    hint = {"error_variable": "sales", "faulty_reasoning": "the totals look too high"}
    assert policy.vet(call("REPAIR", analytical_evidence="I doubt it", error_hint=hint), inp).startswith(
        "REPAIR without evidence"
    )
    text = policy.fallback(inp, "a <bad> reply", "raw <reply>")
    assert parse_response(text).action.name == "FINALIZE_RELATIONS" and policy.last_actor == HARNESS
    assert "(bad)" in parse_response(text).thought and policy.stats.rejected == 1
    assert policy.rejected == [
        {"turn_id": "1", "event_type": "turn_end", "state_id": "S1", "reason": "a <bad> reply", "raw": "raw <reply>"}
    ]
