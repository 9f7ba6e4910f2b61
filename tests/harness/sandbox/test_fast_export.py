"""The export's fast path: numeric numpy-backed frames and pandas' default string columns cross as raw column
buffers, read without any Python-level code of pandas/numpy/pyarrow, so a worker's patch of those libraries neither
blocks nor changes the verdict.

On the checked path alone, each patch below made the frame unavailable (NameError naming the patch); a patch the
export ran would have changed what crossed."""

from __future__ import annotations

import os
import sys

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

from harness.sandbox.runtime import fastexport, verifier

SALES = (  # the shape of a task's CSV read by pandas: ints, floats, default-dtype strings with missing values
    "sales = pd.DataFrame({'order_id': np.arange(5), 'region': ['n', None, 'south', 'n', None],"
    " 'unit_price': np.arange(5) / 2, 'code': pd.array(['a', 'b', None, 'dé', ''], dtype='string[pyarrow]')})"
)

SETUP = (
    "import pandas as pd, numpy as np, pyarrow as pa\n"
    "df = pd.DataFrame({'a': np.arange(6), 'b': np.arange(6) / 4, 'c': np.arange(6) % 4})\n"
    "view = df[['c', 'b']].iloc[::2]\n"
    "s = pd.Series(np.array([1, 2, 3], dtype=np.int32), index=pd.Index([10, 20, 30], name='k'), name='n')\n"
    "flags = pd.DataFrame({0: [True, False], 1: np.array([1.5, 2.5], dtype=np.float32)})\n"
    f"{SALES}\n"
    "tail = sales.iloc[2:]"
)


@pytest.fixture()
def k(kernel):
    assert kernel.execute(SETUP).ok
    return kernel


def _path(kernel, name):
    item = kernel._probes.exported([name])[name]
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
    assert _path(k, "df") == "fast" and _path(k, "sales") == "fast"
    r = k.probe("assert len(df) == 3")
    assert r.error_type == "AssertionError" and not r.unavailable
    r = k.probe("print_result([len(df), df.columns.tolist(), int(df['a'].sum()), view['c'].tolist()])")
    assert r.ok and r.results == [[6, ["a", "b", "c"], 15, [0, 2, 0]]]
    r = k.probe("print_result([len(sales), sales['region'].fillna('?').tolist(), int(sales['region'].isna().sum())])")
    assert r.ok and r.results == [[5, ["n", "?", "south", "n", "?"], 2]]


STRING_PATCHES = (
    "pd.arrays.ArrowStringArray.__len__ = lambda self: 3\n"
    "pd.arrays.ArrowStringArray._pa_array = property(lambda self: pa.chunked_array([['x']]))\n"
    "pd.StringDtype.na_value = property(lambda self: 'x')\npd.StringDtype.storage = property(lambda self: 'python')\n"
    "pd.core.internals.blocks.ExtensionBlock.values = property(lambda self: pd.array(['x'] * 5))"
)


def test_string_columns_take_the_fast_path_and_round_trip(k):
    assert [_path(k, n) for n in ("sales", "tail")] == ["fast", "fast"]
    assert k.execute(STRING_PATCHES).ok  # not run by the export (nor present in the verifier)
    r = k.probe(
        f"import pandas as pd, numpy as np\ngot = sales\n{SALES}\n"  # a fresh frame to compare with
        "print_result([got.equals(sales), got.dtypes.equals(sales.dtypes), got.dtypes.astype(str).tolist(),"
        " got['region'].isna().tolist(), got['code'].isna().tolist(), got['code'].tolist()[3:],"
        " tail.equals(sales.iloc[2:]), len(got)])"
    )
    assert r.ok, r.error_message
    assert r.results == [
        [True, True, ["int64", "str", "float64", "string"], [False, True, False, False, True]]
        + [[False, False, True, False, False], ["dé", ""], True, 5]
    ]


def test_categorical_and_object_columns_take_the_checked_path(k):
    k.execute("mixed = pd.DataFrame({'x': [1.0, 2.0], 'cat': pd.Categorical(['u', 'v']), 'o': [None, 'w']})")
    assert _path(k, "mixed") is None
    r = k.probe("print_result([mixed['cat'].cat.categories.tolist(), mixed['o'].isna().tolist(), len(mixed)])")
    assert r.ok and r.results == [[["u", "v"], [True, False], 2]]
    k.execute("pd.DataFrame.sum = lambda self, *a, **kw: 10.0")
    r = k.probe("len(mixed) + len(df)")
    assert r.error_type == "NameError" and "DataFrame.sum" in r.unavailable["mixed"] and "df" not in r.unavailable


def test_a_probe_reading_only_a_string_column_gets_only_it(k):
    assert k.execute("pass").ok
    r = k.probe("print_result(sales['region'].value_counts().to_dict())")
    assert r.ok and r.results == [{"n": 2, "south": 1}]
    assert k._probes.exports["sales"][1] == frozenset({"region"})
    entry, _ = k._probes.exported(["sales"], {"sales": ["region"]})["sales"]
    assert entry["projected"] is True and entry["columns"] == ["region"] and entry["blocks"][0]["string"] == "nan"


def test_python_storage_strings_take_the_checked_path(k):
    k.execute("py = pd.DataFrame({'s': pd.array(['a', 'b'], dtype='string[python]')})")
    assert _path(k, "py") is None
    r = k.probe("print_result(py['s'].tolist())")
    assert r.ok and r.results == [["a", "b"]]


def _sales() -> pd.DataFrame:
    namespace = {"pd": pd, "np": np}
    exec(SALES, namespace)  # noqa: S102 - the test's own constant
    return namespace["sales"]


def test_the_string_export_runs_no_python_code_of_the_libraries():
    sales = _sales()
    cases = ((sales, True, None), (sales, True, ["code"]), (sales["region"], False, None))
    roots = tuple(os.path.dirname(m.__file__) for m in (np, pd, pa))
    called: list[str] = []
    fd = os.memfd_create("export-test")
    try:
        sys.setprofile(lambda frame, event, arg: called.append(frame.f_code.co_filename) if event == "call" else None)
        try:
            for obj, frame, columns in cases:
                fastexport.write(fd, *fastexport.read(obj, frame, columns))
        finally:
            sys.setprofile(None)
    finally:
        os.close(fd)
    assert any(f.endswith("fastexport.py") for f in called)  # the profile saw the export's own calls
    assert [f for f in called if f.startswith(roots)] == []


def test_the_verifier_refuses_a_string_chunk_that_is_not_valid_utf8():
    entry, arrays = fastexport.read(_sales(), True)
    fd = os.memfd_create("export-test")
    try:
        fastexport.write(fd, entry, arrays)
        block = next(b for b in entry["blocks"] if "chunks" in b and b["locs"] == [1])
        good = verifier._rebuild_fast(entry, os.pread(fd, os.fstat(fd).st_size, 0))
        assert good["region"].tolist()[2] == "south"
        data = block["chunks"][0]["buffers"][2]["offset"]
        os.pwrite(fd, b"\xff", data)  # 'n' of the first row
        with pytest.raises(pa.ArrowInvalid, match="UTF8"):
            verifier._rebuild_fast(entry, os.pread(fd, os.fstat(fd).st_size, 0))
    finally:
        os.close(fd)
