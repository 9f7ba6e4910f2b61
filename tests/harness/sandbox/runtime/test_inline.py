"""The rules that let a probe run inside the kernel (``harness/sandbox/runtime/inline.py``), without a sandbox."""

from __future__ import annotations

import ast
import math

import numpy as np
import pandas as pd
import pytest

from harness.sandbox.runtime import inline
from harness.sandbox.runtime.inline import inline_refusal

NAMESPACE = {
    "pd": pd,
    "np": np,
    "math": math,
    "df": pd.DataFrame({"a": [1.0, 2.5], "b": ["x", "y"]}),
    "values": [1.25, 2.5],
    "rate": 0.7,
    "table": {"k": (1, 2.0, "s")},
    "arr": np.arange(3),
}


def refusal(code: str, namespace: dict | None = None) -> str | None:
    return inline_refusal(ast.parse(code), NAMESPACE if namespace is None else namespace)


@pytest.mark.parametrize(
    "code",
    [
        "assert all(abs(v - round(v, 2)) < 1e-9 for v in values)",
        "assert rate == 0.7",
        "assert (df['b'] != 'z').all()",
        "assert float(df.loc[df['a'] == 1.0, 'a'].iloc[0]) == 1.0",
        "assert set(df['b']) <= set(['x', 'y'])",
        "assert (df['a'] - (df['a'] * 2 * (1 - rate))).abs().max() < 10",
        "x, y = values\nif x < y:\n    print(f'{x!r} < {y}')",
        "assert math.isclose(rate, 0.7) and np.isnan(arr).sum() == 0",
        "sorted(table, key=len)",
        "{k: v for k, v in table.items()}",
        "missing_name + 1",  # a NameError at run time, as in a fork
        "total = 0\nfor v in values:\n    total = total + v\nassert total > 0",
        "import math as _m\nfrom numpy import isnan\nassert not isnan(_m.sqrt(rate))",
        "chk = pd.read_csv('t.csv')\nchk['c'] = chk['a'] * 2\nchk.loc[chk['a'] > 1, 'c'] = 0\nchk.columns = ['x']",
        "part = df.dropna().copy()\npart['b'] = part['b'].str.strip().str.title()\npart['a'] += 1",
        "n = df['a'].sum()\nn += 1",
        "def same(a, b):\n    try:\n        pd.testing.assert_frame_equal(a, b)\n        return True\n"
        "    except (AssertionError, ValueError):\n        return False\nassert same(df, df), 'differs'",
        "check = pd.testing.assert_frame_equal if isinstance(df, pd.DataFrame) else pd.testing.assert_series_equal\n"
        "check(df, df)",
        "assert 'df' in globals()",
    ],
)
def test_read_only_probes_are_accepted(code):
    assert refusal(code) is None


@pytest.mark.parametrize(
    ("code", "reason"),
    [
        ("df.sort_values('a', inplace=True)", "inplace"),
        ("df['a'] = 1", "store into Subscript"),
        ("df.a = 1", "store into Attribute"),
        ("x = values\nx += [1]", "augmented assignment to x"),  # list += mutates in place
        ("x = values.copy()\nx[0]['k'] = 1", "not a fresh local"),  # two levels down: the namespace's object
        ("x = table.get('k')\nx[0] = 1", "not a fresh local"),  # get() returns the stored object itself
        ("x = df\nx['a'] = 1", "not a fresh local"),  # an alias
        ("def f(x):\n    x['a'] = 1\nf(df)", "not a fresh local"),  # a parameter is never fresh
        ("x = df.copy()\nx = df\nx['a'] = 1", "not a fresh local"),  # rebound: no longer fresh
        ("globals()['df']['a'] = 1", "store into Subscript of an expression"),
        ("f = df.to_csv\nf('x.csv')", "call of f"),
        ("while True:\n    pass", "statement While"),
        ("with open('x') as f:\n    pass", "statement With"),
        ("class C:\n    pass", "statement ClassDef"),
        ("@print\ndef f():\n    pass", "decorated function"),
        ("try:\n    pass\nexcept:\n    pass", "could catch the cell timeout"),
        ("del values", "statement Delete"),
        ("values.append(1)", "method append"),
        ("df.to_csv('x.csv')", "method to_csv"),
        ("open('x', 'w')", "call of open"),
        ("exec('1')", "call of exec"),
        ("__import__('os')", "call of __import__"),
        ("import os", "import of os"),
        ("from os import path", "import of os"),
        ("from pandas import *", "import *"),
        ("try:\n    pass\nexcept BaseException:\n    pass", "could catch the cell timeout"),
        ("try:\n    pass\nexcept (ValueError, KeyboardInterrupt):\n    pass", "could catch the cell timeout"),
        ("df['a'].apply(lambda v: v)", "method apply"),
        ("df.merge(df, on='a')", "method merge"),
        ("df.__class__", "private attribute"),
        ("print(1, file=None)", "file="),
        ("print(**table)", "kwargs"),
        ("x = arr.astype(float, copy=False)\nx[0] = 5", "copy="),
        ("np.save('x', arr)", "method save"),
        ("(y := 1)", "expression NamedExpr"),
    ],
)
def test_probes_that_could_change_something_are_refused(code, reason):
    assert reason in (refusal(code) or "")


def test_names_are_judged_by_what_they_hold():
    class Box:  # a user object: its dunders could do anything
        pass

    assert "holds a Box" in refusal("box", {"box": Box()})
    assert "holds a list" in refusal("nested", {"nested": [[Box()]]})
    assert "holds a ndarray" in refusal("a", {"a": np.array([Box()], dtype=object)})
    assert "holds a module" in refusal("os", {"os": __import__("os")})
    assert refusal("subclass", {"subclass": type("L", (list,), {})([1])}) is not None  # exact types only
    assert refusal("len(x)", {"x": [1], "len": lambda v: 0}) == "call of len"  # a shadowed builtin
    assert refusal("huge", {"huge": list(range(inline.MAX_SCANNED + 1))}) is not None


def test_a_name_the_probe_rebinds_is_still_judged_by_the_namespace_value():
    class Box:  # copy() could return itself: the store below would write into the namespace's object
        def copy(self):
            return self

    namespace = {**NAMESPACE, "box": Box(), "check": lambda *a: None}
    assert "holds a Box" in refusal("box = box.copy()\nbox['a'] = 1", namespace)
    assert "holds a function" in refusal("check(df)\ncheck = pd.testing.assert_frame_equal", namespace)
    assert "finally" in refusal("def f():\n    try:\n        pass\n    finally:\n        return 1\nf()")


def test_the_kernel_helper_is_allowed_only_while_its_name_holds_it():
    def print_result(value):
        return value

    namespace = {"print_result": print_result, "rate": 0.5}
    assert inline_refusal(ast.parse("print_result(rate)"), namespace, {"print_result": print_result}) is None
    assert inline_refusal(ast.parse("print_result(rate)"), namespace, {"print_result": object()}) is not None


def test_pandas_before_copy_on_write_turns_inlining_off(monkeypatch):
    monkeypatch.setattr(pd, "__version__", "2.2.3")
    assert "pandas < 3" in refusal("rate")


def test_joins_are_allowed_only_with_allow_joins():
    """A join is pure but can run long inside one C call: callers whose probes repeat the task's own joins opt in."""
    code = "chk = df.merge(df, on='b')\nchk['a_x'] = chk['a_x'] * 2\nassert len(df.join(df, rsuffix='_r')) == 2"
    assert refusal(code) is not None and refusal("df.merge(df, on='b')") == "method merge"
    assert refusal("df.join(df, rsuffix='_r')") == "method join"
    assert inline_refusal(ast.parse(code), NAMESPACE, allow_joins=True) is None  # merge's result is a fresh local
    # the other rules still hold: a join into the namespace's object, or with inplace=, is refused
    assert "not a fresh local" in inline_refusal(ast.parse("df.merge(df)\ndf['a'] = 1"), NAMESPACE, allow_joins=True)
    assert "apply" in inline_refusal(ast.parse("df.merge(df).apply(len)"), NAMESPACE, allow_joins=True)
