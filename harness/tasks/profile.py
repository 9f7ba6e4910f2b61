"""Data analyzer: a compact, bounded profile of a task's public folder, rendered into the worker prompt.

:func:`profile_directory` walks the folder it is given (the caller passes only the *public* folder) and reports:

* the layout: a sorted file list with sizes (at most ``max_files`` entries; the rest are counted);
* each file's format, from the suffix and from sniffing the first bytes (magic numbers, NUL bytes, a consistent
  delimiter), with a note when the two disagree;
* for tables (CSV/TSV and sniffed delimited text, JSON lines, JSON record lists, Parquet when ``pyarrow`` is
  installed, Excel when ``openpyxl`` is installed): schema, dtypes, row count, missing values per column and column
  statistics (numeric: min/max/mean/std; other: number of distinct values and the most frequent ones);
* a sample of rows or text snippets whose total size never exceeds ``max_sample_bytes``, whatever the file sizes;
* the output format when the folder holds a sample submission (``*sample*submission*``): its file, columns and rows.

**Bounded cost.** A file larger than ``max_stat_bytes`` is never loaded: its rows are counted by streaming newlines
(an approximation when quoted fields contain line breaks, and reported as such) and its statistics come from the
first ``max_stat_bytes`` bytes, which the profile says (``TableProfile.stats_rows`` / ``partial``).

**Containment.** Nothing outside the folder is read: symbolic links are not followed when walking, and a link whose
target resolves outside the folder is listed as such but never opened.
"""

from __future__ import annotations

import io
import json
import logging
import math
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from harness.import_utils import is_available

logger = logging.getLogger(__name__)

TABLE_FORMATS = ("csv", "tsv", "jsonl", "json", "parquet", "xlsx")
_SUFFIX_FORMATS = {
    ".csv": "csv", ".tsv": "tsv", ".tab": "tsv", ".jsonl": "jsonl", ".ndjson": "jsonl", ".json": "json",
    ".parquet": "parquet", ".pq": "parquet", ".xlsx": "xlsx", ".xlsm": "xlsx", ".txt": "text", ".md": "text",
    ".py": "text", ".yaml": "text", ".yml": "text", ".html": "text", ".xml": "text", ".dat": "text",
    ".png": "image", ".jpg": "image", ".jpeg": "image", ".gif": "image", ".zip": "archive", ".gz": "archive",
    ".npy": "binary", ".npz": "archive", ".pkl": "binary", ".h5": "binary",
}  # fmt: skip
_MAGIC = ((b"PAR1", "parquet"), (b"PK\x03\x04", "zip"), (b"\x89PNG", "image"), (b"\xff\xd8\xff", "image"),
          (b"GIF8", "image"), (b"\x1f\x8b", "archive"), (b"\x93NUMPY", "binary"))  # fmt: skip
_DELIMITERS = {",": "csv", "\t": "tsv", ";": "csv", "|": "csv"}
_SNIFF_BYTES = 8192
_MAX_CELL_CHARS = 40
_TOP_VALUES = 5
_MIN_SHARE_BYTES = 160
_SAMPLE_LINES = 21  # a header and 20 rows


@dataclass
class FileEntry:
    """One file of the folder: path relative to it (POSIX), size in bytes, detected format and a note."""

    path: str
    size: int
    format: str
    note: str = ""


@dataclass
class ColumnProfile:
    """One column: dtype, missing count and statistics (numeric: min/max/mean/std; else n_unique and top values)."""

    name: str
    dtype: str
    n_missing: int
    stats: dict[str, Any] = field(default_factory=dict)


@dataclass
class TableProfile:
    """A tabular file. ``n_rows_exact`` is False when rows were counted by lines; ``partial`` when the statistics
    cover only the first ``stats_rows`` rows (the file is larger than ``max_stat_bytes``)."""

    path: str
    format: str
    n_rows: int | None
    n_rows_exact: bool
    columns: list[ColumnProfile]
    n_columns: int
    stats_rows: int
    partial: bool
    sample: str = ""
    note: str = ""


@dataclass
class DataProfile:
    """The profile of one folder; :meth:`to_markdown` is what goes into the worker prompt."""

    root_name: str
    files: list[FileEntry]
    n_files: int
    total_bytes: int
    tables: list[TableProfile]
    snippets: dict[str, str]
    submission: dict[str, Any] | None
    notes: list[str]
    max_sample_bytes: int

    def to_dict(self) -> dict[str, Any]:
        """JSON-serialisable dict of every field."""
        return asdict(self)

    def sample_bytes(self) -> int:
        """Bytes used by all samples and snippets together (never above ``max_sample_bytes``)."""
        texts = [t.sample for t in self.tables] + list(self.snippets.values())
        return sum(len(text.encode("utf-8")) for text in texts)

    def to_markdown(self) -> str:
        """The data report for the worker prompt: layout, tables, snippets, output format, notes."""
        lines = [f"### Files ({self.n_files} files, {_human(self.total_bytes)})", ""]
        for entry in self.files:
            note = f" — {entry.note}" if entry.note else ""
            lines.append(f"- `{entry.path}` ({_human(entry.size)}, {entry.format}){note}")
        if self.n_files > len(self.files):
            lines.append(f"- … {self.n_files - len(self.files)} more files not listed")
        for table in self.tables:
            lines += ["", _table_markdown(table)]
        for path, snippet in self.snippets.items():
            lines += ["", f"### `{path}` (first bytes)", "", "```", snippet.rstrip(), "```"]
        if self.submission:
            sub = self.submission
            lines += [
                "",
                "### Output format (from the sample submission)",
                "",
                f"`{sub['path']}` has columns {', '.join(f'`{c}`' for c in sub['columns'])} and {sub['n_rows']} rows; "
                "a submission must have the same columns and one row per row of the sample.",
            ]
        if self.notes:
            lines += ["", "### Notes", ""] + [f"- {note}" for note in self.notes]
        return "\n".join(lines)


def _human(n_bytes: int) -> str:
    size = float(n_bytes)
    for unit in ("B", "KB", "MB", "GB"):
        if size < 1024 or unit == "GB":
            return f"{int(size)} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{n_bytes} B"


def _fmt_value(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.6g}"
    text = str(value)
    text = text if len(text) <= _MAX_CELL_CHARS else text[: _MAX_CELL_CHARS - 1] + "…"
    return repr(text) if text != text.strip() or not text else text  # make stray whitespace visible


def _column_summary(column: ColumnProfile) -> str:
    stats = column.stats
    if "mean" in stats:
        return ", ".join(f"{key} {_fmt_value(stats[key])}" for key in ("min", "max", "mean", "std") if key in stats)
    if "min" in stats:
        return f"min {_fmt_value(stats['min'])}, max {_fmt_value(stats['max'])}"
    top = stats.get("top", [])
    if top and all(count == 1 for _, count in top):
        return f"{stats.get('n_unique', 0)} distinct, e.g. " + ", ".join(_fmt_value(value) for value, _ in top[:3])
    return f"{stats.get('n_unique', 0)} distinct; top: " + ", ".join(f"{_fmt_value(v)} ({c})" for v, c in top)


def _table_markdown(table: TableProfile) -> str:
    rows = f"{table.n_rows:,}" if table.n_rows is not None else "unknown"
    if table.n_rows is not None and not table.n_rows_exact:
        rows = f"about {rows} (counted by lines)"
    head = f"### `{table.path}` ({table.format}; {rows} rows; {table.n_columns} columns)"
    lines = [head, ""]
    if table.note:
        lines += [table.note, ""]
    if table.partial:
        lines += [f"Statistics below cover only the first {table.stats_rows:,} rows (the file is large).", ""]
    if table.columns:
        lines += ["| column | dtype | missing | summary |", "|---|---|---|---|"]
        for col in table.columns:
            name = col.name.replace("|", "\\|")
            summary = _column_summary(col).replace("|", "\\|")
            lines.append(f"| {name} | {col.dtype} | {col.n_missing} | {summary} |")
        if table.n_columns > len(table.columns):
            lines.append(f"| … {table.n_columns - len(table.columns)} more columns | | | |")
    if table.sample:
        lines += ["", "Sample rows:", "", "```", table.sample, "```"]
    return "\n".join(lines)


# ---- walking ---------------------------------------------------------------------------------------------------


def _inside(path: Path, root: Path) -> bool:
    try:
        path.resolve().relative_to(root)
    except (ValueError, OSError, RuntimeError):
        return False
    return True


def _walk(root: Path) -> list[tuple[Path, str]]:
    """Every file under ``root`` as (path, relative POSIX path), sorted; links are not followed."""
    found: list[tuple[Path, str]] = []
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        base = Path(dirpath)
        for name in dirnames:
            if (base / name).is_symlink():
                found.append((base / name, (base / name).relative_to(root).as_posix()))
        for name in filenames:
            found.append((base / name, (base / name).relative_to(root).as_posix()))
    return sorted(found, key=lambda item: item[1])


def _read_head(path: Path, n_bytes: int) -> bytes:
    with path.open("rb") as f:
        return f.read(n_bytes)


def _sniff_delimiter(text: str) -> str | None:
    lines = [line for line in text.splitlines()[:20] if line.strip()]
    if len(lines) > 1 and not text.endswith("\n"):
        lines = lines[:-1]  # the last line of a prefix may be cut
    if len(lines) < 2:
        return None
    for delimiter in _DELIMITERS:
        counts = {line.count(delimiter) for line in lines}
        if len(counts) == 1 and counts.pop() >= 1:
            return delimiter
    return None


def _detect_format(path: Path, head: bytes) -> tuple[str, str | None, str]:
    """(format, delimiter, note) from the suffix and the first bytes."""
    by_suffix = _SUFFIX_FORMATS.get(path.suffix.lower())
    sniffed = next((fmt for magic, fmt in _MAGIC if head.startswith(magic)), None)
    if sniffed == "zip":
        sniffed = "xlsx" if by_suffix == "xlsx" else "archive"
    if sniffed is None:
        sniffed = "binary" if b"\x00" in head else "text"
    delimiter = None
    if sniffed == "text":
        text = head.decode("utf-8", errors="replace")
        delimiter = _sniff_delimiter(text)
        stripped = text.lstrip()
        if by_suffix in ("json", "jsonl") and stripped[:1] in ("{", "["):
            sniffed = by_suffix
        elif delimiter is not None and by_suffix in (None, "csv", "tsv", "text"):
            sniffed = _DELIMITERS[delimiter]
    note = ""
    if by_suffix in ("csv", "tsv") and sniffed in ("csv", "tsv") and delimiter not in (None, ",", "\t"):
        note = f"delimiter {delimiter!r}"
    elif by_suffix and by_suffix != "text" and sniffed != by_suffix:
        note = f"suffix says {by_suffix}, content looks like {sniffed}"
    if by_suffix in ("csv", "tsv") and sniffed == "text":
        return by_suffix, {"csv": ",", "tsv": "\t"}[by_suffix], note  # a one-column or one-line table
    return sniffed, delimiter, note


# ---- tables ----------------------------------------------------------------------------------------------------


def _count_lines(path: Path) -> int:
    """Number of lines, streaming 1 MB chunks (a last line without newline counts)."""
    n_lines, last = 0, b"\n"
    with path.open("rb") as f:
        while chunk := f.read(1 << 20):
            n_lines += chunk.count(b"\n")
            last = chunk[-1:]
    return n_lines + (last != b"\n")


def _prefix_bytes(path: Path, max_bytes: int) -> bytes:
    """The first ``max_bytes`` bytes cut after the last complete line."""
    data = _read_head(path, max_bytes)
    cut = data.rfind(b"\n")
    return data[: cut + 1] if cut >= 0 else data


def _column_profiles(frame: pd.DataFrame, max_columns: int) -> list[ColumnProfile]:
    profiles = []
    for name in list(frame.columns)[:max_columns]:
        series = frame[name]
        stats: dict[str, Any] = {}
        present = series.dropna()
        if pd.api.types.is_bool_dtype(series) or not (
            pd.api.types.is_numeric_dtype(series) or pd.api.types.is_datetime64_any_dtype(series)
        ):
            counts = present.astype(str).value_counts()
            stats = {
                "n_unique": int(len(counts)),
                "top": [[str(v), int(c)] for v, c in counts.head(_TOP_VALUES).items()],
            }
        elif pd.api.types.is_datetime64_any_dtype(series):
            if len(present):
                stats = {"min": str(present.min()), "max": str(present.max())}
        elif len(present):
            values = present.astype(float)
            std = float(values.std()) if len(values) > 1 else 0.0
            stats = {"min": float(values.min()), "max": float(values.max()), "mean": float(values.mean()),
                     "std": std if math.isfinite(std) else None}  # fmt: skip
        profiles.append(ColumnProfile(str(name), str(series.dtype), int(series.isna().sum()), stats))
    return profiles


def _sample_text(text: str, budget: int) -> str:
    """As many leading lines of ``text`` (at most 21) as fit in ``budget`` bytes; a lone long first line is cut."""
    out: list[str] = []
    used = 0
    for line in text.splitlines()[:_SAMPLE_LINES]:
        cost = len(line.encode("utf-8")) + 1
        if used + cost > budget:
            room = budget - used - 4  # room for the ellipsis and newline
            if not out and room > 0:
                out.append(line.encode("utf-8")[:room].decode("utf-8", errors="ignore") + "…")
            break
        out.append(line)
        used += cost
    return "\n".join(out)


def _read_delimited(data: bytes | Path, delimiter: str) -> pd.DataFrame:
    source = io.BytesIO(data) if isinstance(data, bytes) else data
    return pd.read_csv(source, sep=delimiter, encoding_errors="replace", on_bad_lines="skip", low_memory=False)


def _read_table(
    path: Path, fmt: str, delimiter: str | None, size: int, max_stat_bytes: int
) -> tuple[pd.DataFrame, int | None, bool, bool, str]:
    """(frame for statistics, n_rows, n_rows_exact, partial, note)."""
    large = size > max_stat_bytes
    if fmt in ("csv", "tsv"):
        delimiter = delimiter or ("\t" if fmt == "tsv" else ",")
        if not large:
            frame = _read_delimited(path, delimiter)
            return frame, len(frame), True, False, ""
        frame = _read_delimited(_prefix_bytes(path, max_stat_bytes), delimiter)
        return frame, max(_count_lines(path) - 1, 0), False, True, ""
    if fmt == "jsonl":
        data = path.read_bytes() if not large else _prefix_bytes(path, max_stat_bytes)
        records = [json.loads(line) for line in data.decode("utf-8", errors="replace").splitlines() if line.strip()]
        frame = pd.json_normalize(records, max_level=0) if records else pd.DataFrame()
        return frame, (len(frame) if not large else _count_lines(path)), not large, large, ""
    if fmt == "json":
        if large:
            raise ValueError(f"JSON file larger than {_human(max_stat_bytes)} is not parsed")
        data = json.loads(path.read_text(encoding="utf-8", errors="replace"))
        if isinstance(data, list) and data and all(isinstance(item, dict) for item in data):
            frame = pd.json_normalize(data, max_level=0)
            return frame, len(frame), True, False, ""
        raise ValueError("not a list of records")
    if fmt == "parquet":
        if not is_available("pyarrow"):
            raise ValueError("pyarrow is not installed, so the schema was not read")
        import pyarrow.parquet as pq

        parquet = pq.ParquetFile(path)
        n_rows = parquet.metadata.num_rows
        if not large:
            return parquet.read().to_pandas(), n_rows, True, False, ""
        batch = next(parquet.iter_batches(batch_size=10_000), None)
        frame = batch.to_pandas() if batch is not None else parquet.schema_arrow.empty_table().to_pandas()
        return frame, n_rows, True, len(frame) < n_rows, ""
    if fmt == "xlsx":
        if not is_available("openpyxl"):
            raise ValueError("openpyxl is not installed, so the sheets were not read")
        with pd.ExcelFile(path, engine="openpyxl") as book:
            sheets = book.sheet_names
            frame = pd.read_excel(book, sheet_name=sheets[0], nrows=None if not large else 10_000)
        note = f"first sheet {sheets[0]!r} of {len(sheets)}: {sheets[:10]}" if len(sheets) > 1 else ""
        if not large:
            return frame, len(frame), True, False, note
        import openpyxl

        book = openpyxl.load_workbook(path, read_only=True)  # reads the sheet's declared dimension, not its cells
        try:
            max_row = book[sheets[0]].max_row
        finally:
            book.close()
        n_rows = max(max_row - 1, 0) if max_row is not None else None
        return frame, n_rows, False, n_rows is None or len(frame) < n_rows, note
    raise ValueError(f"no table reader for format {fmt}")


def _find_sample_submission(entries: list[FileEntry]) -> FileEntry | None:
    candidates = [e for e in entries if "sample" in e.path.lower() and "submission" in e.path.lower()]
    candidates = [e for e in candidates if e.format in ("csv", "tsv")] or candidates
    return candidates[0] if candidates else None


# ---- entry point -----------------------------------------------------------------------------------------------


def profile_directory(
    path: str | Path,
    *,
    max_sample_bytes: int = 4096,
    max_files: int = 50,
    max_stat_bytes: int = 4 << 20,
    max_columns: int = 50,
) -> DataProfile:
    """Profile the folder ``path`` (see the module docstring). Never reads outside it.

    ``max_sample_bytes`` bounds all samples and snippets together; ``max_files`` the listed and profiled files;
    ``max_stat_bytes`` the bytes read from one file for statistics; ``max_columns`` the columns profiled per table.
    """
    root = Path(path)
    if not root.is_dir():
        raise NotADirectoryError(f"profile_directory: {root} is not a directory; pass the task's public folder.")
    for name, value in (("max_sample_bytes", max_sample_bytes), ("max_files", max_files),
                        ("max_stat_bytes", max_stat_bytes), ("max_columns", max_columns)):  # fmt: skip
        if value < 0 or (value == 0 and name != "max_sample_bytes"):
            raise ValueError(f"profile_directory: {name}={value} must be positive; pass a larger value.")
    resolved_root = root.resolve()
    notes: list[str] = []
    all_files = _walk(root)

    entries: list[FileEntry] = []
    heads: dict[str, tuple[Path, str | None]] = {}
    total_bytes = 0
    for file_path, rel in all_files:
        if file_path.is_symlink() and not _inside(file_path, resolved_root):
            if len(entries) < max_files:
                entries.append(FileEntry(rel, 0, "link", "symbolic link to outside the folder; not read"))
            continue
        if not file_path.is_file():  # a link to a folder inside, or a special file
            continue
        size = file_path.stat().st_size
        total_bytes += size
        if len(entries) >= max_files:
            continue
        fmt, delimiter, note = _detect_format(file_path, _read_head(file_path, _SNIFF_BYTES))
        entries.append(FileEntry(rel, size, fmt, note))
        heads[rel] = (file_path, delimiter)
    n_files = len(all_files)

    sampled = [e for e in entries if e.path in heads and e.format not in ("image", "archive", "binary", "link")]
    share = max(_MIN_SHARE_BYTES, max_sample_bytes // max(len(sampled), 1))
    budget = max_sample_bytes
    tables: list[TableProfile] = []
    snippets: dict[str, str] = {}
    for entry in sampled:
        file_path, delimiter = heads[entry.path]
        allowance = min(share, budget)
        if entry.format in TABLE_FORMATS:
            try:
                frame, n_rows, exact, partial, note = _read_table(
                    file_path, entry.format, delimiter, entry.size, max_stat_bytes
                )
            except (ValueError, UnicodeDecodeError, pd.errors.ParserError, pd.errors.EmptyDataError) as exc:
                entry.note = "; ".join(filter(None, [entry.note, f"not profiled as a table: {exc}"]))
            else:
                if entry.format in ("csv", "tsv", "jsonl"):  # the file's own text shows its exact formatting
                    head = _read_head(file_path, max(allowance, 0))
                    if len(head) < entry.size and b"\n" in head:
                        head = head[: head.rfind(b"\n")]  # drop the cut last line
                    raw = head.decode("utf-8", errors="ignore")
                else:
                    raw = frame.iloc[:_SAMPLE_LINES, :max_columns].to_csv(index=False, lineterminator="\n")
                sample = _sample_text(raw, allowance)
                budget -= len(sample.encode("utf-8"))
                tables.append(TableProfile(
                    entry.path, entry.format, n_rows, exact, _column_profiles(frame, max_columns),
                    len(frame.columns), len(frame), partial, sample, note,
                ))  # fmt: skip
                continue
        if allowance > 0:
            head = _read_head(file_path, allowance).decode("utf-8", errors="ignore")
            if len(head.encode("utf-8")) > allowance - 3 and entry.size > allowance:
                head = head.encode("utf-8")[: allowance - 3].decode("utf-8", errors="ignore") + "…"
            snippets[entry.path] = head
            budget -= len(head.encode("utf-8"))

    submission = None
    sample_entry = _find_sample_submission(entries)
    if sample_entry is not None:
        table = next((t for t in tables if t.path == sample_entry.path), None)
        if table is not None:
            submission = {"path": table.path, "columns": [c.name for c in table.columns], "n_rows": table.n_rows}
    if n_files > len(entries):
        notes.append(f"Only the first {len(entries)} of {n_files} files are listed and profiled.")
    if any(t.partial for t in tables):
        notes.append(f"Files above {_human(max_stat_bytes)} were not loaded; their statistics use a prefix.")
    logger.debug("profiled %s: %d files, %d tables", root, n_files, len(tables))
    return DataProfile(root.name, entries, n_files, total_bytes, tables, snippets, submission, notes,
                       max_sample_bytes)  # fmt: skip
