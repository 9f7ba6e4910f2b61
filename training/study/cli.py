"""The small-model study: SmolLM2-135M-Instruct writing the checks a turn requires, in whole held-out episodes.

    python -m training.study --config training/study/configs/smollm2.yaml        # the full study, <= 3 h
    python -m training.study --config training/study/configs/smollm2-mini.yaml   # the miniature, a few minutes
    python -m training.study --config training/study/configs/smollm2.yaml --out runs/study-b   # another folder
    python -m training.study --config training/study/configs/smollm2-mini.yaml --model_tasks 1 --seed 3

The flags are the fields of ``training.study.config.StudyConfig`` (``harness.config_cli``: its defaults, then the
``--config`` YAML file, then the flags; ``--field_name`` or ``--field-name``; mappings and lists of lists as one YAML
value, e.g. ``--train_synthesis '{tasks_per_domain: 1}'``); every value's type is checked. ``--out`` is relative to
the current folder, the file's ``out`` to the repository root. Re-running with the same output folder resumes
(finished stages, samples and episodes are kept). Writes ``OUT/report.md``, ``OUT/results.json`` and the plots; the
last line printed is a JSON summary. What each stage does and how every number is defined:
``training/study/driver.py`` and ``training/study/episode_metrics.py``.
"""

from __future__ import annotations

import argparse
import json
import sys

PROG = "python -m training.study"


def make_parser() -> argparse.ArgumentParser:
    from harness.config_cli import add_config_arguments
    from training.study.config import StudyConfig

    parser = argparse.ArgumentParser(
        prog=PROG, description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    add_config_arguments(
        parser, StudyConfig, what="study", example="training/study/configs/smollm2-mini.yaml", require_config=True
    )
    return parser


def time_table(timing: dict[str, float]) -> str:
    """The per-stage time table: seconds per stage, then per stage kind (data, testset, train, episodes)."""
    kinds: dict[str, float] = {}
    for stage, seconds in timing.items():
        if stage != "total":
            kinds[stage.split("/")[0]] = kinds.get(stage.split("/")[0], 0.0) + seconds
    rows = [f"{stage:<32}{seconds:>10.1f}" for stage, seconds in timing.items() if stage != "total"]
    rows += ["-" * 42, *(f"{kind:<32}{seconds:>10.1f}" for kind, seconds in kinds.items())]
    return "\n".join(["time per stage (s)", *rows, f"{'total':<32}{sum(kinds.values()):>10.1f}"])


def main(argv: list[str] | None = None) -> int:
    from harness.config_cli import given_flag, parse_config

    args = make_parser().parse_args(argv)
    from training.study.driver import run_study

    try:
        (config,) = parse_config(args)
    except ValueError as exc:
        print(f"{PROG}: {exc}", file=sys.stderr)
        return 2
    try:
        results = run_study(config, config.out if given_flag(args, "out") else None)
    except RuntimeError as exc:
        print(f"{PROG}: {exc}\nRe-run the same command to resume.", file=sys.stderr)
        return 1
    print(time_table(results["timing"]))
    names = ("repair_f1", "false_repair_rate", "turn_accuracy", "dcr", "episode_reward")
    summary = {
        arm: {"episodes": v["metrics"]["episodes"], **{k: v["metrics"][k]["value"] for k in names}}
        for arm, v in results["arms"].items()
    }
    met = {t["id"]: t["status"] for t in results["targets"]}
    print(json.dumps({"total_s": results["timing"]["total"], "targets": met, **summary}))
    return 0
