"""scripts/gpu_check.py: the ``--cpu-smoke`` record has every part with its figures (or a stated skip), a spent time
budget or a machine without CUDA skips the parts saying why, and its shapes are Qwen3-1.7B's and Qwen3-8B's. CI never
needs a GPU: only the tiny CPU shapes run here."""

from __future__ import annotations

import json

import pytest
from rl_support import load_script

pytest.importorskip("torch")
PARTS = {"sft_qwen3_8b_slice", "sft_qwen3_1_7b", "decode", "waves"}


def _record(capsys, argv: list[str]) -> dict:
    assert load_script("gpu_check").main(argv) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert len(lines) == 1  # one JSON record, nothing else on stdout
    return json.loads(lines[0])


def test_the_cpu_smoke_record_has_every_part(capsys):
    pytest.importorskip("trl")
    record = _record(capsys, ["--cpu-smoke"])
    assert (record["check"], record["mode"], record["device"]) == ("gpu_check", "cpu-smoke", "cpu")
    assert set(record["parts"]) == PARTS and record["wall_s"] > 0
    assert {"torch", "transformers", "trl", "vllm"} <= set(record["deps"]) and record["deps"]["torch"]
    for name in ("sft_qwen3_8b_slice", "sft_qwen3_1_7b"):
        sft = record["parts"][name]
        assert sft["tokens_per_s"] > 0 and sft["predicted_gib"] > 0 and sft["peak_gib"] is None  # no CUDA memory
        assert sft["loss"] > 0 and sft["tokens_per_s"] == pytest.approx(sft["tokens"] / sft["step_s"], rel=0.05)
    assert record["parts"]["sft_qwen3_8b_slice"]["layers"] < record["parts"]["sft_qwen3_1_7b"]["layers"]
    decode = record["parts"]["decode"]
    assert set(decode["tokens_per_s"]) == set(decode["ratio_to_batch_1"]) == {"1", "4"}
    assert decode["ratio_to_batch_1"]["1"] == 1.0
    waves = record["parts"]["waves"]
    assert "ratio" in waves or waves["skipped"]  # the wave driver needs training.rl.waves and a pool (--pool)


def test_a_spent_budget_and_a_machine_without_cuda_skip_the_parts_saying_why(capsys, monkeypatch):
    import torch

    record = _record(capsys, ["--cpu-smoke", "--budget-s", "0"])
    assert set(record["parts"]) == PARTS
    assert all(part["skipped"] == "the 0 s budget was spent before this part" for part in record["parts"].values())
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    record = _record(capsys, [])
    assert record["mode"] == "gpu" and record["device"] == "cpu"
    assert all("no CUDA device" in part["skipped"] for part in record["parts"].values())


def test_the_shapes_are_qwen3_1_7b_and_an_8b_slice():
    from training.estimate import QWEN3_1_7B, QWEN3_8B, model_shape, single_card_step_gib

    shape = model_shape(QWEN3_1_7B)
    assert shape.params == 1_720_574_976  # the model card's 1.7 B (tied 151,936 x 2,048 embedding)
    slice_8b = model_shape({**QWEN3_8B, "num_hidden_layers": 4})
    assert slice_8b.params == 2 * 151936 * 4096 + 4 * (8_190_735_360 - 2 * 151936 * 4096 - 4096) // 36 + 4096
    step = single_card_step_gib(shape, 16384)
    assert step["weights_gib"] == step["gradients_gib"] == pytest.approx(2 * shape.params / 2**30)
    assert step["peak_gib"] == pytest.approx(sum(v for k, v in step.items() if k != "peak_gib"))


def test_a_stopped_part_is_recorded_and_the_rest_skipped(capsys, monkeypatch):
    script = load_script("gpu_check")

    def stopped(*args, **kwargs):
        raise script.Stopped("signal 15: the time limit of scripts/gpu_check.sh")

    monkeypatch.setattr(script, "sft_step", lambda *args: {"step_s": 1.0})
    monkeypatch.setattr(script, "decode", stopped)
    assert script.main(["--cpu-smoke"]) == 0
    parts = json.loads(capsys.readouterr().out)["parts"]
    assert parts["sft_qwen3_1_7b"]["step_s"] == 1.0
    assert parts["decode"]["error"] == "Stopped: signal 15: the time limit of scripts/gpu_check.sh"
    assert parts["waves"]["skipped"] == "signal 15: the time limit of scripts/gpu_check.sh"


def test_the_shell_entry_prints_one_record_without_a_gpu(tmp_path):
    import os
    import subprocess
    import sys

    from rl_support import REPO

    pool = tmp_path / "pool"
    (pool / "episodes").mkdir(parents=True)
    (pool / "episodes" / "index.jsonl").write_text("")  # an existing pool: no synthesis
    env = {**os.environ, "PYTHON": sys.executable, "POOL": str(pool), "CUDA_VISIBLE_DEVICES": ""}
    done = subprocess.run(["bash", str(REPO / "scripts" / "gpu_check.sh")], env=env, capture_output=True, text=True,
                          timeout=120, check=True)  # fmt: skip
    record = json.loads(done.stdout)
    assert record["mode"] == "gpu" and set(record["parts"]) == PARTS
    assert all("no CUDA device" in part["skipped"] for part in record["parts"].values())
    assert 0 < record["budget_s"] <= 410  # the shell's limit minus the last minute
