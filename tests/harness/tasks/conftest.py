"""Fixtures of the data-layer tests; the builders live in ``task_builders``."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from task_builders import write_task_folder


@pytest.fixture
def make_task(tmp_path: Path) -> Callable[..., Path]:
    """``make_task(kind, name="task", **kwargs)`` -> a task folder under tmp_path (see :func:`write_task_folder`)."""

    def make(kind: str, name: str = "task", **kwargs: Any) -> Path:
        return write_task_folder(tmp_path / name, kind, **kwargs)

    return make
