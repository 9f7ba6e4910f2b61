"""The manager's read-only tools: AST inspection, syntax checks, executor-record checks, probes, constraints and
committed-state lookup. Probe tests use one real sandbox per module (bwrap where installed, else isolation none)."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from harness.manager.tools import (
    ExecutedStep,
    ToolResult,
    check_constraint,
    check_execution,
    check_outcome,
    compile_python,
    inspect_python,
    load_state,
    normalise_code,
    run_check,
    run_probe,
)
from harness.sandbox import ExecutionResult, Kernel, Sandbox, SandboxConfig, VariableChange

ISOLATION = "bwrap" if shutil.which("bwrap") else "none"


@pytest.fixture(scope="module")
def sandbox() -> Iterator[Sandbox]:
    config = SandboxConfig(isolation=ISOLATION, cell_timeout_s=5.0, grace_s=1.0, memory_mb=1024)
    with Sandbox(config) as sb:
        yield sb


@pytest.fixture(scope="module")
def public_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("task") / "public"
    (root / "data").mkdir(parents=True)
    rows = "\n".join(f"{i},{i * 10}" for i in range(1, 31))  # x = 10, 20, ..., 300
    (root / "data" / "t.csv").write_text("id,x\n" + rows + "\n")
    return root


@pytest.fixture()
def kernel(sandbox: Sandbox, public_dir: Path) -> Iterator[Kernel]:
    k = sandbox.new_kernel(public_dir)
    setup = k.execute("import pandas as pd\ndf = pd.read_csv(f'{DATA_DIR}/data/t.csv')\nshare = 1 / 3")
    assert setup.ok, setup.error_message
    yield k
    k.close()


# ---- ToolResult -----------------------------------------------------------------------------------------------------
def test_render_is_one_json_object_with_ok_error_and_content():
    assert json.loads(ToolResult(True, {"a": [1]}).render()) == {"ok": True, "a": [1]}
    assert json.loads(ToolResult(False, {}, "bad").render()) == {"ok": False, "error": "bad"}
    assert json.loads(ToolResult(True, {"ok": False, "n": 1}).render()) == {"ok": True, "n": 1}


# ---- inspect_python -------------------------------------------------------------------------------------------------
ANALYSIS = """\
import pandas as pd
from os import path as osp
df = pd.read_csv(f'{DATA_DIR}/data/sales.csv')
df['y'] = df.x * 2
big = df[df.x > 100]
share = round(big.y.sum() / df.y.sum(), 2)
total += 1
for i, row in df.iterrows():
    pass
with open('out.txt', 'w') as fh:
    fh.write(str(share))
def f(a, b=3):
    c = a + b + share
    return c
squares = [k * k for k in range(10)]
squares.append(5)
df.dropna(inplace=True)
df.groupby('region').amount.sum().to_csv('agg.csv')
del big
"""


def test_inspect_reports_reads_writes_imports_and_calls():
    r = inspect_python(ANALYSIS)
    assert r.ok and r.error is None
    c = r.content
    assert c["writes"] == ["pd", "osp", "df", "big", "share", "total", "i", "row", "fh", "f", "squares"]
    # builtins (round, open, str, range) are not reads; locals of f and the comprehension are not module names
    assert c["reads"] == ["pd", "DATA_DIR", "df", "big", "total", "fh", "share", "squares"]
    assert c["inputs"] == ["DATA_DIR", "total"]  # everything else is written by the code before it is read
    assert c["deletes"] == ["big"]
    assert c["imports"] == ["pandas", "os"]
    assert {"pd.read_csv", "round", "df.iterrows", "df.dropna", "df.groupby", "df.groupby().amount.sum"} <= set(
        c["calls"]
    )
    assert c["files_read"] == ["{DATA_DIR}/data/sales.csv"]
    assert c["files_written"] == ["out.txt", "agg.csv"]
    json.dumps(c)  # JSON-serialisable


def test_inspect_reports_thresholds_and_rounding_with_their_context():
    constants = inspect_python(ANALYSIS).content["constants"]
    assert {"value": 100, "line": 5, "context": "df.x > 100"} in constants
    assert {"value": 2, "line": 6, "context": "round(big.y.sum() / df.y.sum(), 2)"} in constants
    assert {"value": "y", "line": 4, "context": "df['y']"} in constants
    assert {"value": 3, "line": 12, "context": "def f(a, b=3):"} in constants


def test_inspect_subscript_and_attribute_stores_write_the_root_variable():
    c = inspect_python("df.loc[df.a > 0, 'b'] = 1\nobj.attr.x = y").content
    assert c["writes"] == ["df", "obj"]
    assert c["reads"] == ["df", "y", "obj"]
    assert c["inputs"] == ["df", "y", "obj"]


def test_inspect_inputs_are_names_read_before_the_code_writes_them():
    c = inspect_python(
        "n = len(df)\ndf = df[df.x > -5]\ntry:\n    r = n / m\nexcept ZeroDivisionError as err:\n    r = 0"
    ).content
    assert c["inputs"] == ["df", "m"]
    assert c["writes"] == ["n", "df", "r", "err"]
    assert {"value": -5, "line": 2, "context": "df.x > -5"} in c["constants"]


def test_inspect_caps_long_lists():
    code = "\n".join(f"v{i} = f{i}({i} + 0.5)" for i in range(150))
    c = inspect_python(code).content
    assert c["writes"] == [f"v{i}" for i in range(100)] and c["writes_omitted"] == 50
    assert len(c["constants"]) == 40 and c["constants"][0] == {"value": 0, "line": 1, "context": "0 + 0.5"}
    assert c["constants_omitted"] == 2 * 150 - 40  # two numbers per line


def test_inspect_ignores_docstrings_and_bool_none_constants():
    c = inspect_python('"""Doc."""\nx = None\nflag = True\n').content
    assert c["constants"] == []
    assert c["writes"] == ["x", "flag"]


def test_inspect_syntax_error_is_not_ok_and_locates_the_error():
    r = inspect_python("x = 1\ny = (2 +\n")
    assert not r.ok
    assert r.content["line"] == 2 and r.content["column"] == 5
    assert "line 2" in r.error


@pytest.mark.parametrize("bad", [None, 12, "", "   \n"])
def test_inspect_bad_argument_gives_a_precise_error(bad):
    r = inspect_python(bad)
    assert not r.ok and "code" in r.error


# ---- compile_python -------------------------------------------------------------------------------------------------
def test_compile_valid_code():
    assert compile_python("x = 1\nprint(x)\n").content == {"valid": True, "lines": 2, "warnings": []}


def test_compile_reports_compiler_warnings():
    r = compile_python("x = 1\nif x is 1:\n    pass\n")
    assert r.content["valid"] is True
    [warning] = r.content["warnings"]  # the wording differs between Python versions
    assert warning["line"] == 2 and warning["message"].startswith('"is" with')
    assert 'Did you mean "=="' in warning["message"]


def test_compile_reports_line_column_message_and_offending_line():
    r = compile_python("a = 1\nif a > 0:\nprint(a)\n")
    assert r.ok and r.content["valid"] is False
    assert r.content["line"] == 3 and r.content["column"] == 1
    assert r.content["text"] == "print(a)"
    assert "indented block" in r.content["message"]


def test_compile_catches_errors_only_the_compiler_sees():
    r = compile_python("x = 1\nreturn x")
    assert r.content["valid"] is False and r.content["line"] == 2 and "outside function" in r.content["message"]


# ---- check_execution ------------------------------------------------------------------------------------------------
def _step(step_id: int, code: str, ok: bool = True, error_type: str | None = None) -> ExecutedStep:
    result = ExecutionResult(
        ok=ok,
        stdout="x" * 5000 + "tail\n",
        error_type=error_type,
        error_message="boom" if error_type else None,
        results=[{"n": 3}],
        variables=[VariableChange("big", "created", 1, "DataFrame", [3, 2], "DataFrame 3x2")],
    )
    return ExecutedStep.from_result(step_id, code, result)


LOG = {
    1: _step(1, "big = df[df.x > 100]\nprint(len(big))"),
    2: _step(2, "ratio = big.y.sum() / 0", ok=False, error_type="ZeroDivisionError"),
}


def test_from_result_keeps_a_compact_record():
    step = LOG[1]
    assert step.stdout_tail.endswith("tail\n") and len(step.stdout_tail) < 1100
    assert step.variables == [
        {
            "name": "big",
            "kind": "created",
            "version": 1,
            "type": "DataFrame",
            "shape": [3, 2],
            "summary": "DataFrame 3x2",
        }
    ]


def test_check_execution_verifies_a_matching_successful_step_up_to_whitespace():
    r = check_execution(1, "  big = df[df.x > 100]   \n\n  print(len(big))\n", LOG)
    assert r.ok
    assert r.content["verdict"] == "verified" and r.content["code_matches"] is True and r.content["ran_ok"] is True
    assert r.content["results"] == [{"n": 3}] and r.content["variables"][0]["name"] == "big"


def test_check_execution_reports_a_short_diff_when_the_claim_differs():
    r = check_execution("1", "big = df[df.x > 50]\nprint(len(big))", LOG)
    assert r.ok and r.content["verdict"] == "code_mismatch" and r.content["code_matches"] is False
    assert r.content["diff"] == ["@@ -1 +1 @@", "-big = df[df.x > 100]", "+big = df[df.x > 50]"]


def test_check_execution_reports_a_failed_step():
    r = check_execution(2, "ratio = big.y.sum() / 0", LOG)
    assert r.ok and r.content["verdict"] == "failed" and r.content["ran_ok"] is False
    assert r.content["error_type"] == "ZeroDivisionError" and r.content["error_message"] == "boom"


def test_check_execution_without_a_claim_skips_the_code_comparison():
    r = check_execution(1, None, LOG)
    assert r.content["code_matches"] is None and r.content["verdict"] == "verified"


def test_check_execution_unknown_step_lists_the_executed_ids():
    r = check_execution(7, "x = 1", LOG)
    assert not r.ok and "no executed step with id 7" in r.error and "1, 2" in r.error
    assert r.content["known_step_ids"] == [1, 2]
    many = {i: LOG[1] for i in range(30)}
    r = check_execution(99, None, many)
    assert r.error.endswith("executed step ids: " + ", ".join(map(str, range(10, 30))) + " (the newest 20 of 30).")
    assert r.content["known_step_ids"] == list(range(10, 30))


@pytest.mark.parametrize("bad", [True, 1.5, "one", None])
def test_check_execution_rejects_a_non_integer_step_id(bad):
    r = check_execution(bad, "x = 1", LOG)
    assert not r.ok and "step_id" in r.error


def test_normalise_code_ignores_indent_blank_lines_and_trailing_spaces():
    assert normalise_code("\n    a = 1  \r\n\n    if a:\n        b = 2\n") == ["a = 1", "if a:", "    b = 2"]


# ---- run_probe / check_constraint -----------------------------------------------------------------------------------
def test_probe_reveals_the_true_count_behind_a_filter_threshold(kernel):
    kernel.execute("big = df[df.x > 150]")  # the worker claims 'x > 100' gave 20 rows
    claimed = run_probe(kernel, "len(df[df.x > 100])")
    actual = run_probe(kernel, "print(len(big))")
    assert claimed.ok and claimed.content["display"] == "20" and claimed.content["succeeded"] is True
    assert actual.content["stdout"] == "15\n"


def test_probe_assignments_do_not_leak_into_the_kernel(kernel):
    r = run_probe(kernel, "df = None\nshare = 99\nnew_name = 1\nprint_result({'share': share})")
    assert r.ok and r.content["results"] == [{"share": 99}]
    after = kernel.execute("print(type(df).__name__, share, 'new_name' in dir())")
    assert after.stdout == "DataFrame 0.3333333333333333 False\n"


def test_probe_error_is_a_successful_call_with_the_error(kernel):
    r = run_probe(kernel, "df['missing_column']")
    assert r.ok and r.content["succeeded"] is False and r.content["error_type"] == "KeyError"


def test_looping_probe_is_stopped_and_the_kernel_still_works(kernel):
    r = run_probe(kernel, "while True:\n    pass", timeout_s=0.5)
    assert r.ok and r.content["timed_out"] is True and r.content["succeeded"] is False
    assert "kernel_restarted" not in r.content
    assert kernel.execute("len(df)").display == "30"


def test_probe_stdout_is_capped(kernel):
    r = run_probe(kernel, "print('a' * 10_000)")
    assert r.content["stdout"].startswith("a" * 2000) and "chars omitted" in r.content["stdout"]
    assert len(r.content["stdout"]) < 2100


@pytest.mark.parametrize("timeout_s", [0, -1, 1000, "5"])
def test_probe_rejects_a_bad_timeout(kernel, timeout_s):
    r = run_probe(kernel, "1", timeout_s=timeout_s)
    assert not r.ok and "timeout_s" in r.error


def test_probe_on_a_closed_kernel_is_a_clear_error(sandbox, public_dir):
    k = sandbox.new_kernel(public_dir)
    k.close()
    r = run_probe(k, "1")
    assert not r.ok and "closed" in r.error


def test_failed_rounding_assert_reports_the_line_and_operand_values(kernel):
    r = check_constraint(kernel, "assert round(share, 2) == share")
    assert r.ok and r.content["passed"] is False and r.content["error_type"] == "AssertionError"
    assert r.content["failed_line"] == "assert round(share, 2) == share"
    assert r.content["values"] == {"round(share, 2)": "0.33", "share": "0.3333333333333333"}


def test_assert_message_is_reported(kernel):
    r = check_constraint(kernel, "n = len(df)\nassert n == 10, f'expected 10 rows, got {n}'")
    assert r.content["passed"] is False and "expected 10 rows, got 30" in r.content["reason"]
    assert r.content["values"] == {"n": "30"}


@pytest.mark.parametrize(
    ("code", "passed"),
    [
        ("(df.x > 0).all()", True),
        ("(df.x > 100).all()", False),
        ("print(len(df) == 30)", True),
        ("print(share > 1)", False),
        ("assert df.x.min() == 10", True),
        ("len(df)", True),  # not a bool: passes because it ran
        ("df.nope", False),
    ],
)
def test_constraint_passes_only_when_it_runs_and_is_not_false(kernel, code, passed):
    r = check_constraint(kernel, code)
    assert r.ok and r.content["passed"] is passed, r.content


def test_constraint_that_times_out_fails(kernel):
    r = check_constraint(kernel, "import time\ntime.sleep(10)", timeout_s=0.3)
    assert r.content["passed"] is False and r.content["reason"] == "timed out before finishing"


# ---- load_state -----------------------------------------------------------------------------------------------------
COMMITTED = {f"S{i}": {"id": f"S{i}", "issue": f"issue {i}", "conclusions": [f"c{i}"]} for i in range(1, 26)}


def test_load_state_returns_the_committed_state():
    r = load_state("S3", COMMITTED)
    assert r.ok and r.content == {"state_id": "S3", "state": COMMITTED["S3"]}


def test_load_state_unknown_id_lists_at_most_20_known_ids():
    r = load_state("S99", COMMITTED)
    assert not r.ok and "S99" in r.error and "(and 5 more)" in r.error
    assert r.content["known_state_ids"] == [f"S{i}" for i in range(1, 21)]


@pytest.mark.parametrize("bad", [None, "", 3.5])
def test_load_state_rejects_a_bad_id(bad):
    r = load_state(bad, COMMITTED)
    assert not r.ok and "state_id" in r.error


def test_inspect_in_place_methods_and_augmented_subscripts_write_their_receiver():
    c = inspect_python("rows.append(1)\ndf.dropna(inplace=True)\ntotals['a'] += 2\nout = df.add(1)").content
    assert c["writes"] == ["rows", "df", "totals", "out"]  # df.add returns a new frame: it is a read of df
    assert c["reads"] == ["rows", "df", "totals"]
    assert c["inputs"] == ["rows", "df", "totals"]


def test_step_record_from_a_real_kernel_run_checks_out(kernel):
    code = "big = df[df.x > 100]\nprint_result(len(big))"
    step = ExecutedStep.from_result(4, code, kernel.execute(code))
    r = check_execution(4, code, {4: step})
    assert r.content["verdict"] == "verified" and r.content["results"] == [20]
    assert [(v["name"], v["kind"], v["shape"]) for v in r.content["variables"]] == [("big", "created", [20, 2])]
    bad = ExecutedStep.from_result(5, "big.nope", kernel.execute("big.nope"))
    r = check_execution(5, "big.nope", {5: bad})
    assert r.content["verdict"] == "failed" and r.content["error_type"] == "AttributeError"


def test_check_execution_caps_the_variable_list():
    changes = [VariableChange(f"v{i}", "created", 1, "int", None, str(i)) for i in range(45)]
    step = ExecutedStep.from_result(1, "x", ExecutionResult(ok=True, variables=changes))
    r = check_execution(1, None, {1: step})
    assert [v["name"] for v in r.content["variables"]] == [f"v{i}" for i in range(30)]
    assert r.content["variables_omitted"] == 15


def test_timed_out_step_is_failed():
    step = ExecutedStep.from_result(1, "x", ExecutionResult(ok=False, timed_out=True, error_type="CellTimeout"))
    assert check_execution(1, "x", {1: step}).content["verdict"] == "failed"
    # a replayed record that says ok but carries a timeout or an error is not trusted as a success
    for bad in ({"timed_out": True}, {"error_type": "KeyError"}):
        step = ExecutedStep.from_dict({"step_id": 1, "code": "x", "ok": True, **bad})
        assert check_execution(1, "x", {1: step}).content["verdict"] == "failed"


def test_probe_that_swallows_the_interrupt_is_killed_without_touching_the_kernel(kernel):
    code = "import time\nwhile True:\n    try:\n        time.sleep(5)\n    except BaseException:\n        pass"
    r = run_probe(kernel, code, timeout_s=0.3)
    assert r.ok and r.content["timed_out"] is True and "kernel_restarted" not in r.content
    assert kernel.execute("print(len(df), share)").stdout == "30 0.3333333333333333\n"


def test_probe_error_names_the_line(kernel):
    r = run_probe(kernel, "a = 1\nb = df['nope']\n")
    assert r.content["error_type"] == "KeyError" and r.content["error_line"] == 2
    kernel.execute("def boom():\n    x = 1\n    raise ValueError('inside a worker function')")
    r = run_probe(kernel, "a = 1\nboom()")  # a worker's function is not data: it never runs for a probe
    assert r.content["error_type"] == "NameError" and "boom" in r.content["unavailable"]


def test_pathologically_nested_code_is_an_error_not_an_exception():
    code = "x = " + "+".join(["1"] * 200_000)
    r = inspect_python(code)
    assert not r.ok and "split" in r.error
    assert not compile_python(code).ok
    assert compile_python("x = 1\x00").content["valid"] is False


@pytest.mark.parametrize(
    ("code", "values"),
    [
        ("import math\nassert math.isclose(share, 0.3, rel_tol=0.01)", {"share": "0.3333333333333333"}),
        ("assert not df.x.is_unique or len(df) > 99", {"not df.x.is_unique": "False", "len(df) > 99": "False"}),
        ("assert df.x.is_monotonic_decreasing", {"df.x.is_monotonic_decreasing": "False"}),
    ],
)
def test_failed_assert_shows_the_values_of_its_parts(kernel, code, values):
    r = check_constraint(kernel, code)
    assert r.content["passed"] is False and r.content["reason"] == "raised AssertionError: (no message)"
    assert r.content["values"] == values


def test_executed_step_round_trips_through_json_and_rejects_bad_records():
    step = LOG[2]
    assert ExecutedStep.from_dict(json.loads(json.dumps(step.to_dict()))) == step
    with pytest.raises(ValueError, match=r"missing fields \['ok'\], unknown fields \[\]"):
        ExecutedStep.from_dict({"step_id": 1, "code": "x"})
    with pytest.raises(ValueError, match=r"missing fields \[\], unknown fields \['colour'\]"):
        ExecutedStep.from_dict({"step_id": 1, "code": "x", "ok": True, "colour": "red"})
    with pytest.raises(ValueError, match="expected a mapping, got list"):
        ExecutedStep.from_dict([1])
    with pytest.raises(ValueError, match="step_id must be an int"):
        ExecutedStep.from_dict({"step_id": "1", "code": "x", "ok": True})


FRAGMENTS = [
    "x",
    "df",
    " = ",
    "[",
    "]",
    "(",
    ")",
    "'a'",
    "1",
    ".",
    ":",
    "\n",
    "    ",
    "for ",
    " in ",
    "def ",
    "lambda ",
]


@settings(max_examples=200, deadline=None)
@given(st.one_of(st.text(max_size=60), st.lists(st.sampled_from(FRAGMENTS), max_size=25).map("".join)))
def test_ast_tools_never_raise_and_return_json(code):
    for tool in (inspect_python, compile_python):
        r = tool(code)
        assert isinstance(r.ok, bool) and (r.ok or r.error)
        json.loads(r.render())


def test_rendered_results_stay_compact_however_much_a_step_printed():
    big = ExecutionResult(ok=True, stdout="line\n" * 100_000, results=[list(range(1000))] * 5)
    step = ExecutedStep.from_result(1, "print(...)", big)
    text = check_execution(1, None, {1: step}).render()
    assert len(text) < 3 * 1024
    assert json.loads(text)["results"] == [{"truncated": True, "omitted_results": 5}]


# ---- run_check ------------------------------------------------------------------------------------------------------
def test_run_check_passes_fails_cannot_run_or_refuses_a_malformed_spec(kernel):
    passed = run_check(kernel, {"kind": "share", "variable": "share"})
    assert passed.ok and passed.content["passed"] is True and passed.content["reason"] is None
    assert passed.content["kind"] == "share" and passed.content["variable"] == "share"
    assert "share" in passed.content["requirement"] and passed.content["unavailable"] == {}

    failed = run_check(
        kernel, {"kind": "filter", "variable": "df", "source": "df", "column": "x", "op": ">", "value": 100}
    )
    assert failed.ok and failed.content["passed"] is False and failed.content["error_type"] is None
    assert "30 rows" in failed.content["reason"] and "20 rows" in failed.content["reason"]  # found vs required

    missing = run_check(kernel, {"kind": "share", "variable": "nope"})
    assert missing.ok and missing.content["passed"] is None and missing.content["error_type"] == "NameError"

    malformed = run_check(kernel, {"kind": "top_k", "variable": "df", "source": "df", "k": 0, "order": "largest"})
    assert not malformed.ok and malformed.error == "top_k.k=0 is out of range; use an integer in [1, 1000]"


def test_a_check_that_timed_out_or_reads_no_data_has_no_verdict():
    timed_out = check_outcome(ExecutionResult(ok=False, error_type="AssertionError", timed_out=True))
    assert timed_out["passed"] is None and timed_out["error_type"] == "TimeoutError" and timed_out["reason"] is None
    exported = ExecutionResult(ok=False, error_type="NameError", error_message="x", unavailable={"m": "module"})
    assert check_outcome(exported) == {
        "passed": None, "reason": None, "error_type": "NameError", "error_message": "x", "unavailable": {"m": "module"}
    }  # fmt: skip
