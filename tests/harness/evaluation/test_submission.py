"""Tests of CSV submission validation: every check fails with a message naming the file and the fix."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.evaluation.errors import InvalidSubmissionError
from harness.evaluation.submission import validate_csv_submission

SAMPLE = "id,target\n001,0\n002,0\n003,0\n"


@pytest.fixture
def sample(tmp_path: Path) -> Path:
    path = tmp_path / "sample_submission.csv"
    path.write_text(SAMPLE)
    return path


def _write(tmp_path: Path, text: str | bytes, name: str = "submission.csv") -> Path:
    out = tmp_path / "work" / name
    out.parent.mkdir(exist_ok=True)
    if isinstance(text, bytes):
        out.write_bytes(text)
    else:
        out.write_text(text)
    return out


def test_valid_submission_is_returned_in_sample_column_order(tmp_path: Path, sample: Path) -> None:
    path = _write(tmp_path, "target,id\n1,003\n0,001\n1,002\n")
    frame = validate_csv_submission(path, sample_path=sample, expected_name="submission.csv", id_column="id")
    assert list(frame.columns) == ["id", "target"]
    assert frame["id"].tolist() == ["003", "001", "002"]  # text cells keep leading zeros
    assert frame["target"].tolist() == ["1", "0", "1"]


def test_missing_file(tmp_path: Path, sample: Path) -> None:
    with pytest.raises(InvalidSubmissionError, match=r"submission\.csv does not exist"):
        validate_csv_submission(tmp_path / "submission.csv", sample_path=sample)


def test_directory_is_not_a_file(tmp_path: Path, sample: Path) -> None:
    (tmp_path / "dir.csv").mkdir()
    with pytest.raises(InvalidSubmissionError, match="is not a regular file"):
        validate_csv_submission(tmp_path / "dir.csv", sample_path=sample)


def test_wrong_name(tmp_path: Path, sample: Path) -> None:
    path = _write(tmp_path, SAMPLE, name="preds.csv")
    with pytest.raises(InvalidSubmissionError, match=r"named 'preds\.csv'; name it 'submission\.csv'"):
        validate_csv_submission(path, sample_path=sample, expected_name="submission.csv")


def test_wrong_suffix_without_expected_name(tmp_path: Path, sample: Path) -> None:
    path = _write(tmp_path, SAMPLE, name="submission.txt")
    with pytest.raises(InvalidSubmissionError, match=r"suffix '\.txt'"):
        validate_csv_submission(path, sample_path=sample)
    # the same content with the sample's suffix (any case) is fine
    assert len(validate_csv_submission(_write(tmp_path, SAMPLE, name="out.CSV"), sample_path=sample)) == 3


def test_empty_file(tmp_path: Path, sample: Path) -> None:
    with pytest.raises(InvalidSubmissionError, match="cannot be read: the file is empty"):
        validate_csv_submission(_write(tmp_path, ""), sample_path=sample)


def test_unparsable_file(tmp_path: Path, sample: Path) -> None:
    with pytest.raises(InvalidSubmissionError, match="not parseable as CSV"):
        validate_csv_submission(_write(tmp_path, 'id,target\n001,0\n002,0,7,8\n"003,0\n'), sample_path=sample)
    with pytest.raises(InvalidSubmissionError, match="cannot be read"):
        validate_csv_submission(_write(tmp_path, b"\xff\xfe\x00\x81\x00\x9f binary"), sample_path=sample)


def test_wrong_columns(tmp_path: Path, sample: Path) -> None:
    path = _write(tmp_path, "id,prediction\n001,0\n002,0\n003,0\n")
    with pytest.raises(InvalidSubmissionError, match=r"missing 'target'; unexpected 'prediction'"):
        validate_csv_submission(path, sample_path=sample)


def test_duplicate_columns(tmp_path: Path, sample: Path) -> None:
    path = _write(tmp_path, "id,target,target\n001,0,0\n002,0,0\n003,0,0\n")
    with pytest.raises(InvalidSubmissionError, match="repeats the column"):
        validate_csv_submission(path, sample_path=sample)


def test_wrong_row_count(tmp_path: Path, sample: Path) -> None:
    path = _write(tmp_path, "id,target\n001,0\n002,0\n")
    with pytest.raises(InvalidSubmissionError, match="has 2 data rows; the sample sample_submission.csv has 3"):
        validate_csv_submission(path, sample_path=sample)


def test_wrong_and_repeated_ids(tmp_path: Path, sample: Path) -> None:
    path = _write(tmp_path, "id,target\n001,0\n002,0\n004,0\n")
    with pytest.raises(InvalidSubmissionError, match=r"missing \['003'\], unexpected \['004'\]"):
        validate_csv_submission(path, sample_path=sample, id_column="id")
    path = _write(tmp_path, "id,target\n001,0\n001,0\n003,0\n")
    with pytest.raises(InvalidSubmissionError, match=r"repeats ids in column 'id': \['001'\]"):
        validate_csv_submission(path, sample_path=sample, id_column="id")
    # ids are compared as text: 1 is not 001
    path = _write(tmp_path, "id,target\n1,0\n2,0\n3,0\n")
    with pytest.raises(InvalidSubmissionError, match="different ids"):
        validate_csv_submission(path, sample_path=sample, id_column="id")


def test_task_configuration_errors_are_not_invalid_submissions(tmp_path: Path, sample: Path) -> None:
    path = _write(tmp_path, SAMPLE)
    with pytest.raises(FileNotFoundError, match="Sample submission"):
        validate_csv_submission(path, sample_path=tmp_path / "nope.csv")
    with pytest.raises(ValueError, match="id_column 'key'") as info:
        validate_csv_submission(path, sample_path=sample, id_column="key")
    assert not isinstance(info.value, InvalidSubmissionError)
