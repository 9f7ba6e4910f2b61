import json
import shutil
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer

import pytest

from harness.import_utils import is_available
from harness.sandbox import Sandbox, SandboxConfig
from harness.worker.react import (
    ChatReply,
    HFChatBackend,
    OpenAIChatBackend,
    ReActConfig,
    ReActWorker,
    parse_worker_reply,
)

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


def test_bad_config_is_rejected():
    with pytest.raises(ValueError, match="max_steps=0"):
        ReActConfig(max_steps=0)


class _Handler(BaseHTTPRequestHandler):
    def do_POST(self):  # noqa: N802
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        type(self).requests.append((self.path, body, self.headers.get("Authorization")))
        reply = {"choices": [{"message": {"role": "assistant", "content": "Final Answer: 42"}}],
                 "usage": {"prompt_tokens": 7, "completion_tokens": 3}}  # fmt: skip
        data = json.dumps(reply).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args):
        pass


def test_openai_backend_speaks_the_chat_completions_protocol():
    _Handler.requests = []
    server = HTTPServer(("127.0.0.1", 0), _Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        backend = OpenAIChatBackend(f"http://127.0.0.1:{server.server_port}/v1", "tiny", api_key="k")
        reply = backend.chat([{"role": "user", "content": "hi"}])
    finally:
        server.shutdown()
    assert reply == ChatReply("Final Answer: 42", 7, 3)
    path, body, auth = _Handler.requests[0]
    assert path == "/v1/chat/completions" and auth == "Bearer k"
    assert body["model"] == "tiny" and body["messages"] == [{"role": "user", "content": "hi"}]


def test_openai_backend_names_the_url_when_the_server_is_down():
    backend = OpenAIChatBackend("http://127.0.0.1:9/v1", "m", timeout_s=2)
    with pytest.raises(ConnectionError, match=r"127.0.0.1:9/v1/chat/completions failed"):
        backend.chat([{"role": "user", "content": "hi"}])


@pytest.mark.skipif(is_available("transformers"), reason="transformers is installed")
def test_hf_backend_without_transformers_names_the_extra():
    with pytest.raises(ImportError, match=r"\.\[train\]"):
        HFChatBackend("/nonexistent")
