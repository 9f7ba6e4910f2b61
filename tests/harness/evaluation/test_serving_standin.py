"""The CPU stand-in (`transformers serve`) serving the tiny checkpoint: the official openai client gets a parseable
reply to a request with the manager's tools, and the `llm:URL` manager drives a whole evaluation episode."""

from __future__ import annotations

import shutil
import socket

import pytest

from harness.evaluation.evaluate import EvaluationConfig, run_evaluation, variant_file
from harness.llm import ChatReply
from harness.manager import parse_response, tool_schemas
from harness.manager.episode import read_episodes
from harness.manager.llm_policy import reply_to_text
from harness.serving import ServeConfig, serve_in_background

ISOLATION = "bwrap" if shutil.which("bwrap") else "none"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture(scope="module")
def endpoint(tiny, tmp_path_factory):
    log = tmp_path_factory.mktemp("serve") / "serve.log"
    with serve_in_background(ServeConfig(str(tiny), port=free_port()), cpu=True, log_path=log) as url:
        yield url


def test_openai_client_gets_a_parseable_reply_with_the_manager_tools(endpoint):
    import openai

    client = openai.OpenAI(base_url=endpoint, api_key="EMPTY")
    [model] = [m.id for m in client.models.list().data]
    messages = [{"role": "system", "content": "You are the state manager."}, {"role": "user", "content": "Go."}]
    with_tools = client.chat.completions.create(
        model=model, messages=messages, tools=tool_schemas(), max_tokens=8, temperature=0
    )
    without = client.chat.completions.create(model=model, messages=messages, max_tokens=8, temperature=0)
    message = with_tools.choices[0].message
    assert message.role == "assistant"
    assert with_tools.usage.completion_tokens >= 1
    # the tools are rendered into the prompt by the checkpoint's chat template (13 function schemas)
    assert with_tools.usage.prompt_tokens > without.usage.prompt_tokens + 1000
    text = reply_to_text(ChatReply(message.content or "", message=message.model_dump(exclude_none=True)))
    parsed = parse_response(text)  # the random tiny model writes no tool call: a parse error, not a crash
    assert parsed.ok or parsed.error


def test_llm_policy_drives_a_whole_evaluation_episode(endpoint, two_turn_task, tmp_path):
    spec = f"llm:{endpoint}"
    config = EvaluationConfig(
        suite=str(two_turn_task), out=str(tmp_path), managers=["none", spec], isolation=ISOLATION,
        manager_max_tokens=8, runtime={"max_actions": 1}, n_resamples=500, report=False,
    )  # fmt: skip
    results = run_evaluation(config)
    llm = results["variants"][spec]
    assert llm["n_episodes"] == 1 and llm["simulated"] is True  # the worker is scripted
    assert llm["manager"]["activations"] == 4  # turn start + turn end, two turns
    assert llm["manager"]["manager_tokens"]["prompt"] > 4 * 1000 and llm["manager"]["manager_tokens"]["completion"] > 0
    [record] = read_episodes(variant_file(tmp_path, spec))
    assert record.config["manager"] == "llm" and record.grade["valid"] is True
    assert all(a["actor"] == "policy" and len(a["actions"]) == 1 for a in record.activations)
    assert [c["b"] for c in results["comparisons"]] == [spec]
    # transformers serve names no checkpoint folder: served without a manager.json, the explicit cap recorded
    assert llm["manager_settings"] == record.config["manager_settings"] == {
        "file": None, "prompt_view": "full", "constrained_decoding": False, "legal_actions_only": False,
        "max_new_tokens": 8, "temperature": 0.0,
    }  # fmt: skip
    assert results["variants"]["none"]["manager_settings"] is None


def test_the_stand_in_lists_the_served_name_and_its_log_is_plain(tiny, tmp_path):
    """The model id is --served-model-name, as with vLLM (default: the folder name, the fixture's endpoint); the log
    of a server that ran and stopped holds no colour codes, no progress-bar carriage returns and no resource
    tracker "leaked semaphore" warning."""
    import json
    import urllib.request

    log = tmp_path / "serve.log"
    with serve_in_background(
        ServeConfig(str(tiny), port=free_port(), served_model_name="org/manager"), log_path=log
    ) as url:
        with urllib.request.urlopen(f"{url}/models", timeout=10) as response:
            assert [m["id"] for m in json.loads(response.read())["data"]] == ["org/manager"]
    text = log.read_text()
    assert "Application shutdown complete" in text  # it stopped cleanly, and wrote its shutdown lines
    assert "\x1b" not in text and "\r" not in text and "leaked semaphore" not in text


def test_the_default_model_id_is_the_checkpoint_folder_name(endpoint, tiny):
    import openai

    assert [m.id for m in openai.OpenAI(base_url=endpoint, api_key="EMPTY").models.list().data] == [
        tiny.resolve().name
    ]
