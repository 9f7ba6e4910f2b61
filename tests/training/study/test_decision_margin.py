"""Teacher-forced decision margins: the branching token is where the decisions' replies part, the margin is its
log-odds in a full forward, the AUC by hand, the sample selection, and the script's output and input errors."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]


def test_auc_by_hand() -> None:
    from training.study.margin import auc, summary

    rows = [
        {"gold": "REPAIR", "margin": 1.0},
        {"gold": "REPAIR", "margin": -1.0},
        {"gold": "FINALIZE_RELATIONS", "margin": 0.0},
        {"gold": "FINALIZE_RELATIONS", "margin": -1.0},
    ]
    # repair 1.0 beats both confirms (2), repair -1.0 ties -1.0 (0.5) and loses to 0.0: 2.5 of 4 pairs
    assert auc(rows) == pytest.approx(2.5 / 4)
    assert auc(rows[:2]) is None and auc(rows[2:]) is None
    assert summary(rows) == {
        "samples": 4,
        "auc": pytest.approx(0.625),
        "n_REPAIR": 2,
        "mean_margin_REPAIR": 0.0,
        "n_FINALIZE_RELATIONS": 2,
        "mean_margin_FINALIZE_RELATIONS": -0.5,
        "prefers_repair_REPAIR": 1,  # margin 1.0 > 0
        "prefers_repair_FINALIZE_RELATIONS": 0,  # a margin of 0.0 is a tie, not a preference
    }


def test_samples_alternate_decisions_in_the_view(sft_smoke_dir: Path) -> None:
    from datasets import load_from_disk

    from training.study.margin import DECISIONS, decision_samples

    train = load_from_disk(str(sft_smoke_dir / "dataset"))["train"]
    counts = {name: sum(r["format"] == "flat" and r["control"] == name for r in train) for name in DECISIONS}
    assert all(counts.values()), counts
    every = decision_samples(sft_smoke_dir, "train", "full")
    assert len(every) == sum(counts.values())
    assert [s["gold"] for s in every[:2]] == list(DECISIONS)  # repair and confirm in turn
    first = next(r for r in train if r["content_hash"] == every[0]["content_hash"])
    assert every[0]["messages"] == first["messages"][:-1]  # the gold context: the decision itself left out
    assert json.loads(first["messages"][-1]["content"].split("<tool_call>")[1].split("</tool_call>")[0])["name"] == (
        "REPAIR"
    )
    bare = decision_samples(sft_smoke_dir, "train", "bare", limit=3)
    assert len(bare) == 3 and all(m["role"] != "system" for s in bare for m in s["messages"])
    assert all(s["tools"] is None for s in bare)
    with pytest.raises(ValueError, match=r"has no split 'test'"):
        decision_samples(sft_smoke_dir, "test", "full")


def test_margins_are_the_log_odds_of_the_branching_token(sft_smoke_dir: Path, tiny_model_dir: Path) -> None:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from harness.manager.actions import make_action
    from harness.manager.wire import render_action
    from training.study.margin import branch_ids, decision_samples, margins

    tokenizer = AutoTokenizer.from_pretrained(str(tiny_model_dir))
    model = AutoModelForCausalLM.from_pretrained(str(tiny_model_dir), dtype=torch.float32).eval()
    shared, branch = branch_ids(tokenizer)
    # the shared start and the branching ids are those of the replies the model writes (render_action's tokens)
    replies = {
        "REPAIR": render_action(
            make_action("REPAIR", {"analytical_evidence": "e", "error_hint": {"error_variable": "v",
                                                                             "faulty_reasoning": "r"}})
        ),
        "FINALIZE_RELATIONS": render_action(
            make_action("FINALIZE_RELATIONS", {"mode": "confirm", "relations": [], "conflict_evidence": ""})
        ),
    }  # fmt: skip
    for name, text in replies.items():
        ids = tokenizer(text, add_special_tokens=False)["input_ids"]
        assert ids[: len(shared)] == shared and ids[len(shared)] == branch[name]
    assert branch["REPAIR"] != branch["FINALIZE_RELATIONS"]
    samples = decision_samples(sft_smoke_dir, "train", "bare", limit=2)
    rows = margins(model, tokenizer, samples, progress=False)
    for sample, row in zip(samples, rows, strict=True):
        prompt = tokenizer.apply_chat_template(sample["messages"], add_generation_prompt=True, tokenize=False)
        prompt_ids = tokenizer(prompt, add_special_tokens=False)["input_ids"]
        assert row["prompt_tokens"] == len(prompt_ids)
        with torch.no_grad():
            logits = model(torch.tensor([prompt_ids + shared])).logits[0, -1]  # a full forward, every position
        logprobs = torch.log_softmax(logits.float(), -1)
        for name, token in branch.items():
            assert row[f"logprob_{name}"] == pytest.approx(float(logprobs[token]), abs=1e-4)
        assert row["margin"] == pytest.approx(
            float(logprobs[branch["REPAIR"]] - logprobs[branch["FINALIZE_RELATIONS"]]), abs=1e-4
        )
        assert row["gold"] == sample["gold"] and row["margin"] != 0.0


def test_the_script_writes_rows_and_summary_and_refuses_bad_input(
    sft_smoke_dir: Path, tiny_model_dir: Path, tmp_path: Path
) -> None:
    script = [sys.executable, "-m", "training.study.margin_cli"]
    out = tmp_path / "margins.json"
    args = ["--model", str(tiny_model_dir), "--data", str(sft_smoke_dir), "--split", "train", "--prompt_view", "bare"]
    done = subprocess.run(
        [*script, *args, "--limit", "2", "--out", str(out)], cwd=REPO, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr[-2000:]
    written = json.loads(out.read_text())
    assert json.loads(done.stdout.strip().splitlines()[-1]) == written["summary"]
    assert written["summary"]["samples"] == len(written["rows"]) == 2
    assert {row["gold"] for row in written["rows"]} == {"REPAIR", "FINALIZE_RELATIONS"}

    bad_model = subprocess.run(
        [*script, "--model", str(tmp_path), "--data", str(sft_smoke_dir)], cwd=REPO, capture_output=True
    )
    assert bad_model.returncode == 2 and b"no config.json there" in bad_model.stderr
    bad_split = subprocess.run([*script, *args, "--split", "test"], cwd=REPO, capture_output=True, text=True)
    assert bad_split.returncode == 2 and "has no split 'test'" in bad_split.stderr


def test_calibrate_moves_the_threshold_into_the_gap_nearest_zero() -> None:
    from training.study.margin import balanced_accuracy, calibrate

    def rows(repair: list[float], confirm: list[float]) -> list[dict]:
        return [{"gold": "REPAIR", "margin": m} for m in repair] + [
            {"gold": "FINALIZE_RELATIONS", "margin": m} for m in confirm
        ]

    # ranked perfectly, threshold on the confirm side (2 of 4 repair rows prefer REPAIR): the middle of (-2, -1)
    shifted = rows([-1.0, -0.5, 0.5, 1.0], [-2.0, -3.0, -4.0])
    assert balanced_accuracy(shifted) == pytest.approx((2 / 4 + 1) / 2)
    chosen = calibrate(shifted)
    assert chosen["bias"] == pytest.approx(1.5) and chosen["balanced_accuracy"] == 1.0
    assert (chosen["n_REPAIR"], chosen["n_confirm"]) == (4, 3)
    assert chosen["balanced_accuracy_unbiased"] == pytest.approx(0.75)
    # the other side: every row prefers REPAIR; the best gap is (1, 2), so the bias is negative
    assert calibrate(rows([2.0, 3.0], [0.5, 1.0]))["bias"] == pytest.approx(-1.5)
    # already separated at 0: the model's own threshold is kept
    assert calibrate(rows([0.5, 2.0], [-1.0, -0.2]))["bias"] == 0.0
    # not separable better than 0.5 (one margin for all), or one kind of row missing: no bias
    assert calibrate(rows([1.0], [1.0]))["bias"] == 0.0
    missing = calibrate(rows([1.0, 2.0], []))
    assert missing["bias"] == 0.0 and missing["balanced_accuracy"] is None
    # among equally good gaps the one nearest 0 wins: (-1, 1) holds 0 -> bias 0 beats the gap (3, 4)
    tied = rows([1.0, 4.0], [-1.0, 3.0])
    assert calibrate(tied)["bias"] == 0.0 and balanced_accuracy(tied) == 0.75 == balanced_accuracy(tied, -3.5)


def test_the_served_bias_moves_exactly_the_branching_logit(tiny_model_dir: Path) -> None:
    """HFChatBackend serving the BranchBias of repair_bias (as its logits_processors): at the step where the reply is
    the decisions' shared start the REPAIR token's logit rises by the bias and nothing else moves; a reply that is not
    there is untouched; a large bias on the other decision's token flips the greedy, grammar-constrained decision."""
    import torch

    from harness.llm import HFChatBackend
    from harness.manager.wire import call_grammar
    from training.study.branch_bias import BranchBias, BranchBiasProcessor, serve_with_bias
    from training.study.margin import DECISIONS, branch_ids, repair_bias

    backend = HFChatBackend(
        str(tiny_model_dir), max_new_tokens=24, grammar=lambda added: call_grammar(added, names=DECISIONS)
    )
    tokenizer = backend.tokenizer
    shared, branch = branch_ids(tokenizer)
    branch_bias = repair_bias(tokenizer, 2.5, pairwise=False)
    assert branch_bias.prefix == tokenizer.decode(shared) and branch_bias.bias == {branch["REPAIR"]: 2.5}
    assert branch_bias.versus is None
    prompt = [3, 4, 5]
    processor = BranchBiasProcessor(tokenizer, branch_bias, len(prompt))
    scores = torch.randn(1, 64 + max(branch.values()))
    moved = processor(torch.tensor([prompt + shared]), scores)
    assert torch.equal(
        moved - scores != 0, torch.nn.functional.one_hot(torch.tensor([branch["REPAIR"]]), scores.shape[1]).bool()
    )
    assert float(moved[0, branch["REPAIR"]] - scores[0, branch["REPAIR"]]) == pytest.approx(2.5)
    for elsewhere in (prompt + shared[:-1], prompt + shared + [branch["REPAIR"]], prompt):
        assert torch.equal(processor(torch.tensor([elsewhere]), scores), scores)

    messages = [{"role": "user", "content": "decide"}]
    unbiased = backend.chat(messages).text
    name = next(n for n in DECISIONS if f'"name": "{n}"' in unbiased)
    other = next(n for n in DECISIONS if n != name)
    serve_with_bias(backend, BranchBias(prefix=branch_bias.prefix, bias={branch[other]: 100.0}))
    assert f'"name": "{other}"' in backend.chat(messages).text
    serve_with_bias(backend, None)
    assert backend.chat(messages).text == unbiased
    with pytest.raises(ValueError, match=r"outside the model's \d+ logits"):
        serve_with_bias(backend, BranchBias(prefix="x", bias={10**9: 1.0}))
    with pytest.raises(ValueError, match="prefix is empty"):
        BranchBias(prefix="", bias={1: 1.0})


def test_a_pairwise_bias_reorders_the_two_decisions_and_nothing_else(tiny_model_dir: Path) -> None:
    """repair_bias's default (versus the confirmation): at the branching step only the two decisions' logits move,
    the larger of them is kept, their difference moves by the bias; so a third action that leads (another probe)
    still leads, and between the two decisions the shifted log-odds choose. A versus that is a biased token, or two
    biased tokens with a versus, is refused."""
    import torch
    from transformers import AutoTokenizer

    from training.study.branch_bias import BranchBias, BranchBiasProcessor
    from training.study.margin import branch_ids, repair_bias

    tokenizer = AutoTokenizer.from_pretrained(str(tiny_model_dir))
    shared, branch = branch_ids(tokenizer)
    repair, confirm = branch["REPAIR"], branch["FINALIZE_RELATIONS"]
    pair = repair_bias(tokenizer, 1.5)
    assert pair.bias == {repair: 1.5} and pair.versus == confirm
    third = next(i for i in range(10, 60) if i not in (repair, confirm))
    processor = BranchBiasProcessor(tokenizer, pair, 0)
    for r, c, top in [(-1.0, 0.0, 5.0), (0.0, -1.0, 5.0), (-3.0, -1.0, -9.0), (2.0, 2.0, 1.0)]:
        scores = torch.full((1, 64 + max(branch.values())), -100.0)
        scores[0, [repair, confirm, third]] = torch.tensor([r, c, top])
        moved = processor(torch.tensor([shared]), scores)
        changed = (moved != scores)[0].nonzero().flatten().tolist()
        assert set(changed) <= {repair, confirm}
        assert float(moved[0, repair] - moved[0, confirm]) == pytest.approx(r - c + 1.5)
        assert float(torch.maximum(moved[0, repair], moved[0, confirm])) == pytest.approx(max(r, c))
        assert int(moved.argmax()) == (third if top > max(r, c) else (repair if r - c + 1.5 > 0 else confirm))
    assert torch.equal(processor(torch.tensor([shared[:-1]]), scores), scores)  # not at the branching step
    scores[0, confirm] = float("-inf")  # the grammar forbids the confirmation: nothing to reorder
    assert torch.equal(processor(torch.tensor([shared]), scores), scores)
    with pytest.raises(ValueError, match="versus=7 needs bias to name exactly one other token"):
        BranchBias(prefix="x", bias={7: 1.0}, versus=7)
    with pytest.raises(ValueError, match="exactly one other token"):
        BranchBias(prefix="x", bias={1: 1.0, 2: 1.0}, versus=3)
