"""The export's fast path: numeric numpy-backed frames cross as raw column buffers, read without any Python-level
code of pandas/numpy/pyarrow, so a worker's patch of those libraries neither blocks nor changes the verdict.

On the checked path alone, each patch below made the frame unavailable (NameError naming the patch); a patch the
export ran would have changed what crossed."""

from __future__ import annotations

import pytest

SETUP = (
    "import pandas as pd, numpy as np, pyarrow as pa\n"
    "df = pd.DataFrame({'a': np.arange(6), 'b': np.arange(6) / 4, 'c': np.arange(6) % 4})\n"
    "view = df[['c', 'b']].iloc[::2]\n"
    "s = pd.Series(np.array([1, 2, 3], dtype=np.int32), index=pd.Index([10, 20, 30], name='k'), name='n')\n"
    "flags = pd.DataFrame({0: [True, False], 1: np.array([1.5, 2.5], dtype=np.float32)})"
)


@pytest.fixture()
def k(kernel):
    assert kernel.execute(SETUP).ok
    return kernel


def _path(kernel, name):
    item = kernel._exported([name])[name]
    assert isinstance(item, tuple), item
    entry, _ = item
    return entry.get("path")


def test_numeric_frames_and_series_take_the_fast_path_and_round_trip(k):
    assert [_path(k, n) for n in ("df", "view", "s", "flags")] == ["fast"] * 4
    r = k.probe(
        "print_result([df.dtypes.astype(str).tolist(), df.columns.tolist(), str(df.columns.dtype), df['c'].max(),"
        " float(df['b'].sum()), view.index.tolist(), view.columns.tolist(), view['b'].tolist(),"
        " type(df.index).__name__, s.dtype.name, s.index.tolist(), s.index.name, s.name, s.tolist(),"
        " flags.dtypes.astype(str).tolist(), flags.columns.tolist(), flags[0].tolist()])"
    )
    assert r.ok, r.error_message
    assert r.results == [
        [
            *(["int64", "float64", "int64"], ["a", "b", "c"], "str", 3, 3.75, [0, 2, 4], ["c", "b"], [0.0, 0.5, 1.0]),
            *("RangeIndex", "int32", [10, 20, 30], "k", "n", [1, 2, 3], ["bool", "float32"], [0, 1], [True, False]),
        ]
    ]


@pytest.mark.parametrize(
    "patch",
    [
        "pd.DataFrame.__len__ = lambda self: 3",
        "pd.core.internals.managers.BlockManager.blocks = property(lambda self: ())",
        "pd.core.internals.managers.BlockManager.axes = property(lambda self: [pd.Index(['a']), pd.RangeIndex(3)])",
        "pa.array = lambda *a, **kw: 1 / 0\npa.chunked_array = lambda *a, **kw: 1 / 0",
        "np.ascontiguousarray = lambda *a, **kw: np.zeros(3)\nnp.arange = lambda *a, **kw: np.zeros(3)",
        "pd.Index.tolist = lambda self: ['x', 'y', 'z']\npd.RangeIndex.__len__ = lambda self: 3",
    ],
)
def test_patched_library_code_is_not_run_by_the_fast_export(k, patch):
    assert k.execute(patch).ok
    assert _path(k, "df") == "fast"
    r = k.probe("assert len(df) == 3")
    assert r.error_type == "AssertionError" and not r.unavailable
    r = k.probe("print_result([len(df), df.columns.tolist(), int(df['a'].sum()), view['c'].tolist()])")
    assert r.ok and r.results == [[6, ["a", "b", "c"], 15, [0, 2, 0]]]


def test_categorical_and_object_columns_take_the_checked_path(k):
    k.execute("mixed = pd.DataFrame({'x': [1.0, 2.0], 'cat': pd.Categorical(['u', 'v']), 'o': [None, 'w']})")
    assert _path(k, "mixed") is None
    r = k.probe("print_result([mixed['cat'].cat.categories.tolist(), mixed['o'].isna().tolist(), len(mixed)])")
    assert r.ok and r.results == [[["u", "v"], [True, False], 2]]
    k.execute("pd.DataFrame.sum = lambda self, *a, **kw: 10.0")
    r = k.probe("len(mixed) + len(df)")
    assert r.error_type == "NameError" and "DataFrame.sum" in r.unavailable["mixed"] and "df" not in r.unavailable
