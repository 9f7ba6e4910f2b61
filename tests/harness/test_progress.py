"""Progress on stderr: plain lines (no ANSI codes, no carriage returns) when the stream is not a terminal."""

from __future__ import annotations

import io

from harness import progress as progress_module
from harness.progress import clock, progress, progress_line


def test_plain_lines_count_the_items_and_give_an_eta(monkeypatch):
    ticks = iter([0.0, 10.0, 20.0, 30.0])  # the start, then one per item: 10 s each
    monkeypatch.setattr(progress_module.time, "monotonic", lambda: next(ticks))
    stream = io.StringIO()
    assert list(progress(["a", "b", "c"], total=3, desc="evaluate", unit="episode", stream=stream)) == ["a", "b", "c"]
    assert stream.getvalue().splitlines() == [
        "evaluate: 0/3 episodes (0%), 0:00 elapsed",
        "evaluate: 1/3 episodes (33%), 0:10 elapsed, ETA 0:20",
        "evaluate: 2/3 episodes (66%), 0:20 elapsed, ETA 0:10",
        "evaluate: 3/3 episodes (100%), 0:30 elapsed",
    ]
    assert "\x1b" not in stream.getvalue() and "\r" not in stream.getvalue()


def test_many_items_print_about_twenty_lines_and_the_last():
    stream = io.StringIO()
    assert sum(1 for _ in progress(range(103), total=103, desc="x", stream=stream, every_s=1e9)) == 103
    lines = stream.getvalue().splitlines()
    assert len(lines) == 1 + 103 // 5 + 1 and lines[-1].startswith("x: 103/103 items (100%)")


def test_clock_and_line_formats():
    assert (clock(59.6), clock(61), clock(3725)) == ("1:00", "1:01", "1:02:05")
    assert progress_line("d", 0, 0, "episode", 0.0) == "d: 0/0 episodes (0%), 0:00 elapsed"
