"""The four reference agents end to end in the sandbox with a deterministic fake model (control flow only): the
multi-turn retail task, closed-form and artifact tasks, direct outcomes, bounded debugging, the search tree, manager
supervision (turn flow, segment flow, repair) and accounting."""

from __future__ import annotations

import json

import pytest

from harness.workflow import DIRECT_OUTCOMES, FakeChatBackend, WorkflowConfig, run_agent
from tests.harness.workflow.conftest import (
    ARTIFACT_PROGRAM,
    SUM_PROGRAM,
    fence,
    retail_model,
)

EXPECTED_COST = {  # (LLM calls, sandbox executions) on the five retail turns
    "direct": (5, 5),  # one program per turn
    "pipeline": (20, 5),  # analyze, plan, generate, summarize per turn
    "search": (30, 15),  # three drafts, each reviewed (score 0.9 >= min_score: no improvement)
    "react": (10, 5),  # a cell, then a final answer per turn
}


@pytest.fixture(scope="module")
def retail_runs(retail, sandbox):
    return {wf: run_agent(retail, wf, retail_model(retail), sandbox=sandbox) for wf in EXPECTED_COST}


@pytest.mark.parametrize("workflow", list(EXPECTED_COST))
def test_every_agent_solves_the_multi_turn_task(retail_runs, retail, workflow):
    result = retail_runs[workflow]
    reference = json.loads((retail.private_dir / "reference.json").read_text())
    assert result.grade["valid"] is True and result.grade["score"] == 1.0
    assert result.answers == {turn: reference[turn]["answer"] for turn in reference}
    assert (result.cost["llm_calls"], result.cost["executions"]) == EXPECTED_COST[workflow]
    assert result.simulated and result.record.simulated
    assert len(result.record.worker_steps) == result.cost["executions"] == result.cost["steps"]
    assert result.record.config["workflow"]["name"] == workflow
    assert result.record.config["workflow"]["cost"] == result.cost
    assert result.cost["prompt_tokens"] > 0 and result.cost["completion_tokens"] > 0


def test_step_tokens_add_up_to_the_cost(retail_runs):
    result = retail_runs["direct"]  # every LLM call precedes an execution: all tokens land in steps
    steps = result.record.worker_steps
    assert sum(s["prompt_tokens"] for s in steps) == result.cost["prompt_tokens"]
    assert sum(s["completion_tokens"] for s in steps) == result.cost["completion_tokens"]
    assert all(s["meta"]["fresh_process"] for s in steps)
    assert result.artifacts["1"]["outcome"] == "success"


def test_search_records_its_tree(retail_runs):
    tree = retail_runs["search"].artifacts["5"]["search"]
    assert [(n["kind"], n["valid"], n["score"]) for n in tree] == [("draft", True, 0.9)] * 3
    assert retail_runs["search"].artifacts["5"]["best_node"] == 0


@pytest.mark.parametrize(
    ("reply", "outcome", "score"),
    [
        (fence(SUM_PROGRAM), "success", 1.0),
        ("I would sum the column.", "no_code", 0.0),
        (fence("raise ValueError('boom')"), "process_failure", 0.0),
        (fence("print('forgot to write it')"), "missing_submission", 0.0),
        (fence("import json, os\njson.dump({'total': 6}, open(os.environ['WORK_DIR'] + '/answer.json', 'w'))"),
         "invalid_submission", 0.0),
    ],
)  # fmt: skip
def test_direct_outcomes(small_tasks, reply, outcome, score, sandbox):
    result = run_agent(small_tasks["closed_form"], "direct", FakeChatBackend(default=reply), sandbox=sandbox)
    assert outcome in DIRECT_OUTCOMES
    assert result.artifacts["main"]["outcome"] == outcome
    assert result.grade["valid"] is True and result.grade["score"] == score  # closed-form: wrong, never invalid
    assert result.cost["executions"] == (0 if outcome == "no_code" else 1)


def test_direct_writes_an_artifact_that_is_validated_and_graded(small_tasks, sandbox):
    result = run_agent(small_tasks["artifact"], "direct", FakeChatBackend(default=fence(ARTIFACT_PROGRAM)),
                       sandbox=sandbox)  # fmt: skip
    assert result.artifacts["main"]["outcome"] == "success"
    assert result.grade["valid"] is True and result.grade["score"] == 1.0
    assert "submission.csv" in result.files
    assert open(result.files["submission.csv"]).read().split() == ["id,label", "1,0", "2,1", "3,1"]


def test_pipeline_debug_retries_are_bounded(small_tasks, sandbox):
    model = FakeChatBackend(
        [(r"^Step: analyze", '{"findings": []}'), (r"^Step: plan", '{"steps": ["sum"]}')],
        default=fence("raise KeyError('x')"),
    )
    config = WorkflowConfig(max_iterations=2)
    result = run_agent(small_tasks["closed_form"], "pipeline", model, config=config, sandbox=sandbox)
    assert result.cost["executions"] == 3  # the first attempt and two debug retries
    assert result.artifacts["main"]["debug_retries"] == 2
    assert result.answers == {} and result.grade["score"] == 0.0
    debug_prompts = [c[-1]["content"] for c in model.calls if c[-1]["content"].startswith("Step: debug")]
    assert len(debug_prompts) == 2 and "KeyError: 'x'" in debug_prompts[0]


def test_pipeline_debugs_a_failed_program_on_every_turn(retail, sandbox):
    result = run_agent(retail, "pipeline", retail_model(retail, break_first_program=True), sandbox=sandbox)
    assert [result.artifacts[t]["debug_retries"] for t in "12345"] == [1] * 5
    assert result.grade["score"] == 1.0 and result.cost["executions"] == 10


def test_search_debugs_improves_and_submits_the_best_artifact(small_tasks, sandbox):
    zeros = ARTIFACT_PROGRAM.replace("(df.x > 0.5).astype(int)", "0")
    drafts = iter([fence(ARTIFACT_PROGRAM), fence("raise RuntimeError('draft 2 fails')"), fence(zeros)])
    model = FakeChatBackend(
        [
            (r"^Step: draft", lambda m: next(drafts)),
            (r"^Step: debug", fence(zeros)),
            (r"^Step: improve", fence(zeros)),
            (r"^Step: review", lambda m: '{"score": %s}' % (0.6 if "astype(int)" in m[-1]["content"] else 0.2)),
        ]
    )
    config = WorkflowConfig(n_drafts=3, max_nodes=6)
    result = run_agent(small_tasks["artifact"], "search", model, config=config, sandbox=sandbox)
    tree = result.artifacts["main"]["search"]
    assert [(n["kind"], n["parent"], n["valid"], n["score"]) for n in tree] == [
        ("draft", None, True, 0.6),
        ("draft", None, False, 0.0),
        ("draft", None, True, 0.2),
        ("debug", 1, True, 0.2),
        ("improve", 0, True, 0.2),  # the best (0.6 < min_score 0.8) is improved once; the improvement is worse
    ]
    assert result.artifacts["main"]["best_node"] == 0
    # the last program wrote all zeros; the best draft's submission was restored before grading
    assert result.grade["score"] == 1.0 and result.cost["executions"] == 5


def test_manager_reviews_every_turn_of_any_workflow(retail, sandbox):
    result = run_agent(retail, "pipeline", retail_model(retail), manager="rule", sandbox=sandbox)
    assert result.manager == "rule" and result.grade["score"] == 1.0
    assert [s["issue"] is not None for s in result.record.states] == [True] * 5
    assert {a["event_type"] for a in result.record.activations} == {"turn_start", "turn_end"}


def test_segment_flow_pauses_after_sandbox_executions_and_repairs_through_revise(small_tasks, sandbox):
    wrong = SUM_PROGRAM.replace("int(df.x.sum())", "int(df.x.sum()) - 1")

    def generate(messages):  # the first program is wrong; once a supervisor's hint is in the prompt, it is right
        return fence(SUM_PROGRAM if "Supervisor notes" in messages[-1]["content"] else wrong)

    model = FakeChatBackend(
        [
            (r"^Step: analyze", '{"findings": []}'),
            (r"^Step: plan", '{"steps": ["sum"]}'),
            (r"^Step: generate", generate),
        ]
    )
    runtime = {"segment_steps": 1, "executable_constraints": True}  # rule probes the task's constraint code
    result = run_agent(small_tasks["closed_form"], "pipeline", model, manager="rule", runtime=runtime, sandbox=sandbox)
    record = result.record
    assert len(record.repairs) == 1 and record.repairs[0]["variable"] == "total"
    steps = record.worker_steps
    assert [s["meta"].get("repair") for s in steps] == [None, "re-analysis"]
    assert "total" in [h["text"] for h in record.hints if h["kind"] == "repair"][0]
    assert result.answers == {"main": {"total": 6, "rows": 3}} and result.grade["score"] == 1.0
    assert {a["event_type"] for a in record.activations} >= {"task_end"}


def test_react_is_supervised_and_repaired_through_the_reused_react_worker(small_tasks, sandbox):
    code = "import pandas as pd\ndf = pd.read_csv(DATA_DIR + '/data.csv')\ntotal = int(df.x.sum()){}\n" \
           "print_result({{'total': total, 'rows': len(df)}})"  # fmt: skip

    def reply(messages):
        last = messages[-1]["content"]
        if "Re-check your work" in last:
            return "Fix the total.\n" + fence(code.format(""))
        if last.startswith("Execution"):
            return "Final Answer: done"
        return "Sum it.\n" + fence(code.format(" - 1"))

    model = FakeChatBackend(default=reply)
    runtime = {"segment_steps": 1, "executable_constraints": True}  # rule probes the task's constraint code
    result = run_agent(small_tasks["closed_form"], "react", model, manager="rule", runtime=runtime, sandbox=sandbox)
    record = result.record
    assert [(s["thought"], s["meta"].get("repair")) for s in record.worker_steps] == [
        ("Sum it.\nHere is the program.", None),
        ("Fix the total.\nHere is the program.", "re-analysis"),
    ]
    assert len(record.repairs) == 1 and record.repairs[0]["variable"] == "total"
    assert result.answers == {"main": {"total": 6, "rows": 3}} and result.grade["score"] == 1.0
    assert result.cost["llm_calls"] == 4 and result.cost["executions"] == 2


def test_custom_workflow_in_a_few_lines(small_tasks, sandbox):
    from harness.workflow import GenerateCode, Submit, Workflow

    class OneShot(Workflow):  # the README example
        name = "one-shot"

        async def solve(self, ctx):
            code = (await GenerateCode("direct")(ctx, plan=None))["code"]
            result, validation = await self.attempt(ctx, code, fresh=True)  # run it, check the submission
            await Submit()(ctx, validation=validation)

    model = FakeChatBackend(default=fence(SUM_PROGRAM))
    result = run_agent(small_tasks["closed_form"], OneShot, model, manager="rule", sandbox=sandbox)
    assert result.workflow == "one-shot" and result.grade["score"] == 1.0
    assert result.answers == {"main": {"total": 6, "rows": 3}}
    assert model.calls[0][-1]["content"].startswith("Step: direct")


def test_a_workflow_bug_surfaces_instead_of_a_silent_episode(small_tasks, sandbox):
    from harness.workflow import Workflow

    class Broken(Workflow):
        async def solve(self, ctx):
            await ctx.execute("x = 1")
            raise KeyError("bug in the workflow")

    with pytest.raises(KeyError, match="bug in the workflow"):
        run_agent(small_tasks["closed_form"], Broken, FakeChatBackend(default="x"), sandbox=sandbox)
