"""Shared fixtures: the built-in retail task, a fake model that answers it with the reference programs, isolation."""

from __future__ import annotations

import asyncio
import json
import re
import shutil
from pathlib import Path

import pytest

from harness.sandbox import ExecutionResult
from harness.tasks import load_task
from harness.workflow import Context, Environment, FakeChatBackend, Scheduler, WorkflowConfig

ROOT = Path(__file__).resolve().parents[3]
RETAIL = ROOT / "harness" / "builtin_tasks" / "retail-sales"
ISOLATION = "bwrap" if shutil.which("bwrap") else "none"


def fence(code: str) -> str:
    return f"Here is the program.\n```python\n{code}\n```"


def current_turn(prompt: str, questions: dict[str, str]) -> str:
    """The turn whose question occurs last in the prompt (the contract lists earlier turns first), before any
    supervisor hint (a state hint quotes earlier turns' questions)."""
    prompt = re.split(r"Supervisor notes|<analytical_state_hint>", prompt)[0]
    found = {turn: prompt.rfind(q) for turn, q in questions.items() if q in prompt}
    if not found:
        raise LookupError(f"no turn question in {prompt[:200]!r}")
    return max(found, key=found.get)


def retail_model(task, *, break_first_program: bool = False) -> FakeChatBackend:
    """Canned replies for the retail task: each program is the reference code (of the turn, or of turns 1..t for a
    fresh process); ``break_first_program`` makes the first program of every question fail, so debugging runs."""
    reference = json.loads((task.private_dir / "reference.json").read_text())
    questions = {t.turn_id: t.question for t in task.turns}
    order = [t.turn_id for t in task.turns]
    broken: set[str] = set()

    def chain(turn: str) -> str:
        return "\n".join(reference[t]["code"] for t in order[: order.index(turn) + 1])

    def program(fresh: bool):
        def reply(messages) -> str:
            turn = current_turn(messages[-1]["content"], questions)
            if break_first_program and turn not in broken:
                broken.add(turn)
                return fence("raise RuntimeError('first attempt fails')")
            return fence(chain(turn) if fresh else reference[turn]["code"])

        return reply

    def debug(messages) -> str:
        return fence(chain(current_turn(messages[-1]["content"], questions)))

    def react(messages) -> str:
        last = messages[-1]["content"]
        if last.startswith("Execution") or "\n\nExecution" in last:
            return "Done.\nFinal Answer: see result"
        return fence(reference[current_turn(last, questions)]["code"])

    rules = [
        (r"^Step: analyze", '{"findings": ["sales.csv holds one row per order"], "answer_form": "a JSON object"}'),
        (r"^Step: plan", '```json\n{"steps": ["load the data", "compute the answer"]}\n```'),
        (r"^Step: generate", program(fresh=False)),
        (r"^Step: (direct|draft)", program(fresh=True)),
        (r"^Step: (debug|improve)", debug),
        (r"^Step: review", '{"score": 0.9, "issues": []}'),
        (r"^Step: summarize", "Computed the requested figures; `result` holds them."),
    ]
    return FakeChatBackend(rules, default=react)


@pytest.fixture(scope="module")
def sandbox():
    """One sandbox (zygote) for every episode of a test module; each episode gets its own kernels."""
    from harness.sandbox import Sandbox, SandboxConfig

    with Sandbox(SandboxConfig(isolation=ISOLATION)) as box:
        yield box


@pytest.fixture(scope="session")
def retail():
    return load_task(RETAIL)


def write_closed_form_task(root: Path) -> Path:
    """A DABench-style closed_form task: the sum and row count of a three-row table (answers 6 and 3)."""
    task = root / "tiny-sum"
    (task / "public").mkdir(parents=True)
    (task / "private").mkdir()
    (task / "public" / "data.csv").write_text("x\n1\n2\n3\n")
    (task / "private" / "answers.json").write_text(json.dumps([["total", "6"], ["rows", "3"]]))
    (task / "description.md").write_text("What are the sum of column x of data.csv and its number of rows?\n")
    (task / "config.yaml").write_text(
        "id: tiny-sum\nkind: closed_form\nanswer_format: '@total[value] @rows[value]'\n"
        "constraints:\n- text: the total is the sum of x\n  code: assert total == 6\n"
    )
    return task


def write_artifact_task(root: Path) -> Path:
    """An MLE-bench-style artifact task: predict ``label`` for ids 1..3 (accuracy against private answers)."""
    task = root / "tiny-art"
    (task / "public").mkdir(parents=True)
    (task / "private").mkdir()
    (task / "public" / "test.csv").write_text("id,x\n1,0.1\n2,0.9\n3,0.8\n")
    (task / "public" / "sample_submission.csv").write_text("id,label\n1,0\n2,0\n3,0\n")
    (task / "private" / "answers.csv").write_text("id,label\n1,0\n2,1\n3,1\n")
    (task / "description.md").write_text("Predict label (1 when x > 0.5) for every id of test.csv.\n")
    (task / "config.yaml").write_text(
        "id: tiny-art\nkind: artifact\nsubmission:\n  filename: submission.csv\n  sample: sample_submission.csv\n"
        "  answers: answers.csv\n  id_column: id\n  metric: accuracy\n"
    )
    return task


SUM_PROGRAM = (
    "import json, os\nimport pandas as pd\n"
    "df = pd.read_csv(os.path.join(os.environ['DATA_DIR'], 'data.csv'))\n"
    "total = int(df.x.sum())\n"
    "json.dump({'total': total, 'rows': len(df)}, open(os.path.join(os.environ['WORK_DIR'], 'answer.json'), 'w'))"
)
ARTIFACT_PROGRAM = (
    "import os\nimport pandas as pd\n"
    "df = pd.read_csv(os.path.join(os.environ['DATA_DIR'], 'test.csv'))\n"
    "df['label'] = (df.x > 0.5).astype(int)\n"
    "df[['id', 'label']].to_csv(os.path.join(os.environ['WORK_DIR'], 'submission.csv'), index=False)"
)


@pytest.fixture(scope="session")
def small_tasks(tmp_path_factory):
    root = tmp_path_factory.mktemp("tasks")
    return {"closed_form": load_task(write_closed_form_task(root)), "artifact": load_task(write_artifact_task(root))}


class FakeKernel:
    """Executes nothing; returns ``ok`` results (``print_result`` value ``reported``) and remembers the code."""

    def __init__(self, workspace, reported=None):
        self.workspace, self.reported, self.codes = workspace, reported, []

    def execute(self, code, timeout=None):
        self.codes.append(code)
        return ExecutionResult(ok=True, stdout="done\n", results=[] if self.reported is None else [self.reported])


def make_ctx(task, tmp_path, backend, **config):
    scheduler = Scheduler()
    return Context(
        task=task, turn_id="main", question="q", contract="CONTRACT", config=WorkflowConfig(**config),
        backend=backend, env=Environment(FakeKernel(tmp_path)), scheduler=scheduler,
    )  # fmt: skip


def run(coro):
    return asyncio.run(coro)
