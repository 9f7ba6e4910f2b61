import pytest

from harness.jsonl import iter_jsonl


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
