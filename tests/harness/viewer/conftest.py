"""Shared fixtures of the viewer tests: one tiny synthesis run and the ``stateguard view`` command."""

from __future__ import annotations

import argparse
import json
import shutil

import pytest

ISOLATION = "bwrap" if shutil.which("bwrap") else "none"


@pytest.fixture(scope="session")
def synth_out(tmp_path_factory):
    """One commerce task, six turns, up to four faults: clean, faulty and gold records, the dataset, the shards."""
    from synthesis.config import SynthesisConfig
    from synthesis.driver import synthesize

    out = tmp_path_factory.mktemp("viewer-synth") / "out"
    config = SynthesisConfig(
        domains=["commerce"], tasks_per_domain=1, n_turns=[6, 6], max_faults_per_task=4, workers=1,
        isolation=ISOLATION,
    )  # fmt: skip
    synthesize(config, out, progress=False)
    return out


@pytest.fixture(scope="session")
def gold_records(synth_out):
    """The gold-managed records (each repairs its fault) as dicts, in file order."""
    lines = (synth_out / "episodes" / "gold.jsonl").read_text().splitlines()
    return [json.loads(line) for line in lines if line.strip()]


@pytest.fixture(scope="session")
def view():
    """``view(argv)`` runs ``stateguard view ARGV`` through the command's own ``register`` (so it does not depend on
    the installed entry points) and returns its exit code."""
    from synthesis.view import register

    def run(argv: list[str]) -> int:
        parser = argparse.ArgumentParser(prog="stateguard")
        register(parser.add_subparsers())
        args = parser.parse_args(["view", *[str(a) for a in argv]])
        return args.func(args)

    return run
