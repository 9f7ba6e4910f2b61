"""Shared fixtures: a task folder (public data + private answers) and sandboxes in both isolation modes."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from harness.sandbox import Sandbox, SandboxConfig

HAS_BWRAP = shutil.which("bwrap") is not None
needs_bwrap = pytest.mark.skipif(not HAS_BWRAP, reason="bubblewrap (bwrap) is not installed")
MODES = [pytest.param("bwrap", marks=needs_bwrap), "none"]


@pytest.fixture(scope="session")
def task_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("task")
    (root / "public" / "data").mkdir(parents=True)
    (root / "public" / "data" / "sales.csv").write_text("region,amount\nnorth,10\nsouth,20\nnorth,5\n")
    (root / "private").mkdir()
    (root / "private" / "answer.txt").write_text("the answer is 42\n")
    return root


def small_config(isolation: str, **overrides: object) -> SandboxConfig:
    base: dict[str, object] = {
        "isolation": isolation,
        "cell_timeout_s": 3.0,
        "grace_s": 1.0,
        "memory_mb": 1024,
        "max_processes": 32,
        "max_output_bytes": 100_000,
    }
    base.update(overrides)
    return SandboxConfig(**base)  # type: ignore[arg-type]


@pytest.fixture(params=MODES)
def isolation(request: pytest.FixtureRequest) -> str:
    """Each isolation mode this machine supports (bwrap is skipped where bubblewrap is missing)."""
    return request.param


@pytest.fixture(scope="session")
def make_config():  # noqa: ANN201
    return small_config


@pytest.fixture(scope="module", params=MODES)
def sandbox(request: pytest.FixtureRequest) -> Iterator[Sandbox]:
    with Sandbox(small_config(request.param)) as sb:
        yield sb


@pytest.fixture()
def kernel(sandbox: Sandbox, task_dir: Path):  # noqa: ANN201
    k = sandbox.new_kernel(task_dir / "public")
    yield k
    k.close()
