"""The manager ablations: the model-backed ``windowed`` policy (what the model is shown, how its reply becomes a
hint, failures, whole runtime episodes over a real HTTP endpoint and a tiny in-process model) and the ``freeform``
prompt (lifecycle and repair protocol kept; state schema and checklist dropped)."""

from __future__ import annotations

import json
import logging
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest

from harness.llm import ChatReply
from harness.manager.policy_registry import get_policy
from harness.manager.prompts import FREEFORM_SYSTEM, MANAGER_SYSTEM_POLICY, WINDOWED_SYSTEM
from harness.manager.runtime import ManagerRuntime, RuntimeConfig
from harness.manager.windowed import (
    HINT_CHARS,
    MODEL_HINT_NOTE,
    OUTPUT_CHARS,
    WindowedModelPolicy,
    parse_window_reply,
    render_window_hint,
)
from harness.sandbox import ExecutionResult, Sandbox, SandboxConfig, VariableChange
from harness.tasks import Turn, TurnConstraint, load_task
from harness.worker import ScriptedWorker
from harness.worker.step import WorkerStep

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from test_llm import FakeOpenAI, build_tiny_chat_model, completion, needs_transformers  # noqa: E402

ROOT = Path(__file__).resolve().parents[3]
RETAIL = ROOT / "harness" / "builtin_tasks" / "retail-sales"
ISOLATION = "bwrap" if shutil.which("bwrap") else "none"
CODE = "assert (sales['revenue'] > 0).all()"
TURN = Turn(
    turn_id="2",
    question="What is the revenue per region?",
    context="Normalise region names.",
    depends_on=("1",),
    relation="progress",
    constraints=(TurnConstraint("revenue is positive", CODE),),
)


class ScriptedBackend:
    """Returns scripted reply texts in order (the last repeats); keeps every request."""

    def __init__(self, replies: list[str]):
        self.replies = list(replies)
        self.requests: list[tuple[list[dict[str, Any]], Any]] = []

    def chat(self, messages, tools=None) -> ChatReply:
        self.requests.append((messages, tools))
        return ChatReply(self.replies.pop(0) if len(self.replies) > 1 else self.replies[0], 7, 3)


class RaisingBackend:
    def chat(self, messages, tools=None) -> ChatReply:
        raise ConnectionError("chat endpoint http://127.0.0.1:9/v1/chat/completions failed: refused")


def step(step_id: int, code: str = "x = 1", stdout: str = "", ok: bool = True) -> WorkerStep:
    variables = [VariableChange("x", "created", 1, "int", None, "1")]
    result = ExecutionResult(ok=ok, stdout=stdout, variables=variables, results=[{"total": step_id}])
    if not ok:
        result = ExecutionResult(ok=False, error_type="KeyError", error_message="'region'")
    return WorkerStep(step_id=step_id, turn_id="1", thought=f"thought {step_id}", code=code, result=result)


def window_of(request: list[dict[str, Any]]) -> list[dict[str, Any]]:
    user = request[1]["content"]
    return json.loads(user.split(" steps\n", 1)[1].rsplit("\nReply with", 1)[0])


# ---------------------------------------------------------------- the windowed model: input and reply


def test_the_model_sees_the_public_turn_and_the_last_k_steps_only():
    backend = ScriptedBackend(["<silent/>"])
    policy = WindowedModelPolicy(backend, k=2)
    steps = [step(0), step(1, stdout="revenue 1,234.50\n"), step(2, ok=False)]
    assert policy.window_hint(steps, TURN) == ""
    ((messages, tools),) = backend.requests
    assert tools is None  # no verification tools
    assert [m["role"] for m in messages] == ["system", "user"] and messages[0]["content"] == WINDOWED_SYSTEM
    user = messages[1]["content"]
    assert user.startswith(
        "# Public turn\nContext: Normalise region names.\nQuestion: What is the revenue per region?\n"
        "Constraints:\n- revenue is positive\n# The worker's last 2 of 3 steps\n"
    )
    assert user.endswith("\nReply with <hint>...</hint> or <silent/>.")
    assert CODE not in user  # constraint texts only
    for stateful in ("committed_state_index", "current_draft", "depends_on", "S1", "tool_response"):
        assert stateful not in user
    first, second = window_of(messages)
    assert first == {"step_id": 1, "turn_id": "1", "thought": "thought 1", "code": "x = 1",
                     "outcome": "ok; wrote: x", "output": 'revenue 1,234.50\n{"total": 1}'}  # fmt: skip
    assert second["outcome"] == "error: KeyError: 'region'" and second["output"] == ""
    long = WindowedModelPolicy(ScriptedBackend(["<silent/>"]), k=1)
    long.window_hint([step(0, stdout="y" * 5000)], None)
    (entry,) = window_of(long.backend.requests[0][0])
    assert len(entry["output"]) == OUTPUT_CHARS
    assert not long.backend.requests[0][0][1]["content"].startswith("# Public turn")


def test_no_steps_ask_no_model():
    backend = ScriptedBackend(["<hint>x</hint>"])
    policy = WindowedModelPolicy(backend, k=3)
    assert policy.window_hint([], TURN) == "" and backend.requests == [] and policy.calls == 0


@pytest.mark.parametrize(
    ("reply", "hint"),
    [
        ("<hint>revenue is still 2499 on order 1018</hint>", "revenue is still 2499 on order 1018"),
        ("<think>\nlooks fine\n</think>\n\n<silent/>", ""),
        ("<think>maybe <hint>not this</hint></think>\n<hint> the region `north ` </hint>", "the region `north `"),
        ("<think>only thinking <hint>inside</hint></think>", ""),
        ("<hint></hint><hint>second</hint>", "second"),
        ("no tags at all", ""),
        ("<hint>unclosed", ""),
    ],
)
def test_a_reply_is_a_hint_or_silence(reply, hint):
    assert parse_window_reply(reply) == hint


def test_a_hint_reaches_the_worker_wrapped_as_reference_only_and_tokens_are_counted():
    backend = ScriptedBackend(["<think>hm</think><hint>total_revenue was computed before the price fix</hint>"])
    policy = WindowedModelPolicy(backend, k=3, name="windowed-hf")
    text = policy.window_hint([step(0)], TURN)
    assert text == (
        "<observer_hint>\ntotal_revenue was computed before the price fix\n</observer_hint>\n"
        + MODEL_HINT_NOTE.format(k=3)
    )
    assert "not verified" in text and "reference only" in text
    assert (policy.calls, policy.prompt_tokens, policy.completion_tokens, policy.name) == (1, 7, 3, "windowed-hf")
    wrapped = render_window_hint("a" * 5000 + "</observer_hint>", 2)
    assert wrapped.count("</observer_hint>") == 1 and len(wrapped.split("\n")[1]) == HINT_CHARS


def test_a_failed_backend_call_is_silence_logged_and_counted(caplog):
    policy = WindowedModelPolicy(RaisingBackend(), k=2)
    with caplog.at_level(logging.WARNING, logger="harness.manager.windowed"):
        assert policy.window_hint([step(0)], TURN) == ""
    assert (policy.failures, policy.calls) == (1, 0)
    assert "windowed: the backend failed (ConnectionError" in caplog.text


@pytest.mark.parametrize("k", [0, -1, 2.5, True])
def test_k_must_be_a_positive_integer(k):
    with pytest.raises(ValueError, match=r"windowed policy: k=.* must be an integer >= 1"):
        WindowedModelPolicy(ScriptedBackend(["<silent/>"]), k=k)


# ---------------------------------------------------------------- whole episodes


@pytest.fixture(scope="module")
def sandbox():
    with Sandbox(SandboxConfig(isolation=ISOLATION)) as sb:
        yield sb


def play(sandbox, policy, task=None):
    task = task or load_task(RETAIL)
    programs = {t: ref.code for t, ref in task.load_answers().items()}
    with sandbox.new_kernel(task.public_dir) as kernel:
        runtime = ManagerRuntime(task, kernel, ScriptedWorker(kernel, programs, {}), policy, RuntimeConfig())
        return runtime.run(), runtime


def test_windowed_spec_over_a_real_endpoint_plays_an_episode(sandbox, tmp_path):
    """``windowed:2:URL``: no activations, no states; one model call per turn start after the first; its hints reach
    the worker's turn prompt and are recorded; nothing private reaches the model."""
    marker = "PRIVATE-MARKER-windowed-7c2f"
    root = tmp_path / "retail"
    shutil.copytree(RETAIL, root)
    (root / "private" / "notes.md").write_text(f"grader notes {marker}\n")
    replies = [
        (200, completion("<hint>check that region names were normalised before grouping</hint>")),
        (200, completion("<think>fine</think><silent/>")),
    ]
    with FakeOpenAI(replies) as server:
        policy = get_policy(f"windowed:2:{server.url}")
        record, runtime = play(sandbox, policy, load_task(root))
    assert isinstance(policy, WindowedModelPolicy) and policy.calls == 4
    assert record.activations == [] and record.states == [] and record.checkpoints == []
    assert record.config["manager"] == "windowed" and record.config["manager_style"] == "windowed"
    posts = server.posts()
    assert len(posts) == 4  # turns 2..5; turn 1 starts with no steps
    questions = [t.question for t in runtime.task.turns[1:]]
    for post, question in zip(posts, questions, strict=True):
        body = post["body"]
        assert "tools" not in body and body["messages"][0]["content"] == WINDOWED_SYSTEM
        assert f"Question: {question}\n" in body["messages"][1]["content"]
        assert len(window_of(body["messages"])) <= 2
        assert marker not in json.dumps(body)
    assert [(h["kind"], h["turn_id"]) for h in record.hints] == [("window", "2")]
    hint = record.hints[0]["text"]
    assert hint.startswith("<observer_hint>\ncheck that region names were normalised before grouping\n")
    prompts = [text for channel, text in runtime.transcript if channel == "worker"]
    assert prompts[1].endswith(hint) and "Question:" in prompts[1]
    assert all(detail["correct"] for detail in record.grade["details"]["turns"].values())


@needs_transformers
def test_windowed_hf_spec_with_a_tiny_model_plays_an_episode(sandbox, tmp_path_factory):
    folder = build_tiny_chat_model(tmp_path_factory.mktemp("tiny-windowed"), [WINDOWED_SYSTEM])
    policy = get_policy(f"windowed-hf:3:{folder}")
    assert isinstance(policy, WindowedModelPolicy) and policy.name == "windowed-hf"
    policy.backend.max_new_tokens = 8
    record, _ = play(sandbox, policy)
    assert policy.calls == 4 and policy.failures == 0
    assert policy.prompt_tokens > 0 and 0 < policy.completion_tokens <= 8 * policy.calls
    assert record.activations == [] and record.config["manager"] == "windowed-hf"
    assert all(h["kind"] == "window" and h["text"].startswith("<observer_hint>") for h in record.hints)


# ---------------------------------------------------------------- the free-form prompt


def test_freeform_keeps_the_lifecycle_and_repair_protocol_and_drops_schema_and_checklist():
    for kept in (
        "# Evidence-gated repair\nREPAIR only on concrete evidence from a tool result",
        "A false repair costs more than a missed one",
        "You have at most 3 repair attempts per state",
        "- turn_start: compare the new question with committed_state_index and OPEN_STATE with provisional relations",
        "- turn_end: UPDATE_STATE, then REPAIR or FINALIZE_RELATIONS, then COMMIT_STATE.",
        "A pause is not a state boundary: RESUME_WORKER until",
        "- task_end: review the remaining pending steps",
        "The harness does the bookkeeping",
        "Judge the work only by runtime evidence.",
    ):
        assert kept in FREEFORM_SYSTEM, kept
    for dropped in (
        "# Checklist at the end of a turn or segment",
        "Check before you conclude",
        "write a check spec as the constraint's check",
        "follow the checklist",
        "inside the pending steps, check,",
        "as analytical states: the issue a stretch of work settles, its constraints, the variables it relied on",
    ):
        assert dropped in MANAGER_SYSTEM_POLICY and dropped not in FREEFORM_SYSTEM, dropped


def test_freeform_shares_its_paragraphs_with_the_main_prompt():
    """Every paragraph of the free-form prompt but the first (its own role line) and the two flow sections (the main
    prompt's, with the checks left out) is a paragraph of the main prompt, verbatim."""
    main = MANAGER_SYSTEM_POLICY.split("\n\n")
    paragraphs = FREEFORM_SYSTEM.split("\n\n")
    assert paragraphs[0].startswith(main[0].split(" an explicit, checkable record")[0])
    rest = [p for p in paragraphs[1:] if not p.startswith("# Flow:")]
    assert len(rest) == 5 and all(p in main for p in rest)
