"""Tests of the data analyzer: statistics on hand-made files, bounded cost on big files, containment."""

from __future__ import annotations

import json
import statistics
import time
from pathlib import Path

import pandas as pd
import pytest

from harness.import_utils import is_available
from harness.tasks.profile import DataProfile, TableProfile, profile_directory

SALES = "id,price,region\n1,2.0,West\n2,4.0,East\n3,,West\n4,10.0, West\n"


def _table(profile: DataProfile, path: str) -> TableProfile:
    return next(t for t in profile.tables if t.path == path)


@pytest.fixture
def public(tmp_path: Path) -> Path:
    root = tmp_path / "public"
    (root / "data").mkdir(parents=True)
    (root / "data" / "sales.csv").write_text(SALES)
    (root / "data" / "semi.csv").write_text("a;b\n1;x\n2;y\n")
    (root / "data" / "rows.tsv").write_text("k\tv\na\t1\nb\t2\nc\t3\n")
    (root / "events.jsonl").write_text('{"user": "u1", "n": 1}\n{"user": "u2", "n": 3}\n{"user": "u1", "n": null}\n')
    (root / "records.json").write_text(json.dumps([{"x": 1}, {"x": 2}]))
    (root / "README.md").write_text("# Notes\nPrices are in EUR.\n")
    (root / "blob.bin").write_bytes(bytes(range(256)) * 4)
    (root / "fake.csv").write_bytes(b"\x00\x01\x02binary")
    (root / "sample_submission.csv").write_text("id,target\n1,0\n2,0\n3,0\n")
    return root


def test_csv_statistics_are_exact_for_small_files(public: Path) -> None:
    profile = profile_directory(public)
    table = _table(profile, "data/sales.csv")
    assert (table.format, table.n_rows, table.n_rows_exact, table.partial) == ("csv", 4, True, False)
    assert [c.name for c in table.columns] == ["id", "price", "region"]
    price = table.columns[1]
    assert price.dtype == "float64" and price.n_missing == 1
    assert price.stats["min"] == 2.0 and price.stats["max"] == 10.0
    assert price.stats["mean"] == pytest.approx(16 / 3)
    assert price.stats["std"] == pytest.approx(statistics.stdev([2.0, 4.0, 10.0]))
    region = table.columns[2]
    assert region.n_missing == 0
    assert region.stats == {"n_unique": 3, "top": [["West", 2], ["East", 1], [" West", 1]]}
    assert table.sample.splitlines()[0] == "id,price,region"
    assert table.sample.splitlines()[4] == "4,10.0, West"  # the file's own text, stray space included


def test_formats_by_suffix_and_sniffing(public: Path) -> None:
    profile = profile_directory(public)
    formats = {e.path: (e.format, e.note) for e in profile.files}
    assert formats["data/semi.csv"] == ("csv", "delimiter ';'")
    assert formats["data/rows.tsv"][0] == "tsv"
    assert formats["events.jsonl"][0] == "jsonl"
    assert formats["README.md"][0] == "text"
    assert formats["blob.bin"][0] == "binary"
    assert formats["fake.csv"] == ("binary", "suffix says csv, content looks like binary")
    assert [c.name for c in _table(profile, "data/semi.csv").columns] == ["a", "b"]
    assert _table(profile, "data/rows.tsv").n_rows == 3
    events = _table(profile, "events.jsonl")
    assert events.n_rows == 3 and events.columns[1].n_missing == 1 and events.columns[1].stats["mean"] == 2.0
    assert _table(profile, "records.json").n_rows == 2
    assert profile.snippets["README.md"] == "# Notes\nPrices are in EUR.\n"
    assert "blob.bin" not in profile.snippets and "fake.csv" not in profile.snippets


def test_layout_sizes_and_sample_submission(public: Path) -> None:
    profile = profile_directory(public)
    sizes = {e.path: e.size for e in profile.files}
    assert sizes["data/sales.csv"] == len(SALES)
    assert [e.path for e in profile.files] == sorted(sizes)
    assert profile.n_files == 9
    assert profile.total_bytes == sum(p.stat().st_size for p in public.rglob("*") if p.is_file())
    assert profile.submission == {"path": "sample_submission.csv", "columns": ["id", "target"], "n_rows": 3}
    markdown = profile.to_markdown()
    assert "### Output format" in markdown and "`id`, `target`" in markdown
    assert "| price | float64 | 1 | min 2, max 10, mean 5.33333" in markdown


def test_to_dict_is_json_serialisable(public: Path) -> None:
    data = json.loads(json.dumps(profile_directory(public).to_dict()))
    assert data["submission"]["columns"] == ["id", "target"]
    assert {t["path"] for t in data["tables"]} >= {"data/sales.csv", "events.jsonl"}


@pytest.mark.parametrize("budget", [0, 100, 700, 4096])
def test_samples_stay_within_the_budget_across_many_files(tmp_path: Path, budget: int) -> None:
    for i in range(12):
        (tmp_path / f"t{i:02d}.csv").write_text("a,b,c\n" + "".join(f"{j},{j * 2},text{j}\n" for j in range(200)))
        (tmp_path / f"n{i:02d}.txt").write_text("lorem ipsum " * 100)
    profile = profile_directory(tmp_path, max_sample_bytes=budget)
    assert profile.sample_bytes() <= budget
    assert len(profile.tables) == 12
    if budget >= 4096:  # a fair share (4096 // 24 bytes) for every file, not everything to the first ones
        assert all(t.sample.startswith("a,b,c\n0,0,text0") for t in profile.tables)
        assert all(s.startswith("lorem ipsum") for s in profile.snippets.values()) and len(profile.snippets) == 12


def test_large_file_profile_is_bounded_and_fast(tmp_path_factory: pytest.TempPathFactory) -> None:
    root = tmp_path_factory.mktemp("big")
    block = "".join(f"{i},{(i % 97) / 7:.5f},cat{i % 5},some free text for row {i}\n" for i in range(20_000))
    repeats = 50 * 2**20 // len(block) + 1
    with (root / "big.csv").open("w") as f:
        f.write("id,value,cat,text\n")
        for _ in range(repeats):
            f.write(block)
    size = (root / "big.csv").stat().st_size
    assert size >= 50 * 2**20

    start = time.perf_counter()
    profile = profile_directory(root, max_sample_bytes=2048)
    elapsed = time.perf_counter() - start

    table = profile.tables[0]
    assert elapsed < 5.0, f"profiling a {size} byte file took {elapsed:.2f}s"
    assert table.n_rows == 20_000 * repeats and table.n_rows_exact is False
    assert table.partial is True and 0 < table.stats_rows < table.n_rows
    assert table.columns[2].stats["n_unique"] == 5
    assert profile.sample_bytes() <= 2048
    markdown = profile.to_markdown()
    assert len(markdown) < 6000
    assert "cover only the first" in markdown and "counted by lines" in markdown


def test_symlinks_out_of_the_folder_are_never_read(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.csv").write_text("token\nTOPSECRET\n")
    root = tmp_path / "public"
    root.mkdir()
    (root / "ok.csv").write_text("x\n1\n")
    (root / "leak.csv").symlink_to(outside / "secret.csv")
    (root / "leakdir").symlink_to(outside, target_is_directory=True)
    (root / "alias.csv").symlink_to(root / "ok.csv")  # a link that stays inside is fine

    profile = profile_directory(root)
    text = json.dumps(profile.to_dict()) + profile.to_markdown()
    assert "TOPSECRET" not in text and "token" not in text
    formats = {e.path: e.format for e in profile.files}
    assert formats["leak.csv"] == "link" and formats["leakdir"] == "link"
    assert {t.path for t in profile.tables} == {"ok.csv", "alias.csv"}


def test_max_files_bounds_the_listing(tmp_path: Path) -> None:
    for i in range(60):
        (tmp_path / f"f{i:02d}.txt").write_text("x")
    profile = profile_directory(tmp_path, max_files=10)
    assert len(profile.files) == 10 and profile.n_files == 60 and profile.total_bytes == 60
    assert "50 more files not listed" in profile.to_markdown()


def test_wide_tables_profile_at_most_max_columns(tmp_path: Path) -> None:
    frame = pd.DataFrame({f"c{i}": range(3) for i in range(80)})
    frame.to_csv(tmp_path / "wide.csv", index=False)
    table = profile_directory(tmp_path, max_columns=20).tables[0]
    assert table.n_columns == 80 and len(table.columns) == 20
    assert "60 more columns" in profile_directory(tmp_path, max_columns=20).to_markdown()


def test_bad_arguments(tmp_path: Path) -> None:
    with pytest.raises(NotADirectoryError, match="not a directory"):
        profile_directory(tmp_path / "missing")
    with pytest.raises(ValueError, match="max_files=0"):
        profile_directory(tmp_path, max_files=0)


@pytest.mark.skipif(not is_available("pyarrow"), reason="pyarrow is not installed")
def test_parquet_schema_and_rows(tmp_path: Path) -> None:
    pd.DataFrame({"a": [1.0, 2.0, None], "b": ["x", "y", "x"]}).to_parquet(tmp_path / "t.parquet")
    table = profile_directory(tmp_path).tables[0]
    assert (table.format, table.n_rows, table.n_rows_exact) == ("parquet", 3, True)
    assert table.columns[0].n_missing == 1 and table.columns[1].stats["n_unique"] == 2


@pytest.mark.skipif(is_available("pyarrow"), reason="pyarrow is installed")
def test_parquet_without_pyarrow_is_listed_with_a_note(tmp_path: Path) -> None:
    (tmp_path / "t.parquet").write_bytes(b"PAR1" + b"\x00" * 64 + b"PAR1")
    profile = profile_directory(tmp_path)
    assert profile.tables == []
    assert profile.files[0].format == "parquet" and "pyarrow is not installed" in profile.files[0].note


@pytest.mark.skipif(not is_available("openpyxl"), reason="openpyxl is not installed")
def test_xlsx_first_sheet(tmp_path: Path) -> None:
    with pd.ExcelWriter(tmp_path / "book.xlsx", engine="openpyxl") as writer:
        pd.DataFrame({"n": [1, 2, 3, 4]}).to_excel(writer, sheet_name="main", index=False)
        pd.DataFrame({"m": [1]}).to_excel(writer, sheet_name="other", index=False)
    table = profile_directory(tmp_path).tables[0]
    assert (table.format, table.n_rows) == ("xlsx", 4)
    assert table.columns[0].stats["mean"] == 2.5
    assert "first sheet 'main' of 2" in table.note
