"""Fixtures shared by the synthesis tests: the built-in retail task with its candidate faults and the check its turn 2
states, a sandbox, and one tiny synthesis run (the hack suite, the fault labels and scripts/bench_rewards.py read
it)."""

from __future__ import annotations

import random
import shutil
from pathlib import Path

import pytest
import yaml

from harness.sandbox import Sandbox, SandboxConfig
from harness.tasks import load_task
from synthesis.faults import candidate_faults, task_spec_from_folder

RETAIL = Path(__file__).resolve().parents[2] / "harness" / "builtin_tasks" / "retail-sales"
ISOLATION = "bwrap" if shutil.which("bwrap") else "none"
SYNTH_FIELDS = {
    "domains": ["commerce"],
    "tasks_per_domain": 1,
    "n_turns": [6, 6],
    "max_faults_per_task": 4,
    "workers": 1,
    "isolation": ISOLATION,
}


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


@pytest.fixture(scope="module")
def region_checks():
    """The check turn 2 of the retail task states ("revenue per region"), as the gold writes it: the sum of revenue
    per region of ``clean``, at 2 decimals. It fails on turn 2's ``wrong_column`` fault (grouped by another column)."""
    from harness.checks.spec import parse_spec
    from synthesis.checks import Check

    spec = parse_spec(
        {"kind": "group_aggregate", "variable": "by_region", "source": "clean", "by": "region", "column": "revenue",
         "agg": "sum", "decimals": 2}
    )  # fmt: skip
    return {"2": (Check("by_region", "`by_region` is the sum of revenue per region over `clean`", spec),)}


@pytest.fixture(scope="session")
def synthesis_yaml(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiny synthesis config as a YAML file (for the script's ``--config``)."""
    path = tmp_path_factory.mktemp("synth-config") / "synth.yaml"
    path.write_text(yaml.safe_dump(SYNTH_FIELDS))
    return path


@pytest.fixture(scope="session")
def synthesized(tmp_path_factory: pytest.TempPathFactory, synthesis_yaml: Path) -> Path:
    """One tiny synthesized task (6 turns, at most 4 faults): ~5 s."""
    from synthesis.config import SynthesisConfig
    from synthesis.driver import synthesize

    out = tmp_path_factory.mktemp("synth")
    synthesize(SynthesisConfig.from_yaml(synthesis_yaml), out, progress=False)
    return out
