"""Variable tracking, in-process (no sandbox): what counts as created / changed / deleted, and what it costs."""

from __future__ import annotations

import ast

import numpy as np
import pandas as pd
import pytest

from harness.sandbox.runtime import variable_tracker
from harness.sandbox.runtime.variable_tracker import VariableTracker, analyse_cell


class Session:
    def __init__(self) -> None:
        self.ns: dict = {"__name__": "__main__"}
        self.tracker = VariableTracker(set())

    def run(self, code: str) -> dict[str, str]:
        tree = ast.parse(code)
        names = analyse_cell(tree, self.ns)
        suspects = self.tracker.before_cell(self.ns, names)
        exec(compile(tree, "<cell>", "exec"), self.ns)
        return {c["name"]: c["kind"] for c in self.tracker.after_cell(self.ns, names, suspects)}


@pytest.fixture()
def s() -> Session:
    return Session()


def test_created_changed_deleted(s):
    assert s.run("a = 1\nb = [1]") == {"a": "created", "b": "created"}
    assert s.run("a = 2") == {"a": "changed"}
    assert s.run("del a") == {"a": "deleted"}


def test_rebinding_an_equal_scalar_is_not_a_change(s):
    s.run("n = 500")
    assert s.run("n = 500") == {}
    assert s.run("n = 500.0") == {"n": "changed"}


@pytest.mark.filterwarnings("ignore::DeprecationWarning", "ignore::FutureWarning")
@pytest.mark.parametrize(
    "mutation",
    [
        "df['x'] = 1",
        "df.dropna(inplace=True)",
        "df.loc[0, 'a'] = 99.0",
        "df.loc[df.a > 2, 'a'] = 0.0",
        "df.insert(0, 'z', 1)",
        "df.sort_values('a', inplace=True)",
    ],
)
def test_in_place_dataframe_mutations_are_changes(s, mutation):
    s.run("import pandas as pd\ndf = pd.DataFrame({'a': [3.0, None, 1.0]})")
    assert s.run(mutation) == {"df": "changed"}


@pytest.mark.parametrize("mutation", ["lst.append(1)", "lst[0] = 5", "lst += [2]", "lst.sort()", "d.update(k=2)"])
def test_container_mutations_are_changes(s, mutation):
    s.run("lst = [3, 1]\nd = {'k': 1}")
    changed = s.run(mutation)
    assert set(changed.values()) == {"changed"} and len(changed) == 1


def test_mutation_through_a_user_function_is_seen(s):
    s.run("import pandas as pd\ndf = pd.DataFrame({'a': [1, 2]})\ndef bump():\n    df.loc[0, 'a'] = 100")
    assert s.run("bump()") == {"df": "changed"}


def test_mutation_of_an_argument_is_seen_by_the_content_hash(s):
    s.run("import numpy as np\narr = np.zeros(5)\ndef fill(x):\n    x[2] = 7")
    assert s.run("fill(arr)") == {"arr": "changed"}
    assert s.run("fill(arr)") == {}  # same value again: no change


def test_aliases_change_together(s):
    s.run("a = [1]\nb = a")
    assert s.run("b.append(2)") == {"a": "changed", "b": "changed"}


def test_reading_is_not_a_change(s):
    s.run("import pandas as pd\ndf = pd.DataFrame({'a': [1, 2]})\nlst = [1]")
    assert s.run("m = df.a.mean()\nprint(len(lst), df.head())") == {"m": "created"}


def test_modules_imported_callables_and_underscores_are_ignored(s):
    assert s.run("import os\nfrom math import sqrt\nfrom pandas import DataFrame\n_x = 1\ndef mine():\n    pass") == {
        "mine": "created"
    }


def test_untouched_big_frame_is_never_hashed(s, monkeypatch):
    s.ns["big"] = pd.DataFrame({"a": np.arange(1_000_000), "b": np.random.default_rng(0).random(1_000_000)})
    s.run("import numpy as np")
    calls = []
    real = variable_tracker.content_fingerprint
    monkeypatch.setattr(
        variable_tracker, "content_fingerprint", lambda obj, depth=0: calls.append(obj) or real(obj, depth)
    )
    assert s.run("x = 1\ny = len(big)\nbig.describe()") == {"x": "created", "y": "created"}
    assert calls == []
    s.run("z = np.asarray(big['b']).sum()")  # big passed to an unknown function: hashed before and after
    assert any(obj is s.ns["big"] for obj in calls)


def test_content_fingerprint_sees_value_edits_in_frames_and_object_columns():
    df = pd.DataFrame({"a": np.arange(10.0), "s": [f"v{i}" for i in range(10)]})
    before = variable_tracker.content_fingerprint(df)
    df.iloc[5, 0] = -1.0
    after_num = variable_tracker.content_fingerprint(df)
    df.iloc[3, 1] = "changed"
    after_str = variable_tracker.content_fingerprint(df)
    assert before != after_num != after_str


def test_summary_and_shape_are_short():
    df = pd.DataFrame({f"c{i}": range(3) for i in range(20)})
    assert variable_tracker.summarize(df).startswith("DataFrame 3x20 columns=[c0, c1")
    assert len(variable_tracker.summarize(list(range(10_000)))) <= 160
    assert variable_tracker.shape_of(df) == [3, 20] and variable_tracker.shape_of([1, 2]) == [2]
    assert variable_tracker.shape_of(1) is None


def test_content_fingerprint_handles_datetime_and_timedelta_columns():
    frame = pd.DataFrame({"d": pd.to_datetime(["2025-01-01", "2025-02-01"]), "x": [1, 2]})
    frame["gap"] = frame["d"] - frame["d"].min()
    content_fingerprint = variable_tracker.content_fingerprint
    before = content_fingerprint(frame)
    assert content_fingerprint(frame.copy()) == before  # same content, same fingerprint
    frame.loc[1, "d"] = pd.Timestamp("2025-03-01")
    assert content_fingerprint(frame) != before
    index_fp = content_fingerprint(pd.DatetimeIndex(["2025-01-01"]))
    assert index_fp != content_fingerprint(pd.DatetimeIndex(["2025-01-02"]))


def test_a_rebinding_is_a_change_even_when_the_new_object_could_reuse_the_old_id(s):
    """Rebinding frees the old object mid-cell, and CPython hands its address (its ``id``) to the next object of the
    same size: the tracker must not take "same id, same shape" for "untouched" on a name the cell rebound."""
    rebind = "old = id(x)\nx = None\nx = [4, 5, 6]\nsame_id = id(x) == old\ndel old"
    plain: dict = {}
    exec("x = [1, 2, 3]", plain)
    exec(rebind, plain)
    assert plain["same_id"] is True  # without the tracker the new list takes the freed list's slot
    s.run("import pandas as pd\nx = [1, 2, 3]\nframe = pd.DataFrame({'a': [1.0, 2.0]})")
    assert s.run(rebind)["x"] == "changed"
    assert s.run("x = x\nframe = frame") == {}  # the very same objects rebound: no change
