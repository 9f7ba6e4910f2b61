"""The small-model study: SmolLM2-135M-Instruct as the manager, before and after SFT (and DAPO).

    python scripts/study_small_model.py --config configs/study/smollm2.yaml        # the full study, <= 90 min
    python scripts/study_small_model.py --config configs/study/smollm2-mini.yaml   # the ~2-minute miniature
    python scripts/study_small_model.py --config configs/study/smollm2.yaml --out runs/study-b   # another folder

Re-running with the same output folder resumes (finished stages, samples and episodes are kept). Writes
``OUT/report.md``, ``OUT/results.json`` and the plots; the last line printed is a JSON summary. What each stage does
and how every number is defined: ``training/study.py`` and ``training/study_report.py``.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", required=True, help="study YAML (training.study.StudyConfig)")
    parser.add_argument("--out", default=None, help="output folder (default: the config's out)")
    args = parser.parse_args(argv)
    from training.study import StudyConfig, run_study

    try:
        config = StudyConfig.from_yaml(args.config)
    except ValueError as exc:
        print(f"study_small_model: {exc}", file=sys.stderr)
        return 2
    try:
        results = run_study(config, args.out)
    except RuntimeError as exc:
        print(f"study_small_model: {exc}\nRe-run the same command to resume.", file=sys.stderr)
        return 1
    summary = {
        arm: {k: v["metrics"][k]["value"] for k in ("legal_action_rate", "exact_match", "repair_f1", "reward_total")}
        for arm, v in results["arms"].items()
    }
    print(json.dumps({"total_s": results["timing"]["total"], "unavailable": list(results["unavailable"]), **summary}))
    return 0


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    sys.exit(main())
