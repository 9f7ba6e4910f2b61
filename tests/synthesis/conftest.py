"""Fixtures shared by the synthesis tests that run on the built-in retail task."""

from __future__ import annotations

import random
import shutil
from pathlib import Path

import pytest

from harness.sandbox import Sandbox, SandboxConfig
from harness.tasks import load_task
from synthesis.faults import candidate_faults, task_spec_from_folder

RETAIL = Path(__file__).resolve().parents[2] / "harness" / "builtin_tasks" / "retail-sales"
ISOLATION = "bwrap" if shutil.which("bwrap") else "none"


@pytest.fixture(scope="module")
def sandbox():
    with Sandbox(SandboxConfig(isolation=ISOLATION, max_checkpoints=128)) as sb:
        yield sb


@pytest.fixture(scope="module")
def task():
    return load_task(RETAIL)


@pytest.fixture(scope="module")
def candidates(task):
    """Every candidate fault of the retail task (seeded)."""
    spec = task_spec_from_folder(RETAIL)
    answers = {t: r.answer for t, r in task.load_answers().items()}
    return candidate_faults(spec, random.Random(0), answers=answers)
