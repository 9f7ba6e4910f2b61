import shutil

import pytest

from harness.llm import ChatReply
from harness.sandbox import Sandbox, SandboxConfig
from harness.worker.base import Worker
from harness.worker.react import ReActConfig, ReActWorker, parse_worker_reply

ISOLATION = "bwrap" if shutil.which("bwrap") else "none"


def test_parse_thought_code_and_final_answer():
    r = parse_worker_reply("<think>hidden</think>Load it.\n```python\nx = 1\nprint(x)\n```\n")
    assert (r.thought, r.code, r.has_final) == ("Load it.", "x = 1\nprint(x)", False)
    r = parse_worker_reply('Done.\nFinal Answer: {"n": 3}')
    assert (r.thought, r.code, r.final, r.has_final) == ("Done.", None, {"n": 3}, True)
    r = parse_worker_reply("Final Answer: about three")
    assert r.final == "about three" and r.has_final
    assert parse_worker_reply("just words").code is None and not parse_worker_reply("just words").has_final


class ScriptedBackend:
    def __init__(self, replies):
        self.replies, self.seen = list(replies), []

    def chat(self, messages):
        self.seen.append([dict(m) for m in messages])
        return ChatReply(self.replies.pop(0), prompt_tokens=10, completion_tokens=5)


@pytest.fixture(scope="module")
def kernel(tmp_path_factory):
    public = tmp_path_factory.mktemp("public")
    (public / "t.csv").write_text("a,b\n1,2\n3,4\n")
    with Sandbox(SandboxConfig(isolation=ISOLATION)) as sb:
        k = sb.new_kernel(public)
        yield k
        k.close()


def test_react_loop_executes_cells_feeds_back_output_and_stops_at_the_final_answer(kernel):
    backend = ScriptedBackend([
        "Read the table.\n```python\nimport pandas as pd\ndf = pd.read_csv(f'{DATA_DIR}/t.csv')\nprint(len(df))\n```",
        "Oops.\n```python\ndf['zzz']\n```",
        "Sum b.\n```python\nprint_result({'total_b': int(df['b'].sum())})\n```",
        "Final Answer: done",
    ])  # fmt: skip
    worker = ReActWorker(backend, kernel, ReActConfig(max_steps=6))
    steps = worker.run_turn("1", "How much is b in total?", hint="<analytical_state_hint>[]</analytical_state_hint>")
    assert len(steps) == 4 and [s.result.ok if s.result else None for s in steps] == [True, False, True, None]
    assert worker.answers["1"] == {"total_b": 6}  # the structured result wins over the textual final answer
    # the error and the output went back to the model as observations
    last_prompt = backend.seen[-1]
    assert "stdout:\n2" in last_prompt[3]["content"] and "KeyError" in last_prompt[5]["content"]
    assert "analytical_state_hint" in last_prompt[1]["content"]
    assert all(s.prompt_tokens == 10 and s.completion_tokens == 5 and not s.simulated for s in steps)


def test_step_budget_and_repair_budget_are_separate(kernel):
    backend = ScriptedBackend(["```python\nx = 1\n```"] * 5 + ['Final Answer: {"x": 2}'])
    worker = ReActWorker(backend, kernel, ReActConfig(max_steps=3, repair_steps=3))
    assert len(worker.run_turn("1", "q")) == 3  # ran out of steps without an answer
    assert "1" not in worker.answers
    repair = worker.repair("1", "<error_hint>{}</error_hint>")
    assert len(repair) == 3 and worker.answers["1"] == {"x": 2}


def test_without_a_backend_each_model_reply_is_a_request_the_caller_answers(kernel):
    worker = ReActWorker(None, kernel, ReActConfig(max_steps=2, repair_steps=1))
    worker.begin("1", "q")
    requests = worker.step_requests()
    messages = next(requests)  # the conversation the model must reply to
    assert [m["role"] for m in messages] == ["system", "user"] and messages[-1]["content"] == "q"
    with pytest.raises(StopIteration) as done:
        requests.send("Set x.\n```python\nx = 7\n```")
    step = done.value.value
    assert step.code == "x = 7" and step.result.ok and step.prompt_tokens == 0
    repair = worker.repair_requests("1", "hint")
    assert "hint" in next(repair)[-1]["content"]
    with pytest.raises(StopIteration) as done:
        repair.send(ChatReply('Final Answer: {"x": 7}', prompt_tokens=3))
    assert [s.meta["repair"] for s in done.value.value] == ["re-analysis"] and worker.answers["1"] == {"x": 7}
    with pytest.raises(RuntimeError, match="no chat backend"):
        ReActWorker(None, kernel).run_turn("2", "q")


def test_bad_config_is_rejected():
    with pytest.raises(ValueError, match="max_steps=0"):
        ReActConfig(max_steps=0)


def test_step_by_step_notes_and_a_repair_do_not_use_the_own_budget(kernel):
    backend = ScriptedBackend([
        "```python\nv = 1\n```",
        "```python\nv = v + 1\n```",
        "Fix.\n```python\nv = 10\n```",  # repair step
        "```python\nprint_result({'v': v})\n```",
        "Final Answer: see above",
    ])  # fmt: skip
    worker = ReActWorker(backend, kernel, ReActConfig(max_steps=4, repair_steps=1))
    assert isinstance(worker, Worker)
    worker.begin("main", "Compute v.")
    first = worker.step()
    worker.note("<window_hint>v starts at 1</window_hint>")
    second = worker.step()
    # the note rode along with the pending observation: no two user messages in a row
    sent = backend.seen[1]
    assert [m["role"] for m in sent] == ["system", "user", "assistant", "user"]
    assert "stdout" not in sent[-1]["content"] and sent[-1]["content"].endswith("v starts at 1</window_hint>")
    (repair,) = worker.repair("main", "<error_hint>{}</error_hint>")
    assert repair.meta == {"repair": "re-analysis", "final": False} and not worker.finished
    rest = []
    while (step := worker.step()) is not None:
        rest.append(step)
    assert [s.step_id for s in (first, second, repair, *rest)] == [0, 1, 2, 3, 4]
    assert len(rest) == 2 and worker.finished and worker.answers["main"] == {"v": 10}


def test_the_task_contract_replaces_the_first_prompt_only(kernel):
    backend = ScriptedBackend(["Final Answer: 1", "Final Answer: 2"])
    worker = ReActWorker(backend, kernel, contract="# Task t\n\nQuestion: first?\n")
    worker.run_turn("1", "Question: first?", hint="<analytical_state_hint>[]</analytical_state_hint>")
    worker.run_turn("2", "Question: second?")
    users = [m["content"] for m in worker.messages if m["role"] == "user"]
    assert users[0] == "# Task t\n\nQuestion: first?\n\n<analytical_state_hint>[]</analytical_state_hint>"
    assert users[1] == "Question: second?"
    assert worker.answers == {"1": 1, "2": 2}


def test_a_deep_or_huge_final_answer_stays_text_and_a_long_reply_is_cut(kernel):
    deep = "[" * 100_000 + "]" * 100_000
    for answer in (deep, "1" * 5000):
        parsed = parse_worker_reply(f"Final Answer: {answer}")
        assert parsed.has_final and parsed.final == answer  # neither RecursionError nor the int-digits ValueError
    backend = ScriptedBackend(["Final Answer: " + "7" * 200])
    worker = ReActWorker(backend, kernel, ReActConfig(max_steps=1, max_reply_chars=20))
    (step,) = worker.run_turn("1", "q")
    assert step.meta["reply_cut"] is True and step.meta["reply_chars"] == 214
    assert worker.answers["1"] == 777_777 and worker.messages[-1]["content"] == "Final Answer: 777777"
