"""Question chains over any CSV table: a generated table here, and DABench tables when found at ``DABENCH``."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from harness.sandbox import Sandbox
from harness.tasks import load_task
from synthesis.domains import generate_chain_over_table, graph_problems, write_task_folder
from synthesis.domains.writer import open_sandbox, rerun_task_folder

DABENCH = Path(__file__).resolve().parents[2] / ".." / "shared" / "benchmarks" / "dabench-dev"
DABENCH_TABLES = ["Credit.csv", "titanic.csv", "insurance.csv", "auto-mpg.csv"]
needs_dabench = pytest.mark.skipif(not (DABENCH / "tables").is_dir(), reason=f"DABench dev set not found at {DABENCH}")


@pytest.fixture(scope="module")
def sandbox() -> Iterator[Sandbox]:
    box = open_sandbox()
    yield box
    box.close()


def _table(path: Path, with_category: bool = True) -> Path:
    rng = np.random.default_rng(0)
    n = 240
    data = {
        "id": np.arange(n),
        "visit date": pd.date_range("2024-01-01", periods=n, freq="D").strftime("%Y-%m-%d"),
        "spend": np.round(rng.gamma(2.0, 40.0, n), 2),
        "items": rng.integers(1, 30, n),
    }
    if with_category:
        data["shop type"] = rng.choice(["kiosk", "mall ", "online"], n)
    frame = pd.DataFrame(data)
    frame.loc[rng.random(n) < 0.05, "spend"] = np.nan
    frame.to_csv(path, index=False)
    return path


def test_chain_over_a_generated_table_loads_and_re_executes(tmp_path: Path, sandbox: Sandbox) -> None:
    spec = generate_chain_over_table(_table(tmp_path / "shop visits.csv"), seed=2, n_turns=14)
    assert spec.task_id == "chain-shop_visits-2-14" and spec.domain == "table"
    assert graph_problems(spec) == []
    relations = {t.relation for t in spec.turns}
    assert {"init", "progress", "branch", "invalidate"} <= relations
    folder = write_task_folder(spec, tmp_path / "task", sandbox)
    for turn_id, (stored, fresh) in rerun_task_folder(folder, sandbox).items():
        assert fresh == stored, turn_id
    assert (folder / "public" / "data" / "shop_visits.csv").is_file()


def test_chain_without_a_category_column_groups_by_quartile_bands(tmp_path: Path, sandbox: Sandbox) -> None:
    spec = generate_chain_over_table(_table(tmp_path / "plain.csv", with_category=False), seed=0, n_turns=8)
    assert "_band" in spec.turns[1].code and "pd.qcut" in spec.turns[1].code
    folder = write_task_folder(spec, tmp_path / "task", sandbox)
    answer = load_task(folder).load_answers()["2"].answer
    values = next(v for k, v in answer.items() if k.endswith("_values"))
    assert values == ["Q1", "Q2", "Q3", "Q4"]


def test_same_seed_same_chain_and_other_seed_differs(tmp_path: Path) -> None:
    path = _table(tmp_path / "t.csv")
    a, b = generate_chain_over_table(path, 5, 10), generate_chain_over_table(path, 5, 10)
    assert a.turns == b.turns
    assert [t.code for t in generate_chain_over_table(path, 6, 10).turns] != [t.code for t in a.turns]


def test_chain_bad_input(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="no such CSV file"):
        generate_chain_over_table(tmp_path / "missing.csv", 0, 8)
    with pytest.raises(ValueError, match=r"6\.\.30"):
        generate_chain_over_table(_table(tmp_path / "t.csv"), 0, 40)
    pd.DataFrame({"name": ["a", "b", "c"], "note": ["x", "y", "z"]}).to_csv(tmp_path / "text.csv", index=False)
    with pytest.raises(ValueError, match="text.csv: a question chain needs a non-negative numeric column"):
        generate_chain_over_table(tmp_path / "text.csv", 0, 8)


@needs_dabench
@pytest.mark.parametrize("table", DABENCH_TABLES)
def test_dabench_table_chain_loads_and_every_answer_re_executes(table: str, tmp_path: Path, sandbox: Sandbox) -> None:
    spec = generate_chain_over_table(DABENCH / "tables" / table, seed=1, n_turns=12)
    assert graph_problems(spec) == []
    folder = write_task_folder(spec, tmp_path / spec.task_id, sandbox)
    task = load_task(folder)
    assert len(task.turns) == 12 and task.config.metadata["domain"] == "table"
    for turn_id, (stored, fresh) in rerun_task_folder(folder, sandbox).items():
        assert fresh == stored, turn_id
