"""``python -m training.study --config training/study/configs/smollm2-mini.yaml``: see :mod:`training.study.cli`."""

import logging
import sys

from training.study.cli import main

if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    sys.exit(main())
