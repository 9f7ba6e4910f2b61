"""Progress of a long loop on stderr: a tqdm bar on a terminal, plain lines (no ANSI codes, no carriage returns)
when stderr is a file or a pipe, so a log or a CI job shows how far a run is too.

    for record in progress(records, total=len(todo), desc="evaluate", unit="episode"):
        ...

A plain line reads ``evaluate: 3/12 episodes (25%), 0:42 elapsed, ETA 2:06``; one is written before the first item,
then after every ``max(1, total // 20)``-th item, after any item that ends ``every_s`` seconds or more without a
line, and after the last one.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Iterable, Iterator
from typing import IO, TypeVar

from tqdm import tqdm

T = TypeVar("T")


def is_terminal(stream: IO[str]) -> bool:
    """Whether ``stream`` is an interactive terminal (a closed or fake stream is not)."""
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


def clock(seconds: float) -> str:
    """``seconds`` as ``M:SS`` (``H:MM:SS`` from an hour on)."""
    minutes, secs = divmod(int(round(seconds)), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes}:{secs:02d}"


def progress_line(desc: str, done: int, total: int, unit: str, elapsed: float) -> str:
    """One plain progress line; the ETA assumes the remaining items take as long as the finished ones on average."""
    line = f"{desc}: {done}/{total} {unit}s ({100 * done // max(total, 1)}%), {clock(elapsed)} elapsed"
    if 0 < done < total:
        line += f", ETA {clock(elapsed / done * (total - done))}"
    return line


def progress(
    iterable: Iterable[T],
    *,
    total: int,
    desc: str,
    unit: str = "item",
    stream: IO[str] | None = None,
    every_s: float = 30.0,
) -> Iterator[T]:
    """Yield the items of ``iterable`` while showing progress on ``stream`` (default: ``sys.stderr``): a tqdm bar
    when it is a terminal, else the plain lines of the module docstring."""
    stream = stream if stream is not None else sys.stderr
    if is_terminal(stream):
        yield from tqdm(iterable, total=total, desc=desc, unit=unit, file=stream)
        return
    step = max(1, total // 20)
    start = last = time.monotonic()
    print(progress_line(desc, 0, total, unit, 0.0), file=stream, flush=True)
    done = 0
    for item in iterable:
        yield item
        done += 1
        now = time.monotonic()
        if done % step == 0 or done == total or now - last >= every_s:
            print(progress_line(desc, done, total, unit, now - start), file=stream, flush=True)
            last = now
