"""Choosing the tracker (harness.tracking): ``auto`` is trackio outside CI and none in CI, a bad name is refused
naming the field, and the flags that send a training script to a tracker. The runs read back from the trackers' files
are in tests/harness/evaluation/test_evaluate.py and tests/training/test_sft.py."""

from __future__ import annotations

import pytest

from harness import tracking
from harness.tracking import check_report_to_choice, resolve_report_to, trainer_flags


@pytest.mark.parametrize(
    ("ci", "expected"), [(None, "trackio"), ("false", "trackio"), ("true", "none"), ("1", "none")]
)
def test_auto_is_trackio_outside_ci_and_none_in_ci(monkeypatch, ci, expected):
    pytest.importorskip("trackio")
    if ci is None:
        monkeypatch.delenv("CI", raising=False)
    else:
        monkeypatch.setenv("CI", ci)
    assert resolve_report_to("auto") == expected
    assert resolve_report_to("tensorboard") == "tensorboard"  # a name is kept, CI or not


def test_auto_without_trackio_tracks_nothing(monkeypatch):
    monkeypatch.delenv("CI", raising=False)
    monkeypatch.setattr(tracking, "is_available", lambda name: False)
    assert resolve_report_to("auto") == "none"


def test_bad_names_are_refused_naming_the_field():
    with pytest.raises(ValueError, match=r"report_to='mlflow': use auto or one of \['none', 'trackio'"):
        check_report_to_choice("mlflow")
    with pytest.raises(ValueError, match=r"report_to='mlflow': use one of"):
        resolve_report_to("mlflow")
    check_report_to_choice("auto")


def test_trainer_flags_name_the_tracker_and_the_run():
    assert trainer_flags("trackio", "demo-sft") == ["--report_to", "trackio", "--run_name", "demo-sft"]
    assert trainer_flags("none", "demo-sft") == []


def test_a_trackers_colour_codes_reach_a_piped_stdout_as_plain_text(tmp_path, monkeypatch, capsys):
    """trackio prints its dashboard hint in ANSI colour; a log file (stdout not a terminal) gets the plain text."""
    monkeypatch.setenv("TRACKIO_DIR", str(tmp_path / "trackio"))
    tracker = tracking.open_tracker("trackio", project="p", name="r", out=tmp_path)
    tracker.log({"x": 1.0})
    tracker.finish()
    printed = capsys.readouterr().out
    assert "trackio show" in printed and "\x1b" not in printed
    with tracking.plain_stdout_when_piped():
        print("\x1b[1m\x1b[38;5;208mbold\x1b[0m plain")
    assert capsys.readouterr().out == "bold plain\n"
