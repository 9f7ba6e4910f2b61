"""scripts/bench_sft.py, two steps per run on the short smoke splits: the table and the last-line JSON.

The numbers themselves are not asserted (no timing asserts); the JSON must hold both throughputs and their ratio.
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_bench_prints_both_throughputs_and_the_ratio_last(sft_short_dataset_dir, tiny_model_dir, capsys):
    spec = importlib.util.spec_from_file_location("bench_sft", REPO / "scripts" / "bench_sft.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    argv = [
        "--dataset",
        str(sft_short_dataset_dir),
        "--model",
        str(tiny_model_dir),
        "--steps",
        "2",
        "--max_length",
        "512",
    ]
    assert bench.main(argv) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    result = json.loads(lines[-1])
    assert set(result) == {"tokens_per_s", "bare_trl_tokens_per_s", "ratio"}
    assert result["tokens_per_s"] > 0 and result["bare_trl_tokens_per_s"] > 0
    assert abs(result["ratio"] - result["tokens_per_s"] / result["bare_trl_tokens_per_s"]) < 0.01
    assert lines[-2].startswith("ratio") and lines[-3].startswith("bare SFTTrainer")
