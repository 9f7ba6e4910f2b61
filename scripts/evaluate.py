"""Evaluate manager variants on a suite (thin wrapper of ``stateguard evaluate``; see harness/evaluation/cli.py).

python scripts/evaluate.py --config configs/eval/smoke.yaml --out runs/eval/smoke
python scripts/evaluate.py --suite heldout-seeds --worker scripted --manager none,rule --out runs/eval/heldout
python scripts/evaluate.py --suite heldout-seeds --managers none rule llm:http://localhost:8000/v1 --out runs/eval/sft

The flags are the fields of ``harness.evaluation.evaluate.EvaluationConfig`` (defaults, then ``--config``, then flags).
"""

from __future__ import annotations

import argparse
import logging
import sys

from harness.cli import run_command
from harness.evaluation.cli import add_arguments, evaluate_command

if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_arguments(parser)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    sys.exit(run_command("scripts/evaluate.py", evaluate_command, parser.parse_args()))
