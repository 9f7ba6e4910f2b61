import json

import pytest

from harness.jsonl import (
    append_jsonl,
    dumps,
    iter_jsonl,
    json_depth_error,
    loads_untrusted,
    read_jsonl_resumable,
    too_deep,
)


class MyError(ValueError):
    pass


def test_yields_values_with_their_line_and_skips_blank_lines(tmp_path):
    path = tmp_path / "x.jsonl"
    path.write_text('{"a": 1}\n\n[2]\n"s"\n')
    assert list(iter_jsonl(path)) == [(f"{path}:1", {"a": 1}), (f"{path}:3", [2]), (f"{path}:4", "s")]


def test_a_bad_line_raises_the_callers_error_naming_the_line(tmp_path):
    path = tmp_path / "x.jsonl"
    path.write_text('{"a": 1}\n{"a": \n')
    with pytest.raises(MyError, match=r"x.jsonl:2: not JSON \(Expecting value at column 7\)"):
        list(iter_jsonl(path, error=MyError))


def test_lone_surrogates_are_written_and_read_back_as_escape_text(tmp_path):
    """A lone surrogate (a model's ``\\udc00`` escape, decoded) made a record unwritable; it is now its escape text,
    through every writer and reader, and a file written elsewhere with the JSON escape reads the same way."""
    value = {"raw": "x\udc00y", "\ud800key": ["\udfff"], "ok": "é😀"}
    expected = {"raw": "x\\udc00y", "\\ud800key": ["\\udfff"], "ok": "é😀"}
    path = tmp_path / "x.jsonl"
    append_jsonl(path, value)
    append_jsonl(path, json.dumps(value, ensure_ascii=False))  # JSON text made elsewhere
    (tmp_path / "old.jsonl").write_text(json.dumps(value) + "\n")  # an ASCII writer: "\udc00" JSON escapes
    read = [v for _, v in iter_jsonl(path)] + [v for _, v in iter_jsonl(tmp_path / "old.jsonl")]
    assert read == [expected] * 3
    assert json.loads(dumps(expected)) == expected  # a second write and read changes nothing
    assert read_jsonl_resumable(path) == [expected] * 2


def test_untrusted_json_refuses_deep_nesting_and_long_integers_with_a_value_error():
    assert loads_untrusted('{"a": ["[[[", {"b": 1}]}') == {"a": ["[[[", {"b": 1}]}  # brackets in strings
    assert json_depth_error("[" * 100 + "]" * 100) is None and json_depth_error("[" * 101) == 100
    assert json_depth_error('{"a": 1} [[[[', 0, 1) is None  # the scan stops where the first value closes
    with pytest.raises(ValueError, match="JSON nested deeper than 100 levels"):
        loads_untrusted("[" * 100_000 + "]" * 100_000)
    with pytest.raises(ValueError, match="4300 digits"):
        loads_untrusted("1" * 5000)
    assert too_deep([[[1]]], 2) and not too_deep([[[1]]], 3)
