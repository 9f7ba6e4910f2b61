"""The four agents against a local OpenAI-compatible endpoint (the CPU stand-in of ``stateguard serve``) serving the
tiny random Qwen3: every agent runs to the end without crashing, whatever the model writes, and the endpoint's token
counts reach the cost."""

from __future__ import annotations

import socket

import pytest

from harness.workflow import WorkflowConfig, run_agent

pytestmark = pytest.mark.slow  # starting the stand-in server takes ~30 s


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture(scope="module")
def endpoint(tmp_path_factory):
    from harness.serving import ServeConfig, require_cpu_server, serve_in_background
    from training.models import build_tiny_qwen3

    require_cpu_server()  # fails naming the `serving` extra (make test installs it): never a silent skip
    tiny = build_tiny_qwen3(tmp_path_factory.mktemp("ckpt") / "tiny-qwen3", seed=0)
    log = tmp_path_factory.mktemp("serve") / "serve.log"
    with serve_in_background(ServeConfig(str(tiny), port=free_port()), cpu=True, log_path=log) as url:
        yield url


@pytest.mark.parametrize("workflow", ["react", "direct", "pipeline", "search"])
def test_agent_runs_against_the_tiny_model_endpoint(endpoint, small_tasks, sandbox, workflow):
    config = WorkflowConfig(max_tokens=12, max_steps=2, max_iterations=1, n_drafts=1, max_nodes=2, time_budget_s=120)
    result = run_agent(small_tasks["closed_form"], workflow, endpoint, config=config, sandbox=sandbox)
    assert result.grade["valid"] is True and result.grade["score"] in (0.0, 1.0)
    assert result.cost["llm_calls"] >= 1 and result.cost["prompt_tokens"] > 0
    assert 1 <= result.cost["completion_tokens"] <= 12 * result.cost["llm_calls"]
    assert not result.simulated
