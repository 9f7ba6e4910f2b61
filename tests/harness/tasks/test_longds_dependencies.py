"""The deterministic dependency parser of the LongDS importer: every accepted form and the tricky negatives."""

from __future__ import annotations

import pytest

from harness.tasks.importers.dependencies import (
    code_comments,
    infer_dependencies,
    infer_relation,
    referenced_numbers,
)

EARLIER = [str(i) for i in range(1, 20)]  # turns 1..19 come before the current turn 20

# (comment text, referenced numbers)
FORMS = [
    ("reuse the cleaned frame from Task 3", [3]),
    ("Tasks 1, 8, and 9", [1, 8, 9]),
    ("Tasks 1, 8 and 9", [1, 8, 9]),
    ("tasks 4 & 6", [4, 6]),
    ("Task 14/17", [14, 17]),
    ("Tasks 2-4", [2, 3, 4]),
    ("Tasks 2--4", [2, 3, 4]),
    ("Tasks 2–4", [2, 3, 4]),
    ("Tasks 5 to 7", [5, 6, 7]),
    ("from T3", [3]),
    ("(T3)", [3]),
    ("(T3, T5)", [3, 5]),
    ("see T12 for the ratio", [12]),
    ("TASK #4 result", [4]),
    ("Task 3 and Task 5", [3, 5]),
    ("Task 3's threshold", [3]),
    ("as in Task 3.", [3]),
    # negatives
    ("Tasks like these need care", []),
    ("the 3 tasks above", []),
    ("subtask 2 of the pipeline", []),
    ("T2 statistic of Hotelling", []),
    ("a t3 instance", []),
    ("multitask 4", []),
    ("Task: compute the mean", []),
    ("Task 2024-01 release notes", []),  # reversed range: ignored, not expanded
    ("Tasks 1-5000", []),  # absurdly long range: ignored
    ("FT3 column", []),
]


@pytest.mark.parametrize(("text", "numbers"), FORMS, ids=[f[0] for f in FORMS])
def test_referenced_numbers(text, numbers):
    assert referenced_numbers(text) == numbers


@pytest.mark.parametrize(
    ("code", "turn_id", "earlier", "expected"),
    [
        ("x = df  # from Task 3\n", "4", ["1", "2", "3"], ("3",)),
        ("# Tasks 3, 1\nx = 1", "4", ["1", "2", "3"], ("1", "3")),  # turn order, not mention order
        ("# Task 4: this turn itself\n", "4", ["1", "2", "3"], ()),  # self-reference excluded
        ("# Task 6 will reuse this\n", "4", ["1", "2", "3"], ()),  # later turn excluded
        ("# Task 99\n", "4", ["1", "2", "3"], ()),  # unknown turn excluded
        ("s = 'Task 2'  # plain comment\n", "4", ["1", "2", "3"], ()),  # strings are not comments
        ('"""Task 2 in a docstring"""\n', "4", ["1", "2", "3"], ()),
        ("# Tasks 1-3\n", "4", ["1", "2", "3"], ("1", "2", "3")),
        ("# (T2)\nif x:\n  y = (\n", "4", ["1", "2", "3"], ("2",)),  # code that does not tokenize still parses
    ],
)
def test_infer_dependencies(code, turn_id, earlier, expected):
    assert infer_dependencies(code, turn_id, earlier) == expected


def test_code_comments_only():
    code = "a = '# not a comment'  # real one\n# second\n"
    assert code_comments(code) == [" real one", " second"]


@pytest.mark.parametrize(
    ("deps", "earlier", "relation"),
    [
        ((), [], "init"),
        ((), ["1", "2"], "init"),
        (("2",), ["1", "2"], "progress"),
        (("1",), ["1", "2"], "branch"),
        (("1", "2"), ["1", "2"], "combine"),
    ],
)
def test_infer_relation(deps, earlier, relation):
    assert infer_relation(deps, earlier) == relation


def test_all_earlier_turns_numbered_19_are_reachable():
    assert infer_dependencies("# Tasks 17-19\n", "20", EARLIER) == ("17", "18", "19")
