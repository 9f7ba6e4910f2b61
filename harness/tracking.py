"""Experiment tracking for the commands that are not TRL trainers: one run of the tracker ``report_to`` names.

The SFT and RL trainers log through TRL / transformers (their configs' ``report_to``, ``project`` and ``run_name``;
:func:`check_report_to` checks the packages before the model loads); ``stateguard evaluate`` logs here, with the
same names:

- ``trackio``: ``trackio.init(project, name, config)``, ``trackio.log``, ``trackio.finish`` — local and offline (a
  SQLite file per project under ``$TRACKIO_DIR``, by default ``~/.cache/huggingface/trackio``; ``trackio show``
  opens the dashboard). The local-first default for runs outside CI.
- ``tensorboard``: an event file under ``OUT/tb`` written with the ``tensorboard`` package alone (no torch, no
  TensorFlow): scalars and the PNG plots as images (``tensorboard --logdir OUT/tb``).
- ``wandb``: ``wandb.init(project, name, config, dir=OUT)``, ``wandb.log``, ``wandb.finish``.
- ``none``: nothing.

``auto`` (the default of ``stateguard pipeline`` and of the study, :func:`resolve_report_to`) is trackio outside CI
and none in CI (the ``CI`` environment variable set, as CI services do) or where trackio is not installed.

:func:`check_tracker` is the check before work starts: a tracker whose package is missing raises ``ImportError``
naming the install command (trackio and tensorboard: the ``tracking`` extra).
"""

from __future__ import annotations

import contextlib
import importlib
import io
import logging
import os
import re
import sys
import time
from abc import ABC, abstractmethod
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from harness.import_utils import is_available, require

logger = logging.getLogger(__name__)

TRACKERS = ("none", "trackio", "tensorboard", "wandb")
AUTO = "auto"
TENSORBOARD_DIR = "tb"


def resolve_report_to(report_to: str) -> str:
    """The tracker ``report_to`` names: ``auto`` is trackio, or none in CI (``$CI`` set and not ``false``/``0``) or
    without trackio installed; any other value is checked (:func:`check_tracker`) and returned."""
    if report_to != AUTO:
        check_tracker(report_to)
        return report_to
    if os.environ.get("CI", "").strip().lower() not in ("", "0", "false"):
        return "none"
    if not is_available("trackio"):
        logger.info("report_to auto: trackio is not installed, so nothing is tracked (pip install -e '.[tracking]')")
        return "none"
    return "trackio"


def check_report_to_choice(report_to: str, field_name: str = "report_to") -> None:
    """A config's ``report_to`` that also takes ``auto``: ``ValueError`` naming the field for anything else."""
    if report_to != AUTO and report_to not in TRACKERS:
        raise ValueError(f"{field_name}={report_to!r}: use {AUTO} or one of {list(TRACKERS)}.")


def trainer_flags(report_to: str, run_name: str) -> list[str]:
    """The flags that send a TRL training script (scripts/sft.py, scripts/rl.py) to ``report_to`` (resolved) under
    ``run_name``; none for ``none`` (the script's config then decides)."""
    return [] if report_to == "none" else ["--report_to", report_to, "--run_name", run_name]


def check_tracker(report_to: str) -> None:
    """Raise ``ValueError`` for an unknown tracker, ``ImportError`` naming the install command for a missing one."""
    if report_to not in TRACKERS:
        raise ValueError(f"report_to={report_to!r}: use one of {list(TRACKERS)}.")
    if report_to == "wandb" and not is_available("wandb"):
        raise ImportError("report_to wandb needs wandb, which is not installed; install it with: pip install wandb.")
    if report_to in ("trackio", "tensorboard"):
        require(report_to)


def check_report_to(report_to: str | list[str] | None) -> None:
    """The same check for a TRL/transformers ``report_to`` (a name, a list of names, ``none`` or ``all``): each of
    trackio, tensorboard and wandb named must be installed. Other integrations are left to transformers."""
    names = [report_to] if isinstance(report_to, str) else list(report_to or [])
    for name in names:
        if name in TRACKERS:
            check_tracker(name)


def tag(name: str) -> str:
    """A metric name part: every character outside ``[A-Za-z0-9_.-]`` replaced by ``_`` (``llm:http://h/v1`` ->
    ``llm_http_h_v1``)."""
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", name).strip("_") or "_"


class Tracker(ABC):
    """One run of a tracker: :meth:`log` scalars, :meth:`log_images` PNG files, :meth:`finish`."""

    @abstractmethod
    def log(self, metrics: Mapping[str, float], step: int = 0) -> None: ...

    @abstractmethod
    def log_images(self, images: Mapping[str, Path], step: int = 0) -> None: ...

    @abstractmethod
    def finish(self) -> None: ...


class TensorBoardTracker(Tracker):
    def __init__(self, log_dir: Path) -> None:
        from tensorboard.summary.writer.event_file_writer import EventFileWriter

        self.log_dir = log_dir
        self.writer = EventFileWriter(str(log_dir))

    def _add(self, step: int, values: list[Any]) -> None:
        from tensorboard.compat.proto.event_pb2 import Event
        from tensorboard.compat.proto.summary_pb2 import Summary

        self.writer.add_event(Event(wall_time=time.time(), step=step, summary=Summary(value=values)))

    def log(self, metrics: Mapping[str, float], step: int = 0) -> None:
        from tensorboard.compat.proto.summary_pb2 import Summary

        self._add(step, [Summary.Value(tag=k, simple_value=float(v)) for k, v in metrics.items()])

    def log_images(self, images: Mapping[str, Path], step: int = 0) -> None:
        from tensorboard.compat.proto.summary_pb2 import Summary

        values = []
        for name, path in images.items():
            data = Path(path).read_bytes()
            width, height = int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")  # PNG IHDR
            image = Summary.Image(height=height, width=width, colorspace=4, encoded_image_string=data)
            values.append(Summary.Value(tag=name, image=image))
        self._add(step, values)

    def finish(self) -> None:
        self.writer.flush()
        self.writer.close()


_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


class _PlainText(io.TextIOBase):
    """A text stream that writes to ``target`` without ANSI escape sequences (colours, cursor moves)."""

    def __init__(self, target: Any) -> None:
        self.target = target

    def writable(self) -> bool:
        return True

    def write(self, text: str) -> int:
        self.target.write(_ANSI.sub("", text))
        return len(text)

    def flush(self) -> None:
        self.target.flush()


@contextlib.contextmanager
def plain_stdout_when_piped() -> Iterator[None]:
    """Strip the ANSI colour codes a tracker prints (trackio's dashboard hint) when stdout is not a terminal, so a
    log file holds plain text; a terminal keeps them."""
    isatty = getattr(sys.stdout, "isatty", None)
    if isatty is not None and isatty():
        yield
        return
    with contextlib.redirect_stdout(_PlainText(sys.stdout)):
        yield


class WandbApiTracker(Tracker):
    """trackio or wandb: both offer wandb's module-level API (``init``, ``log``, ``Image``, ``finish``); ``init_args``
    are the tracker's own ``init`` options. What ``init`` and ``finish`` print reaches a non-terminal stdout as plain
    text (:func:`plain_stdout_when_piped`)."""

    def __init__(self, module: str, project: str, name: str, config: Mapping[str, Any], **init_args: Any) -> None:
        self.module = importlib.import_module(module)
        with plain_stdout_when_piped():
            self.module.init(project=project, name=name, config=dict(config), **init_args)

    def log(self, metrics: Mapping[str, float], step: int = 0) -> None:
        self.module.log(dict(metrics), step=step)

    def log_images(self, images: Mapping[str, Path], step: int = 0) -> None:
        self.module.log({name: self.module.Image(str(path)) for name, path in images.items()}, step=step)

    def finish(self) -> None:
        with plain_stdout_when_piped():
            self.module.finish()


def open_tracker(
    report_to: str, *, project: str, name: str, out: str | Path, config: Mapping[str, Any] | None = None
) -> Tracker | None:
    """A new run of ``report_to`` (None for ``none``); ``out`` is the command's output folder (tensorboard writes
    ``OUT/tb``, wandb its files under ``OUT``)."""
    check_tracker(report_to)
    out = Path(out)
    if report_to == "tensorboard":
        return TensorBoardTracker(out / TENSORBOARD_DIR)
    if report_to == "trackio":
        return WandbApiTracker("trackio", project, name, config or {}, auto_log_gpu=False, auto_log_cpu=False)
    if report_to == "wandb":
        return WandbApiTracker("wandb", project, name, config or {}, dir=str(out))
    return None
