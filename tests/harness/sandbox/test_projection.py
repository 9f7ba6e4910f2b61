"""Column projection: a probe that reads only some columns of a frame gets only those exported, and the same verdict
as over the whole frame. Each non-projectable use exports the whole frame (on the code before projection, every
export was whole: the projected cases below failed their ``projected`` assertions)."""

from __future__ import annotations

import ast

import pytest

from harness.sandbox.probes import names_read, projections

LAST_C = [0, 1, 2, 3, 0, 1]
SETUP = (
    "import pandas as pd, numpy as np\n"
    "df = pd.DataFrame({'a': np.arange(6), 'b': np.arange(6) / 4, 'c': np.arange(6) % 4})\n"
    "dup = pd.DataFrame(np.arange(12).reshape(3, 4), columns=['x', 'y', 'x', 'z'])\n"
    "col = 'a'"
)


@pytest.fixture()
def k(kernel):
    assert kernel.execute(SETUP).ok
    return kernel


def _export(kernel, code, name="df"):
    """The entry ``name`` crosses as for the probe ``code`` (a fresh export: the kernel runs a cell first)."""
    assert kernel.execute("pass").ok
    tree = ast.parse(code)
    entry, _ = kernel._probes.exported([name], projections(tree, names_read(tree)[0]))[name]
    return entry


@pytest.mark.parametrize(
    ("probe", "columns", "result"),
    [
        ("print_result([len(df), int(df['c'].max())])", ["c"], [6, 3]),
        ("print_result([df.c.tolist(), df[['c', 'a']].columns.tolist()])", ["a", "c"], [LAST_C, ["c", "a"]]),
        ("print_result(len(df))", [], 6),
        ("print_result(dup['x'].values.tolist())", ["x", "x"], [[0, 2], [4, 6], [8, 10]]),
    ],
)
def test_a_probe_reading_some_columns_gets_only_those(k, probe, columns, result):
    name = "dup" if "dup" in probe else "df"
    entry = _export(k, probe, name)
    assert entry.get("projected") is True and entry["columns"] == columns
    r = k.probe(probe)
    assert r.ok, r.error_message
    assert r.results == [result]


@pytest.mark.parametrize(
    "probe",
    [
        "print_result(list(df.shape))",
        "print_result(df.sum().tolist())",
        "print_result(df[col].tolist())",
        "print_result(df.loc[1].tolist())",
        "print_result(list(map(str, df)))",
        "print_result(df.columns.tolist())",
        "print_result([int(df['c'].max()), callable(df.sum)])",
        "import math\nprint_result(int(df['c'].max()))",
        "print_result([len(df), df['c'].max(), globals()['df'].shape[1]])",
        "len = lambda x: x.shape[1]\nprint_result(len(df))",
    ],
)
def test_other_uses_export_the_whole_frame_with_the_same_verdict(k, probe):
    entry = _export(k, probe)
    assert "projected" not in entry and entry["columns"] == ["a", "b", "c"]
    r = k.probe(probe)
    assert r.ok, r.error_message
    expected = k._probe_in_fork(probe)
    assert r.results == expected.results


def test_a_missing_column_raises_as_over_the_whole_frame(k):
    for probe, error in (("df['zz'].max()", "KeyError"), ("df.zz.max()", "AttributeError")):
        entry = _export(k, probe)
        assert "projected" not in entry
        r = k.probe(probe)
        assert r.error_type == error and "zz" in r.error_message


def test_the_export_cache_serves_covered_projections_only(k):
    assert k.execute("pass").ok
    assert k.probe("print_result(int(df['a'].sum()))").results == [15]
    assert k._probes.exports["df"][1] == frozenset({"a"})
    assert k.probe("print_result(int(df['a'].max()))").results == [5]
    assert k._probes.exports["df"][1] == frozenset({"a"})
    assert k.probe("print_result(float(df['b'].sum()))").results == [3.75]
    assert k._probes.exports["df"][1] == frozenset({"a", "b"})  # re-exported with both
    assert k.probe("print_result(list(df.shape))").results == [[6, 3]] and k._probes.exports["df"][1] is None
    # the whole frame serves any projection
    assert k.probe("print_result(int(df['c'].max()))").results == [3] and k._probes.exports["df"][1] is None


def test_a_series_ignores_the_projection(k):
    k.execute("s = df['b']")
    entry = _export(k, "s['x']", "s")
    assert entry["kind"] == "series" and "projected" not in entry
