"""Probe verdicts come from the clean verifier over exported data: worker code cannot forge them or change state.

Each tampering test gives the verdict that is true of the data; on the old design (the probe ran in a fork of the
worker's kernel, or inline in it) each gave the verdict the worker chose."""

from __future__ import annotations

import pytest

SETUP = "import pandas as pd, numpy as np, sys, math, builtins\ndf = pd.DataFrame({'a': [1.0, 2.0], 's': ['x', None]})"


@pytest.fixture()
def k(kernel):
    assert kernel.execute(SETUP).ok
    return kernel


def test_a_patched_run_cell_cannot_make_a_failing_constraint_pass(k):
    k.execute(
        "K = sys.modules['sg_runtime.kernel'].KernelRuntime\n_run = K.run_cell\n"
        "K.run_cell = lambda self, code, *a, **kw: _run(self, 'None', *a, **kw)"
    )
    r = k.probe("assert len(df) == 3")
    assert not r.ok and "KernelRuntime.run_cell" in r.unavailable["df"]


@pytest.mark.parametrize(
    "patch",
    [
        "pd.DataFrame.sum = lambda self, *a, **kw: pd.Series({'a': 10.0})",
        "pd.DataFrame.__len__.__code__ = (lambda self: 3).__code__",
        "builtins.round = lambda x, n=None: 3.0",
    ],
)
def test_patched_library_methods_or_builtins_cannot_forge_a_verdict(k, patch):
    assert k.execute(f"cat = df.assign(c=pd.Categorical(['u', 'v']))\n{patch}").ok
    r = k.probe("assert len(cat) == 3 and cat.sum()['a'] == 10.0")  # the checked path: not read at all
    assert not r.ok and r.error_type == "NameError" and "modified" in r.unavailable["cat"]
    r = k.probe(
        "assert len(df) == 3 and df.sum()['a'] == 10.0"
    )  # the fast path runs no library code: the true verdict
    if patch.startswith("builtins"):  # the runtime's own integrity check covers builtins on every path
        assert not r.ok and r.error_type == "NameError" and "modified builtins" in r.unavailable["df"]
    else:
        assert not r.ok and r.error_type == "AssertionError" and not r.unavailable


def test_a_patched_module_the_check_imports_is_clean_in_the_verifier(k):
    k.execute("math.isclose = lambda *a, **kw: True\nshare = 0.3")
    r = k.probe("assert math.isclose(share, 0.5)")
    assert not r.ok and r.error_type == "AssertionError"


def test_lying_objects_cross_as_their_data_or_not_at_all(k):
    k.execute(
        "class Liar(float):\n    def __eq__(self, other): return True\n    __hash__ = float.__hash__\n"
        "share = Liar(0.3)\n"
        "class Sub(pd.DataFrame):\n    def __len__(self): return 3\n"
        "sub = Sub({'a': [1.0, 2.0]})\n"
        "class Boom:\n    def __reduce__(self): return (print, ('pwned',))\n"
        "boom = Boom()"
    )
    assert k.probe("assert share == 0.5").error_type == "AssertionError"
    r = k.probe("assert len(sub) == 3")
    assert r.error_type == "AssertionError" and "DataFrame subclass) crossed as its data" in r.stderr
    r = k.probe("boom")
    assert (
        r.error_type == "NameError" and "Boom object is not data" in r.unavailable["boom"] and "pwned" not in r.stdout
    )


def test_data_round_trips_and_deleted_or_renamed_variables_are_missing(k):
    k.execute("arr = np.arange(6).reshape(2, 3)\nmeta = {'n': 2, 'tags': ('a', None), 'x': float('nan')}")
    r = k.probe("print_result([df.shape, df['s'].isna().sum(), arr.sum(), meta['tags'], math.isnan(meta['x'])])")
    assert r.ok and r.results == [[[2, 2], 1, 15, ["a", None], True]]
    k.execute("frame = df\ndel df")
    r = k.probe("len(df)")
    assert r.error_type == "NameError" and "'df' is not defined" in r.error_message
    assert k.probe("len(frame)").display == "2"


@pytest.mark.parametrize(
    "probe",
    [
        "for df.loc[0, 'a'] in [999.0]: pass",
        "[0 for df.loc[0, 'a'] in [999.0]]",
        "(lst := lst.append(4))",
        "setattr(df, 'attrs', {'x': 1}); df.__setitem__('a', 0.0)",
        "df.drop(columns='a', inplace=True); lst.append(4); d['k'] = 2",
    ],
)
def test_no_probe_changes_the_kernel_state(k, probe):
    k.execute("lst = [1]\nd = {'k': 1}")
    k.probe(probe)
    r = k.execute("print(df['a'].tolist(), lst, d, df.attrs)")
    assert r.stdout == "[1.0, 2.0] [1] {'k': 1} {}\n"


@pytest.mark.parametrize(
    ("first", "then"),
    [
        ("z = 5", "z"),
        ("import math; math.pi = 3", "import math; assert math.pi > 3.14"),
        ("builtins.len = lambda x: 0", "assert len([1, 2]) == 2"),
        ("df.loc[0, 'a'] = 99.0", "assert df['a'].tolist() == [1.0, 2.0]"),
    ],
)
def test_no_check_state_reaches_the_next_check(k, first, then):
    k.probe(first)  # its own verdict does not matter (patching len breaks the check's own process)
    r = k.probe(then)
    if then == "z":  # bound by the first check only: the next one does not see it
        assert not r.ok and r.error_type == "NameError"
    else:
        assert r.ok, r.error_message


@pytest.mark.parametrize(
    ("code", "timed_out", "message"),
    [
        ("import os; os._exit(3)", False, "exited with status 3"),
        ("while True: pass", True, ""),
        ("import signal; signal.signal(signal.SIGALRM, signal.SIG_IGN)\nwhile True: pass", True, "deadline"),
    ],
)
def test_a_check_that_dies_or_hangs_fails_and_the_next_one_works(k, code, timed_out, message):
    r = k.probe(code, timeout=0.3)
    assert not r.ok and r.timed_out == timed_out and message in (r.error_message or "")
    assert k.probe("assert df['a'].sum() == 3.0").ok


COUNT_CHILDREN = """
import os, time
def live_children(parent):
    found = []
    for pid in filter(str.isdigit, os.listdir('/proc')):
        try:
            stat = open(f'/proc/{pid}/stat').read()
        except OSError:
            continue
        state, ppid = stat[stat.rindex(')') + 2 :].split()[:2]
        if int(ppid) == parent and state not in 'ZX':
            found.append(pid)
    return found
deadline = time.monotonic() + 3
while live_children(VPID) and time.monotonic() < deadline:
    time.sleep(0.05)
print(len(live_children(VPID)))
"""


def test_many_checks_in_a_row_leave_no_process_behind(k):
    for i in range(20):
        r = k.probe(f"import os; os.fork() if {i} % 5 == 0 else None\nassert len(df) == 2")
        assert r.ok, r.error_message
    vpid = k._probes.verifier.pid  # as seen inside the episode, where the kernel lists /proc
    r = k.execute(COUNT_CHILDREN.replace("VPID", str(vpid)))
    assert r.ok and r.stdout == "0\n", (r.stdout, r.error_message)


def test_builtin_values_and_modules_cross_without_the_library_scan(k):
    """A tree of builtin values and a module run no numpy/pandas/pyarrow code when exported, so a patched pandas
    does not make them unavailable; a numpy scalar still needs the scan and is refused naming the patch."""
    k.execute("meta = {'n': 2, 'tags': ['a', None]}\nscalar = np.float64(2.5)\npd.DataFrame.sum = lambda self: 0")
    r = k.probe("assert meta['n'] == 2 and meta['tags'] == ['a', None] and math.floor(2.5) == 2")
    assert r.ok and r.unavailable == {}
    r = k.probe("scalar")
    assert not r.ok and "DataFrame.sum" in r.unavailable["scalar"]
