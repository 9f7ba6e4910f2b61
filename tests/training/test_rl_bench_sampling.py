"""scripts/bench_rl_sampling.py at a tiny size: each mode prints its figures last, as one JSON line that agrees with
itself (no timing is asserted)."""

from __future__ import annotations

import json

import pytest
from rl_support import load_script

pytest.importorskip("torch")


def _last_json(capsys) -> dict:
    return json.loads(capsys.readouterr().out.strip().splitlines()[-1])


def test_rollouts_mode_compares_waves_with_drive_in_one_run(capsys):
    bench = load_script("bench_rl_sampling")
    argv = ["--mode", "rollouts", "--rollouts", "3", "--responses", "2", "--context", "24", "--prefix", "8",
            "--tokens", "3", "--tool", "4", "--threads", "1"]  # fmt: skip
    figures = bench.main(argv)
    assert _last_json(capsys) == figures
    assert (figures["sequential_calls"], figures["wave_calls"]) == (3 * 2, 2)  # rollouts x responses vs responses
    assert figures["ratio"] == pytest.approx(figures["sequential_s"] / figures["wave_s"], rel=0.01)
    assert figures["wave_tokens_per_s"] == pytest.approx(3 * 2 * 3 / figures["wave_s"], rel=0.01)
    with pytest.raises(SystemExit):
        bench.main(["--mode", "rollouts", "--rollouts", "0", "--context", "24", "--prefix", "8"])


def test_first_mode_compares_one_batch_with_sessions(capsys):
    bench = load_script("bench_rl_sampling")
    figures = bench.main(["--context", "16", "--prefix", "8", "--n", "2", "--tokens", "3", "--threads", "1"])
    assert _last_json(capsys) == figures and (figures["n"], figures["tokens"]) == (2, 3)
    assert figures["ratio"] == pytest.approx(figures["sequential_s"] / figures["batched_s"], rel=0.01)
