"""The tiny in-process Qwen3 (real Qwen3 tokenizer, random weights) drives
`stateguard run --manager llm-hf:PATH` through a whole episode. Its actions are mostly illegal; they must be
recorded and handled, never crash the episode."""

from __future__ import annotations

import json
import shutil

import pytest

pytest.importorskip("transformers", reason="the llm-hf manager needs the train extra (make test installs it)")

from harness.cli import main  # noqa: E402
from harness.manager.episode import read_episodes  # noqa: E402
from harness.manager.wire import parse_response  # noqa: E402
from training.models import build_tiny_qwen3  # noqa: E402

ISOLATION = "bwrap" if shutil.which("bwrap") else "none"


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    return build_tiny_qwen3(tmp_path_factory.mktemp("tiny") / "tiny-qwen3", seed=0)


@pytest.mark.timeout(900)  # ~100 generate calls over a ~4k-token prompt: minutes on 2 busy cores
def test_tiny_qwen3_drives_a_whole_episode(tiny, tmp_path, capsys):
    rc = main(
        [
            "run", "--task", "retail-sales", "--worker", "scripted", "--manager", f"llm-hf:{tiny}",
            "--manager-max-tokens", "16", "--max-turn-end-activations", "1", "--isolation", ISOLATION,
            "--out", str(tmp_path), "--view", "log",
        ]
    )  # fmt: skip
    out = capsys.readouterr().out
    assert rc == 0, out
    summary = json.loads(out.strip().splitlines()[-1])
    record = next(read_episodes(tmp_path / "episodes.jsonl"))
    assert summary["manager"] == "llm-hf" and record.config["manager"] == "llm-hf"
    # every turn was played by the worker and graded, whatever the manager did
    assert sorted(record.final_answers) == ["1", "2", "3", "4", "5"] and record.grade["valid"] is True
    assert record.grade["score"] == 1.0  # clean scripted worker: a babbling manager cannot break correct work
    policy_actions = [a for act in record.activations if act["actor"] == "policy" for a in act["actions"]]
    assert len(policy_actions) >= 5 * 2  # at least one turn-start and one turn-end activation per turn
    assert all(isinstance(a["raw"], str) for a in policy_actions)  # what the model generated is kept verbatim
    # the parser's verdict on each raw response is what the runtime recorded
    for action in policy_actions:
        parsed = parse_response(action["raw"])
        assert (parsed.action is None) == (action["parsed"] is None)
        if parsed.action is None:
            assert action["legal"] is False and action["result"].startswith("rejected:")
    illegal = sum(1 for act in record.activations for a in act["actions"] if not a["legal"])
    assert summary["illegal_actions"] == illegal > 0
    assert summary["activations"] == len(record.activations)
