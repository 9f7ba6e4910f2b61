"""`stateguard view --sample`: the token mask of SFT samples (chat template) and RL rollouts (env_mask)."""

from __future__ import annotations

import dataclasses
import html
import json

import pytest

from harness.viewer.inputs import ViewerError, sample_spans


@pytest.fixture(scope="module")
def tokenizer():
    from harness.tokenizer import build_qwen3_tokenizer

    return build_qwen3_tokenizer()


@pytest.fixture(scope="module")
def sft_rows(synth_out):
    from datasets import Dataset

    return list(Dataset.load_from_disk(str(synth_out / "dataset" / "train")))


def test_sft_mask_is_the_chat_template_assistant_mask(sft_rows, tokenizer):
    row = next(r for r in sft_rows if r["kind"] == "atomic" and r["label"] == "repair")
    spans, kind = sample_spans(row, "row", tokenizer)
    assert kind == "sft-conversational"
    # the runs put back together are exactly the rendered conversation, token count included
    text = tokenizer.apply_chat_template(row["messages"], tools=row["tools"], tokenize=False)
    assert "".join(s.text for s in spans) == text
    assert sum(s.n_tokens for s in spans) == row["n_tokens"] > 0
    model = [s for s in spans if s.model]
    rendered = tokenizer.apply_chat_template(
        row["messages"], tools=row["tools"], tokenize=True, return_dict=True, return_assistant_tokens_mask=True
    )
    assert sum(s.n_tokens for s in model) == sum(rendered["assistant_masks"]) > 0
    replies = [m["content"] for m in row["messages"] if m["role"] == "assistant"]
    assert len(model) == len(replies)
    for span, reply in zip(model, replies, strict=True):
        assert reply in span.text and span.text.endswith("<|im_end|>")
    assert "REPAIR" in replies[-1]
    assert not spans[0].model and spans[0].text.startswith("<|im_start|>system\n")


def test_rollout_mask_follows_env_mask(tokenizer):
    from training.rl.rollout import EpisodeTokens, Rollout

    tokens = EpisodeTokens(tokenizer)
    rollout = Rollout("ep-1", prompt_ids=tokens.prompt("# Activation: turn_start"))
    first = tokens.encode('<tool_call>\n{"name": "RESUME_WORKER", "arguments": {}}\n</tool_call>') + [tokens.eos_id]
    rollout.extend(first, model=True)
    rollout.extend(tokens.suffix("<script>alert(1)</script> next observation", closed=True), model=False)
    second = tokens.encode('<tool_call>\n{"name": "ABSTAIN", "arguments": {}}\n</tool_call>')
    rollout.extend(second, model=True)
    rollout.extend(tokens.close_ids, model=False)
    row = dataclasses.asdict(rollout)
    spans, kind = sample_spans(row, "row", tokenizer)
    assert kind == "rl-rollout"
    assert [(s.model, s.n_tokens) for s in spans] == [
        (False, len(rollout.prompt_ids)),
        (True, len(first)),
        (False, len(tokens.suffix("<script>alert(1)</script> next observation", closed=True))),
        (True, len(second)),
        (False, len(tokens.close_ids)),
    ]
    assert spans[1].text == tokenizer.decode(first, skip_special_tokens=False)
    bad = dict(row, env_mask=row["env_mask"][:-1])
    with pytest.raises(ViewerError, match="completion_ids has .* ids but env_mask"):
        sample_spans(bad, "rollouts.jsonl:3", tokenizer)


def test_sample_pages_from_a_dataset_and_a_rollout_file(synth_out, sft_rows, tokenizer, view, tmp_path):
    out = tmp_path / "sample.html"
    assert view([synth_out / "dataset", "--sample", "--index", "0", "--out", out]) == 0
    page = out.read_text()
    reply = sft_rows[0]["messages"][-1]["content"]
    assert '<span class="m" id="model-1" title=' in page and html.escape(reply) in page
    assert f"{sft_rows[0]['n_tokens']} in all" in page
    # a samples JSON-lines file, every row: an index page and one page per row
    path = tmp_path / "samples.jsonl"
    path.write_text(
        "".join(json.dumps({k: sft_rows[i][k] for k in ("messages", "tools", "kind")}) + "\n" for i in (0, 1))
    )
    assert view([path, "--sample", "--all", "--out", tmp_path / "pages"]) == 0
    assert sorted(p.name for p in (tmp_path / "pages").iterdir()) == [
        "index.html",
        "sample-00000.html",
        "sample-00001.html",
    ]


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["--index", "999"], "--index 999 is out of range; it holds"),
        (["--split", "test"], "no split 'test'; pass --split with one of ['train', 'validation']"),
    ],
)
def test_bad_sample_input_exits_2(synth_out, view, tmp_path, capsys, argv, expected):
    assert view([synth_out / "dataset", "--sample", "--out", tmp_path / "x.html", *argv]) == 2
    err = capsys.readouterr().err
    assert expected in err and str(synth_out / "dataset") in err
