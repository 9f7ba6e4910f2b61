from __future__ import annotations

import math

import numpy as np
import pandas as pd

from harness.sandbox.runtime.output import CappedStream, join_capped, to_jsonable


def test_capped_stream_keeps_the_head_and_counts_the_rest():
    s = CappedStream(10, "<stdout>")
    s.write("12345")
    s.write("67890abc")
    s.write("é")
    text, omitted = s.take()
    assert text == "1234567890" and omitted == 3 + 2
    assert s.take() == ("", 0)


def test_join_capped_adds_the_marker():
    text, truncated = join_capped([("abc", 4), ("de", 0)], 100)
    assert truncated and text.startswith("abcde") and "4 bytes omitted" in text
    assert join_capped([("ok", 0)], 100) == ("ok", False)


def test_to_jsonable_converts_numpy_and_pandas():
    assert to_jsonable(np.float64(1.5)) == 1.5
    assert to_jsonable(np.int32(7)) == 7 and isinstance(to_jsonable(np.int32(7)), int)
    assert to_jsonable(float("nan")) is None and to_jsonable(-math.inf) == "-inf"
    assert to_jsonable(np.array([[1, 2], [3, 4]])) == [[1, 2], [3, 4]]
    assert to_jsonable(pd.Timestamp("2024-01-02")) == "2024-01-02T00:00:00"
    assert to_jsonable(pd.Series([1, 2], index=["a", "b"])) == {"a": 1, "b": 2}
    frame = to_jsonable(pd.DataFrame({"x": [1.0, None]}))
    assert frame == {"columns": ["x"], "index": [0, 1], "data": [[1.0], [None]]}


def test_to_jsonable_truncates_big_values():
    out = to_jsonable(list(range(5000)), max_items=10)
    assert out[:10] == list(range(10)) and out[-1] == "..."
    big = to_jsonable(pd.DataFrame({"a": range(5000)}), max_items=100)
    assert len(big["data"]) == 100 and big["truncated_rows"] == 4900
