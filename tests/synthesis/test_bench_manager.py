"""scripts/bench_manager.py: the hier format asks the model far less than the flat one, for the same decisions.

Properties of the formats, not timings: per episode the hier calls and tokens are under half the flat ones, both
formats decide the same, and tier 1 takes every gold reply. The script's last line is the JSON summary.
"""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest

from tests.synthesis.conftest import ISOLATION

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def bench():
    spec = importlib.util.spec_from_file_location("bench_manager", REPO / "scripts" / "bench_manager.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses resolve their module
    spec.loader.exec_module(module)
    yield module
    sys.modules.pop(spec.name, None)


def test_hier_asks_under_half_of_flat_for_the_same_decisions(bench, sandbox, task, candidates, qwen3_tokenizer,
                                                             qwen3_tiktoken, region_checks):  # fmt: skip
    fault = next(f for f in candidates if f.turn_id == "2" and f.fault_type == "wrong_column")
    checks = region_checks
    count = bench.CallCounter(qwen3_tokenizer, qwen3_tiktoken)
    episodes = {name: bench.bench_episode(task, f, sandbox, checks, count) for name, f in (("c", None), ("f", fault))}
    for figures in episodes.values():
        flat, hier = figures["flat"], figures["hier"]
        assert 0 < hier.calls < 0.5 * flat.calls and 0 < hier.tokens < 0.5 * flat.tokens
        assert hier.decisions == flat.decisions and hier.rejected == 0
        assert hier.attributed_calls == hier.calls  # the flat gold run is a hier run with the actors attributed
        assert flat.prompt_tokens > flat.completion_tokens > 0
    assert ("2", "REPAIR") in episodes["f"]["flat"].decisions
    summary = bench.summarize(episodes, {("f", fault.turn_id)})
    assert summary["decisions_equal"] and summary["flat"]["repair_f1"] == summary["hier"]["repair_f1"] == 1.0
    assert summary["ratio"]["calls_per_episode"] < 0.5 and summary["ratio"]["tokens_per_episode"] < 0.5


def test_a_call_counts_its_prompt_and_completion_as_the_chat_template_renders_them(bench, qwen3_tokenizer):
    count = bench.CallCounter(qwen3_tokenizer)
    messages = [{"role": "system", "content": "You check states."}, {"role": "user", "content": "Check state S1."}]
    response = '<tool_call>\n{"name": "FINALIZE_RELATIONS", "arguments": {}}\n</tool_call>'
    prompt, completion = count(messages, bench.HIER_TOOLS, response)

    def tokens(conversation, **kwargs):
        text = qwen3_tokenizer.apply_chat_template(conversation, tools=bench.HIER_TOOLS, tokenize=False, **kwargs)
        return len(qwen3_tokenizer(text, add_special_tokens=False)["input_ids"])

    assert prompt == tokens(messages, add_generation_prompt=True)
    assert prompt + completion == tokens([*messages, {"role": "assistant", "content": response}])


def test_the_script_prints_the_summary_as_its_last_line(bench, synthesized, capsys):
    assert bench.main(["--pool", str(synthesized), "--episodes", "2", "--isolation", ISOLATION]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    summary = json.loads(lines[-1])
    assert {"flat", "hier", "ratio", "episodes", "decisions_equal"} <= set(summary) and summary["episodes"] == 2
    assert summary["decisions_equal"] and summary["ratio"]["calls_per_episode"] < 0.5
    assert lines[-2].startswith("decisions equal in every episode: True")
