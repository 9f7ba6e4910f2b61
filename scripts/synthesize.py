"""Counterfactual synthesis of the manager's SFT data (thin wrapper of ``stateguard synthesize``; synthesis/cli.py).

python scripts/synthesize.py --config configs/synthesis/default.yaml --out runs/synth
python scripts/synthesize.py --config configs/synthesis/smoke.yaml --workers 2 --seed 3 --out runs/synth-seed3

The flags are the fields of ``synthesis.config.SynthesisConfig`` (defaults, then ``--config``, then flags), plus
``--out`` and ``--no-progress``.
"""

from __future__ import annotations

import argparse
import logging
import sys

from harness.cli import run_command
from synthesis.cli import add_arguments, main

if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_arguments(parser)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    sys.exit(run_command("scripts/synthesize.py", main, parser.parse_args()))
