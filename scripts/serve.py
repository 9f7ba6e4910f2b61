"""Serve a checkpoint behind an OpenAI-compatible endpoint (thin wrapper of ``stateguard serve``; harness/serving.py).

python scripts/serve.py --checkpoint runs/sft/final                # GPU: vllm serve ... --tool-call-parser hermes
python scripts/serve.py --checkpoint runs/sft/final --dry-run      # print the exact command only
python scripts/serve.py --checkpoint runs/tiny --cpu --port 8001   # CPU stand-in: transformers serve

The flags are the fields of ``harness.serving.ServeConfig`` (defaults, then ``--config``, then flags) and
``--dry-run``.
"""

from __future__ import annotations

import argparse
import logging
import sys

from harness.cli import run_command
from harness.serving import add_arguments, serve_command

if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_arguments(parser)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    sys.exit(run_command("scripts/serve.py", serve_command, parser.parse_args()))
