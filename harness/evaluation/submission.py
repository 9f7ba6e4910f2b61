"""Step-level validation of a CSV submission against the task's sample submission.

Checks, in order, each failure raising :class:`InvalidSubmissionError` with the file and the fix:

1. the path exists and is a regular file;
2. its name equals ``expected_name`` when given, otherwise its suffix equals the sample's (case-insensitive);
3. it parses as CSV and has a header;
4. the header has no duplicate column names, and the **set** of columns equals the sample's (order-insensitive:
   a reordered header is accepted and the returned frame is put in the sample's column order);
5. it has the sample's number of data rows;
6. when ``id_column`` is given: that column holds no duplicates and the same set of ids as the sample (compared as
   stripped text, in any row order).

Cells are read as text (``dtype=str``; blank cells become NaN), so ids like ``007`` keep their zeros and the caller
decides how to parse values. The sample itself must exist (a missing sample is a task-configuration error:
``FileNotFoundError``).
"""

from __future__ import annotations

import csv
import logging
from pathlib import Path

import pandas as pd

from harness.evaluation.errors import InvalidSubmissionError

logger = logging.getLogger(__name__)


def read_csv_text(path: Path) -> pd.DataFrame:
    """Read a CSV with every cell as text (blank cells NaN), raising ``ValueError`` for unparsable files."""
    try:
        return pd.read_csv(path, dtype=str, keep_default_na=False, na_values=[""])
    except pd.errors.EmptyDataError as exc:
        raise ValueError("the file is empty (no header row)") from exc
    except (pd.errors.ParserError, UnicodeDecodeError) as exc:
        raise ValueError(f"it is not parseable as CSV ({type(exc).__name__}: {exc})") from exc


def _header(path: Path) -> list[str]:
    with path.open(newline="", encoding="utf-8", errors="replace") as f:
        return next(csv.reader(f), [])


def _format_columns(columns: list[str] | set[str]) -> str:
    return ", ".join(repr(c) for c in sorted(columns))


def validate_csv_submission(
    path: str | Path,
    *,
    sample_path: str | Path,
    expected_name: str | None = None,
    id_column: str | None = None,
) -> pd.DataFrame:
    """Validate the submitted CSV at ``path`` and return it (text cells, sample column order).

    ``sample_path`` is the task's sample submission; ``expected_name`` the file name the task asks for;
    ``id_column`` the column whose values must equal the sample's. See the module docstring for the checks.
    """
    path, sample_path = Path(path), Path(sample_path)
    if not sample_path.is_file():
        raise FileNotFoundError(
            f"Sample submission {sample_path} does not exist; fix the task's submission.sample path."
        )
    if not path.exists():
        raise InvalidSubmissionError(f"Submission file {path} does not exist; write the submission to that path.")
    if not path.is_file():
        raise InvalidSubmissionError(f"Submission {path} is not a regular file; write the CSV file itself there.")
    if expected_name is not None and path.name != expected_name:
        raise InvalidSubmissionError(f"Submission file {path} is named {path.name!r}; name it {expected_name!r}.")
    if expected_name is None and path.suffix.lower() != sample_path.suffix.lower():
        raise InvalidSubmissionError(
            f"Submission file {path} has suffix {path.suffix!r}; the sample {sample_path.name} is "
            f"{sample_path.suffix!r}, so save it as a {sample_path.suffix or 'suffix-less'} file."
        )

    sample = read_csv_text(sample_path)
    try:
        frame = read_csv_text(path)
    except ValueError as exc:
        raise InvalidSubmissionError(
            f"Submission file {path} cannot be read: {exc}. Write a comma-separated file with a header row "
            f"like the sample {sample_path.name}."
        ) from exc

    header = _header(path)
    duplicates = sorted({c for c in header if header.count(c) > 1})
    if duplicates:
        raise InvalidSubmissionError(
            f"Submission file {path} repeats the column(s) {_format_columns(duplicates)}; keep each column once."
        )
    expected_columns = list(sample.columns)
    missing = set(expected_columns) - set(frame.columns)
    unexpected = set(frame.columns) - set(expected_columns)
    if missing or unexpected:
        parts = []
        if missing:
            parts.append(f"missing {_format_columns(missing)}")
        if unexpected:
            parts.append(f"unexpected {_format_columns(unexpected)}")
        raise InvalidSubmissionError(
            f"Submission file {path} has the wrong columns ({'; '.join(parts)}); use exactly the sample's columns "
            f"{expected_columns} (any order)."
        )
    if len(frame) != len(sample):
        raise InvalidSubmissionError(
            f"Submission file {path} has {len(frame)} data rows; the sample {sample_path.name} has {len(sample)}. "
            f"Write one row per row of the sample."
        )

    if id_column is not None:
        if id_column not in sample.columns:
            raise ValueError(
                f"id_column {id_column!r} is not a column of the sample {sample_path} (columns {expected_columns}); "
                f"fix the task's submission.id_column."
            )
        ids = frame[id_column].fillna("").str.strip()
        repeated = ids[ids.duplicated()].unique().tolist()
        if repeated:
            raise InvalidSubmissionError(
                f"Submission file {path} repeats ids in column {id_column!r}: {repeated[:5]}; write each id once."
            )
        sample_ids = set(sample[id_column].fillna("").str.strip())
        absent = sorted(sample_ids - set(ids))
        extra = sorted(set(ids) - sample_ids)
        if absent or extra:
            raise InvalidSubmissionError(
                f"Submission file {path} has different ids in column {id_column!r} than the sample "
                f"(missing {absent[:5]}{'...' if len(absent) > 5 else ''}, "
                f"unexpected {extra[:5]}{'...' if len(extra) > 5 else ''}); use the sample's ids."
            )

    logger.debug("validated submission %s (%d rows, columns %s)", path, len(frame), expected_columns)
    return frame[expected_columns]
