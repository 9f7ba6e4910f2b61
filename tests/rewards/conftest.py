from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml

ISO = "bwrap" if shutil.which("bwrap") else "none"
SYNTH_FIELDS = {
    "domains": ["commerce"],
    "tasks_per_domain": 1,
    "n_turns": [6, 6],
    "max_faults_per_task": 4,
    "workers": 1,
    "isolation": ISO,
}


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
    from synthesis.pipeline import synthesize

    out = tmp_path_factory.mktemp("synth")
    synthesize(SynthesisConfig.from_yaml(synthesis_yaml), out, progress=False)
    return out


@pytest.fixture(scope="session")
def sandbox():
    from harness.sandbox import Sandbox, SandboxConfig

    with Sandbox(SandboxConfig(isolation=ISO)) as box:
        yield box
