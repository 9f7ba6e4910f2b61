"""``stateguard bench run`` (results in the evaluate format, resumable, token/time accounting) and the four agents on
DABench dev tasks run concurrently through one scheduler and sandbox (fake model: control flow only)."""

from __future__ import annotations

import argparse
import asyncio
import json
import re

import pytest

from harness.evaluation.suite import SuiteUnavailableError, resolve_suite
from harness.manager.episode import read_episodes
from harness.sandbox import Sandbox, SandboxConfig
from harness.tasks import load_task
from harness.workflow import FakeChatBackend, Scheduler, SchedulerConfig, arun_agent
from harness.workflow.bench import EXIT_INPUT, EXIT_OK, register
from tests.harness.workflow.conftest import (
    ISOLATION,
    fence,
    write_artifact_task,
    write_closed_form_task,
)

# one static program for both small tasks: the artifact task has test.csv, the closed-form task data.csv
PROGRAM = """import json, os
import pandas as pd
data, work = os.environ['DATA_DIR'], os.environ['WORK_DIR']
if os.path.exists(os.path.join(data, 'test.csv')):
    df = pd.read_csv(os.path.join(data, 'test.csv'))
    df['label'] = (df.x > 0.5).astype(int)
    df[['id', 'label']].to_csv(os.path.join(work, 'submission.csv'), index=False)
else:
    df = pd.read_csv(os.path.join(data, 'data.csv'))
    json.dump({'total': int(df.x.sum()), 'rows': len(df)}, open(os.path.join(work, 'answer.json'), 'w'))"""
WORKFLOWS = ("react", "direct", "pipeline", "search")


def bench(*argv: str) -> int:
    parser = argparse.ArgumentParser()
    register(parser.add_subparsers())
    args = parser.parse_args(["bench", "run", *argv])
    return args.func(args)


@pytest.fixture(scope="module")
def suite_dir(tmp_path_factory):
    root = tmp_path_factory.mktemp("suite")
    write_closed_form_task(root)
    write_artifact_task(root)
    return root


@pytest.fixture(scope="module")
def fake_model_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("model") / "fake.json"
    rules = [
        ["^Step: analyze", '{"findings": ["one table"]}'],
        ["^Step: plan", '{"steps": ["compute", "write"]}'],
        ["^Step: review", '{"score": 0.9, "issues": []}'],
        ["^Step: summarize", "done"],
        ["^Execution", "Final Answer: done"],
    ]
    path.write_text(json.dumps({"rules": rules, "default": fence(PROGRAM)}))
    return path


@pytest.fixture(scope="module")
def bench_out(suite_dir, fake_model_file, tmp_path_factory):
    out = tmp_path_factory.mktemp("bench")
    argv = ["--suite", str(suite_dir), "--workflow", ",".join(WORKFLOWS), "--model", f"fake:{fake_model_file}",
            "--out", str(out), "--isolation", ISOLATION, "--concurrency", "3"]  # fmt: skip
    assert bench(*argv) == EXIT_OK
    return out, argv


def test_bench_writes_results_in_the_evaluate_format(bench_out):
    out, _ = bench_out
    results = json.loads((out / "results.json").read_text())
    assert set(results) >= {"suite", "config", "versions", "simulated", "variants", "comparisons", "bench"}
    assert list(results["variants"]) == [f"{w}+none" for w in WORKFLOWS]
    for name, variant in results["variants"].items():
        assert (variant["n_episodes"], variant["task_accuracy"], variant["simulated"]) == (2, 1.0, True), name
    assert len(results["comparisons"]) == 6  # every pair of variants, paired on the same tasks
    costs = results["bench"]["variants"]["direct+none"]
    assert set(costs["episodes"]) == {"tiny-sum/clean", "tiny-art/clean"}
    assert costs["totals"]["llm_calls"] == 2 and costs["totals"]["executions"] == 2
    episode = costs["episodes"]["tiny-art/clean"]
    assert episode["score"] == 1.0 and episode["valid"] is True and episode["prompt_tokens"] > 0
    assert results["bench"]["failed"] == []
    report = (out / "report.md").read_text()
    assert "Worker `workflow:react,direct,pipeline,search`" in report and "| search+none | True | 2 |" in report


def test_bench_records_and_resumes(bench_out, capsys):
    out, argv = bench_out
    records = list(read_episodes(out / "episodes" / "pipeline_none.jsonl"))
    assert sorted(r.config["eval"]["key"] for r in records) == ["tiny-art/clean", "tiny-sum/clean"]
    assert all(r.config["workflow"]["name"] == "pipeline" and r.config["eval"]["variant"] == "pipeline+none"
               for r in records)  # fmt: skip
    capsys.readouterr()
    assert bench(*argv) == EXIT_OK  # nothing left to run: the same results, no episode appended
    assert len(list(read_episodes(out / "episodes" / "pipeline_none.jsonl"))) == 2
    summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert summary["variants"]["search+none"]["n_episodes"] == 2 and summary["failed"] == 0


def test_bench_input_errors(suite_dir, tmp_path, capsys):
    assert bench("--suite", str(suite_dir), "--workflow", "reflexion", "--model", "fake:x", "--out", str(tmp_path)) \
        == EXIT_INPUT  # fmt: skip
    assert "use names from react, direct, pipeline, search" in capsys.readouterr().err
    assert bench("--suite", str(suite_dir), "--model", "ftp://x", "--out", str(tmp_path), "--isolation", ISOLATION) \
        == EXIT_INPUT  # fmt: skip
    assert "model 'ftp://x' is not understood" in capsys.readouterr().err
    assert bench("--suite", str(suite_dir), "--manager", "oracle", "--out", str(tmp_path)) == EXIT_INPUT
    assert "--manager oracle: unknown variant" in capsys.readouterr().err


def dabench_model() -> FakeChatBackend:
    """Writes 0 for every @name[...] of the answer format in the prompt (valid, almost surely wrong)."""

    def program(messages):
        names = list(dict.fromkeys(re.findall(r"@(\w+)\[", messages[-1]["content"]))) or ["answer"]
        answer = json.dumps(dict.fromkeys(names, 0))
        return fence(f"import json, os\nanswer = {answer}\n"
                     "json.dump(answer, open(os.path.join(os.environ['WORK_DIR'], 'answer.json'), 'w'))\n"
                     "print_result(answer)")  # fmt: skip

    rules = [
        ("^Step: analyze", '{"findings": ["a table"]}'),
        ("^Step: plan", '{"steps": ["compute"]}'),
        ("^Step: review", '{"score": 1.0}'),
        ("^Execution", "Final Answer: done"),
    ]
    return FakeChatBackend(rules, default=program)


def test_four_agents_on_dabench_tasks_concurrently(tmp_path):
    try:
        suite = resolve_suite("dabench-dev", cache=tmp_path / "suites", limit=2)
    except SuiteUnavailableError as exc:
        pytest.skip(f"DABench dev is not available: {exc}")
    tasks = [load_task(d) for d in suite.task_dirs]
    limits = SchedulerConfig(max_tasks=4, max_llm_calls=2, max_sandbox_processes=2)

    async def main():
        with Scheduler(limits) as scheduler, Sandbox(SandboxConfig(isolation=ISOLATION)) as sandbox:
            runs = [(w, t) for w in WORKFLOWS for t in tasks]
            factories = [
                lambda w=w, t=t: arun_agent(
                    t, w, dabench_model(), scheduler=scheduler, sandbox=sandbox, workdir=tmp_path / w / t.id
                )  # fmt: skip
                for w, t in runs
            ]
            return scheduler, runs, await scheduler.run_tasks(factories)

    scheduler, runs, results = asyncio.run(main())
    assert scheduler.peak["task"] == 4  # admitted at once; the call limits hold (their peaks depend on timing)
    assert scheduler.peak["llm"] <= 2 and scheduler.peak["sandbox"] <= 2
    for (workflow, task), result in zip(runs, results, strict=True):
        assert result.workflow == workflow and result.task_id == task.id
        assert result.grade["valid"] is True and result.grade["score"] in (0.0, 1.0)
        names = set(re.findall(r"@(\w+)\[", task.answer_format))
        assert names <= set(result.answers["main"])  # the validated submission became the answer
        assert result.cost["llm_calls"] >= 1 and result.cost["executions"] >= 1
        assert len(result.record.worker_steps) == result.cost["executions"]
    assert {r.artifacts["main"]["outcome"] for r in results if r.workflow == "direct"} == {"success"}
