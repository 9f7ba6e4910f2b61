"""Tests of the contract renderer with fake tasks whose private parts raise when touched."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from harness.tasks.contract import render_contract
from harness.tasks.profile import profile_directory

PUBLIC_ATTRIBUTES = {"id", "kind", "description", "answer_format", "submission", "turns", "public_dir"}


class GuardedTask:
    """A duck-typed task that fails on any private access and records every attribute read."""

    def __init__(self, **public: Any) -> None:
        object.__setattr__(self, "_public", public)
        object.__setattr__(self, "accessed", set())

    def __getattr__(self, name: str) -> Any:
        object.__getattribute__(self, "accessed").add(name)
        if name in ("private_dir", "load_answers", "root", "config"):
            raise AssertionError(f"render_contract touched task.{name}")
        public = object.__getattribute__(self, "_public")
        if name in public:
            return public[name]
        raise AttributeError(name)


def _turn(turn_id: str, question: str, context: str = "", depends_on: tuple[str, ...] = (), relation: str = "init",
          precision: int | None = None) -> SimpleNamespace:  # fmt: skip
    return SimpleNamespace(turn_id=turn_id, question=question, context=context, depends_on=depends_on,
                           relation=relation, precision=precision)  # fmt: skip


@pytest.fixture
def folders(tmp_path: Path) -> tuple[Path, Path]:
    public, private = tmp_path / "public", tmp_path / "private"
    (public / "data").mkdir(parents=True)
    private.mkdir()
    (public / "data" / "sales.csv").write_text("id,price\n1,2.5\n2,3.5\n")
    (public / "sample_submission.csv").write_text("id,label\n1,0\n2,0\n")
    (private / "answers.csv").write_text("id,label\nPRIVATE_ANSWER_1,1\n")
    return public, private


def _assert_public_only(task: GuardedTask, text: str) -> None:
    assert task.accessed <= PUBLIC_ATTRIBUTES, task.accessed - PUBLIC_ATTRIBUTES
    assert "PRIVATE_ANSWER" not in text


def test_closed_form_contract(folders: tuple[Path, Path]) -> None:
    public, _ = folders
    task = GuardedTask(id="dab-0", kind="closed_form", description="Compute the mean price.",
                       answer_format="@mean_price[value] rounded to 2 decimals.", submission=None, turns=(),
                       public_dir=public)  # fmt: skip
    text = render_contract(task, profile_directory(public))
    _assert_public_only(task, text)
    assert text.startswith("# Task dab-0\n")
    assert "Compute the mean price." in text
    assert "@mean_price[value] rounded to 2 decimals." in text
    assert "`DATA_DIR`" in text and "`WORK_DIR`" in text
    assert "### `data/sales.csv` (csv; 2 rows; 2 columns)" in text  # the data report
    assert text.index("## Objective") < text.index("## Data") < text.index("## Answer format")


def test_artifact_contract(folders: tuple[Path, Path]) -> None:
    public, _ = folders
    spec = SimpleNamespace(filename="submission.csv", sample=public / "sample_submission.csv", id_column="id",
                           target_columns=("label",), metric="accuracy", higher_is_better=True)  # fmt: skip
    task = GuardedTask(id="art", kind="artifact", description="Predict the label.", answer_format=None,
                       submission=spec, turns=(), public_dir=public)  # fmt: skip
    text = render_contract(task, profile_directory(public))
    _assert_public_only(task, text)
    assert "`WORK_DIR/submission.csv`" in text
    assert (
        "Follow the sample submission `sample_submission.csv`: the same columns (any order) and the same 2 rows"
        in text
    )
    assert "Columns: `id`, `label`." in text
    assert "identified by `id`" in text
    assert "Scored columns: `label`; metric: accuracy (higher is better)" in text


def test_artifact_contract_reads_sample_header_when_profile_lacks_it(folders: tuple[Path, Path]) -> None:
    public, _ = folders
    spec = SimpleNamespace(filename="preds.csv", sample=public / "sample_submission.csv", id_column=None,
                           target_columns=(), metric="rmse", higher_is_better=False)  # fmt: skip
    task = GuardedTask(id="art", kind="artifact", description="d", answer_format=None, submission=spec, turns=(),
                       public_dir=public)  # fmt: skip
    profile = profile_directory(public / "data")  # the sample is not in this profile
    text = render_contract(task, profile)
    _assert_public_only(task, text)
    assert "Columns: `id`, `label`." in text and "one row per sample row" in text
    assert "Scored columns: `id`, `label`; metric: rmse (lower is better)" in text


def _multi_turn_task(public: Path) -> GuardedTask:
    turns = (
        _turn("1", "How many orders are there?", precision=0),
        _turn("2", "Revenue per region?", "Normalise region names.", ("1",), "progress", 2),
        _turn(
            "3", "Revenue per region with the corrected price?", "Order 7 has a wrong price.", ("2",), "invalidate", 2
        ),  # fmt: skip
        _turn("4", "FUTURE QUESTION: which region leads?", "", ("2", "3"), "combine", 4),
    )
    return GuardedTask(id="mt", kind="multi_turn", description="Analyse sales in turns.", answer_format=None,
                       submission=None, turns=turns, public_dir=public)  # fmt: skip


def test_multi_turn_contract_for_a_later_turn(folders: tuple[Path, Path]) -> None:
    public, _ = folders
    task = _multi_turn_task(public)
    text = render_contract(task, profile_directory(public), turn_id="3")
    _assert_public_only(task, text)
    assert "## Earlier turns\n\n- Turn 1: How many orders are there?\n- Turn 2: Revenue per region?\n" in text
    assert "## Current turn (3, 3 of 4)" in text
    assert "Context: Order 7 has a wrong price." in text
    assert "Question: Revenue per region with the corrected price?" in text
    assert "builds on turn(s) 2 (relation: invalidate;" in text
    assert "round numbers to 2 decimals" in text
    assert "FUTURE QUESTION" not in text  # later turns never leak
    assert "Normalise region names." not in text  # earlier turns show their questions only


def test_multi_turn_defaults_to_the_first_turn(folders: tuple[Path, Path]) -> None:
    public, _ = folders
    text = render_contract(_multi_turn_task(public), profile_directory(public))
    assert "## Current turn (1, 1 of 4)" in text and "## Earlier turns" not in text
    assert "builds on" not in text and "round numbers to 0 decimals" in text


def test_errors_name_the_valid_choices(folders: tuple[Path, Path]) -> None:
    public, _ = folders
    profile = profile_directory(public)
    with pytest.raises(ValueError, match=r"no turn '9'; valid turn ids are \['1', '2', '3', '4'\]"):
        render_contract(_multi_turn_task(public), profile, turn_id="9")
    closed = GuardedTask(id="c", kind="closed_form", description="d", answer_format="@a[v]", submission=None,
                         turns=(), public_dir=public)  # fmt: skip
    with pytest.raises(ValueError, match="without turn_id"):
        render_contract(closed, profile, turn_id="1")
    odd = GuardedTask(id="o", kind="essay", description="d", answer_format=None, submission=None, turns=(),
                      public_dir=public)  # fmt: skip
    with pytest.raises(ValueError, match=r"kind 'essay'; render_contract knows \['artifact', 'closed_form'"):
        render_contract(odd, profile)
