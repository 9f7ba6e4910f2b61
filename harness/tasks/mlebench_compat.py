"""A small stand-in for the ``mlebench`` package, so MLE-bench ``grade.py`` / ``prepare.py`` files run unchanged.

MLE-bench competition code imports helpers from its own package, e.g.::

    from mlebench.grade_helpers import InvalidSubmissionError
    from mlebench.competitions.utils import prepare_for_accuracy_metric
    from mlebench.utils import read_csv

StateGuard does not depend on ``mlebench``. While :func:`mlebench_shim` is active, ``sys.modules`` holds these
stand-in modules (taking precedence over a real ``mlebench`` if one is installed), and on exit the previous entries
are restored. The harness activates it only while it loads a competition's ``grade.py`` / ``prepare.py`` and while it
calls their functions, so the names a file imports at module level stay bound afterwards.

What the shim provides (our own implementations of the upstream behaviour):

* ``mlebench.grade_helpers.InvalidSubmissionError`` — *the same class* as
  :class:`harness.evaluation.errors.InvalidSubmissionError`, so a competition grader raising it yields an invalid
  (score ``None``) result rather than a crash.
* ``mlebench.utils``: ``read_csv``, ``get_logger``, ``load_yaml``, ``extract`` (zip/tar archives).
* ``mlebench.competitions.utils``: ``prepare_for_accuracy_metric``, ``prepare_for_auroc_metric``.

Limitations: other upstream helpers are absent (an import of them fails with an ``ImportError`` naming the module);
imports done lazily inside a function that runs outside the shim fail; the context manager is not thread-safe
(``sys.modules`` is process-global).
"""

from __future__ import annotations

import logging
import shutil
import sys
import types
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pandas as pd
import yaml

from harness.evaluation.errors import InvalidSubmissionError


def read_csv(path: str | Path, *args: Any, **kwargs: Any) -> pd.DataFrame:
    """``pandas.read_csv`` (the upstream helper is a thin wrapper too)."""
    return pd.read_csv(path, *args, **kwargs)


def get_logger(name: str) -> logging.Logger:
    return logging.getLogger(name)


def load_yaml(path: str | Path) -> Any:
    with open(path, encoding="utf-8") as fh:
        return yaml.safe_load(fh)


def extract(compressed: str | Path, to_path: str | Path, recursive: bool = False) -> None:
    """Unpack a zip/tar archive into ``to_path`` (``recursive`` is accepted for signature compatibility)."""
    del recursive
    shutil.unpack_archive(str(compressed), str(to_path))


def _check_columns(submission: pd.DataFrame, answers: pd.DataFrame, id_column: str, target_column: str) -> None:
    for column in (id_column, target_column):
        if column not in answers.columns:
            raise ValueError(f"the answers have no column {column!r} (columns: {list(answers.columns)}).")
        if column not in submission.columns:
            raise InvalidSubmissionError(
                f"the submission has no column {column!r}; add it (columns found: {list(submission.columns)})."
            )
    if len(submission) != len(answers):
        raise InvalidSubmissionError(
            f"the submission has {len(submission)} rows but {len(answers)} are expected; "
            "write one row per id of the sample submission."
        )


def _aligned(submission: pd.DataFrame, answers: pd.DataFrame, id_column: str) -> tuple[pd.DataFrame, pd.DataFrame]:
    submission = submission.sort_values(id_column).reset_index(drop=True)
    answers = answers.sort_values(id_column).reset_index(drop=True)
    if (submission[id_column].astype(str).to_numpy() != answers[id_column].astype(str).to_numpy()).any():
        raise InvalidSubmissionError(
            f"the submission's {id_column!r} values differ from the expected ids; "
            "use exactly the ids of the sample submission."
        )
    return submission, answers


def prepare_for_accuracy_metric(
    submission: pd.DataFrame, answers: pd.DataFrame, target_column: str, id_column: str
) -> dict[str, Any]:
    """``{"y_true", "y_pred"}`` aligned on the id column; invalid shapes raise :class:`InvalidSubmissionError`."""
    _check_columns(submission, answers, id_column, target_column)
    submission, answers = _aligned(submission, answers, id_column)
    return {"y_true": answers[target_column].to_numpy(), "y_pred": submission[target_column].to_numpy()}


def prepare_for_auroc_metric(
    submission: pd.DataFrame, answers: pd.DataFrame, id_col: str, target_col: str
) -> dict[str, Any]:
    """``{"y_true", "y_score"}`` aligned on the id column; scores must be probabilities in [0, 1]."""
    _check_columns(submission, answers, id_col, target_col)
    scores = pd.to_numeric(submission[target_col], errors="coerce")
    if scores.isna().any() or scores.min() < 0 or scores.max() > 1:
        raise InvalidSubmissionError(f"column {target_col!r} must hold probabilities between 0 and 1.")
    submission, answers = _aligned(submission.assign(**{target_col: scores}), answers, id_col)
    return {"y_true": answers[target_col].to_numpy(), "y_score": submission[target_col].to_numpy()}


def _module(name: str, **attrs: Any) -> types.ModuleType:
    module = types.ModuleType(name, f"StateGuard stand-in for {name} (see harness.tasks.mlebench_compat).")
    module.__dict__.update(attrs)
    return module


def _build_modules() -> dict[str, types.ModuleType]:
    grade_helpers = _module("mlebench.grade_helpers", InvalidSubmissionError=InvalidSubmissionError)
    utils = _module("mlebench.utils", read_csv=read_csv, get_logger=get_logger, load_yaml=load_yaml, extract=extract)
    competitions_utils = _module(
        "mlebench.competitions.utils",
        InvalidSubmissionError=InvalidSubmissionError,
        prepare_for_accuracy_metric=prepare_for_accuracy_metric,
        prepare_for_auroc_metric=prepare_for_auroc_metric,
    )
    competitions = _module("mlebench.competitions", utils=competitions_utils, __path__=[])
    root = _module("mlebench", grade_helpers=grade_helpers, utils=utils, competitions=competitions, __path__=[])
    return {m.__name__: m for m in (root, grade_helpers, utils, competitions, competitions_utils)}


@contextmanager
def mlebench_shim() -> Iterator[None]:
    """Make ``import mlebench...`` resolve to the stand-ins above for the duration of the ``with`` block."""
    modules = _build_modules()
    saved = {name: sys.modules.get(name) for name in modules}
    sys.modules.update(modules)
    try:
        yield
    finally:
        for name, previous in saved.items():
            if previous is None:
                sys.modules.pop(name, None)
            else:
                sys.modules[name] = previous
