"""Shared fixtures of the env tests: one tiny synthesis run (one commerce task, six turns, up to four faults)."""

from __future__ import annotations

import shutil

import pytest

ISOLATION = "bwrap" if shutil.which("bwrap") else "none"


@pytest.fixture(scope="session")
def synth_dir(tmp_path_factory):
    from synthesis.config import SynthesisConfig
    from synthesis.driver import synthesize

    out = tmp_path_factory.mktemp("envs-synth") / "out"
    config = SynthesisConfig(
        domains=["commerce"], tasks_per_domain=1, n_turns=[6, 6], max_faults_per_task=4, workers=1,
        isolation=ISOLATION,
    )  # fmt: skip
    synthesize(config, out, progress=False)
    return out


@pytest.fixture(scope="session")
def pool(synth_dir):
    from envs import ReplayPool

    return ReplayPool(synth_dir)
