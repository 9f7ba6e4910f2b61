"""Cells, results, predefined names, output capture, variable versions and file tracking (both isolation modes)."""

from __future__ import annotations

import json
from pathlib import Path

from harness.sandbox import ExecutionResult


def test_namespace_persists_and_last_expression_is_displayed(kernel):
    assert kernel.execute("a = 20").ok
    r = kernel.execute("b = a + 1\nb * 2")
    assert r.ok and r.display == "42" and r.stdout == ""


def test_public_data_is_readable_through_data_dir_and_base_path(kernel):
    r = kernel.execute(
        "import pandas as pd\ndf = pd.read_csv(f'{BASE_PATH}/data/sales.csv')\n"
        "assert DATA_DIR == BASE_PATH\nprint(df.amount.sum())"
    )
    assert r.ok, r.traceback
    assert r.stdout == "35\n"


def test_env_vars_and_cwd_match_the_predefined_names(kernel):
    r = kernel.execute("import os\nprint(os.getcwd() == WORK_DIR == os.environ['WORK_DIR'], os.environ['DATA_DIR'])")
    assert r.stdout.split() == ["True", kernel.data_dir]


def test_user_error_is_a_result_with_a_traceback_of_the_cell_only(kernel):
    r = kernel.execute("x = 1\ndef f():\n    return 1 / 0\nf()")
    assert not r.ok and r.error_type == "ZeroDivisionError"
    assert "<cell-" in r.traceback and "line 3" in r.traceback and "runtime" not in r.traceback
    assert kernel.execute("x").display == "1"


def test_syntax_error_is_reported(kernel):
    r = kernel.execute("def (:")
    assert not r.ok and r.error_type == "SyntaxError"


def test_print_result_records_json_values(kernel):
    r = kernel.execute(
        "import numpy as np, pandas as pd\n"
        "print_result(np.int64(3))\nprint_result(pd.Series([1.5, float('nan')], index=['a', 'b']))\n"
        "print_result(pd.DataFrame({'x': [1, 2]}))"
    )
    assert r.ok, r.traceback
    assert r.results == [3, {"a": 1.5, "b": None}, {"columns": ["x"], "index": [0, 1], "data": [[1], [2]]}]
    assert r.stdout.startswith("3\n")
    json.dumps(r.to_dict())


def test_stdout_stderr_and_fd_level_output_are_captured(kernel):
    r = kernel.execute(
        "import sys, os, subprocess\nprint('out')\nprint('err', file=sys.stderr)\n"
        "os.write(1, b'fd1\\n')\nsubprocess.run(['echo', 'child'])"
    )
    assert r.ok, r.traceback
    assert r.stdout == "out\nfd1\nchild\n" and r.stderr == "err\n"


def test_variable_versions_created_changed_deleted(kernel):
    r1 = kernel.execute("import pandas as pd\ndf = pd.DataFrame({'a': [1, 2, None]})\nlst = []")
    assert {(c.name, c.kind, c.version) for c in r1.variables} == {("df", "created", 1), ("lst", "created", 1)}
    r2 = kernel.execute("df.dropna(inplace=True)")
    assert [(c.name, c.kind, c.version, c.shape) for c in r2.variables] == [("df", "changed", 2, [2, 1])]
    r3 = kernel.execute("lst.append(1)\ndf['b'] = 0")
    assert sorted((c.name, c.version) for c in r3.variables) == [("df", 3), ("lst", 2)]
    assert kernel.execute("print(len(df))").variables == []  # reading is not a change
    r4 = kernel.execute("del lst")
    assert [(c.name, c.kind, c.version) for c in r4.variables] == [("lst", "deleted", 3)]
    assert set(kernel.variables()) == {"df"} and kernel.variables()["df"].version == 3
    assert kernel.execute("lst = 5").variables[0].version == 4  # versions are never reused


def test_harness_names_modules_and_underscores_are_not_tracked(kernel):
    r = kernel.execute("import math\nfrom os import path\n_hidden = 1\ndef helper():\n    return 1")
    assert [c.name for c in r.variables] == ["helper"]


def test_files_created_changed_deleted_are_reported(kernel):
    r1 = kernel.execute(
        "open('a.txt', 'w').write('1')\nimport os\nos.makedirs('d', exist_ok=True)\nopen('d/b.txt', 'w').write('2')"
    )
    assert [(f.path, f.kind) for f in r1.files] == [("a.txt", "created"), ("d", "created"), ("d/b.txt", "created")]
    r2 = kernel.execute("open('a.txt', 'a').write('more')\nos.remove('d/b.txt')")
    assert [(f.path, f.kind) for f in r2.files] == [("a.txt", "changed"), ("d/b.txt", "deleted")]
    assert (Path(kernel.workspace) / "a.txt").read_text() == "1more"


def test_output_is_capped_with_a_marker(kernel):
    r = kernel.execute("print('x' * 300_000)")
    assert r.ok and r.output_truncated
    assert len(r.stdout.encode()) < 100_000 + 200
    assert "output truncated: 200001 bytes omitted" in r.stdout


def test_interrupted_cell_keeps_the_kernel_and_its_state(kernel):
    kernel.execute("keep = 'me'")
    r = kernel.execute("while True:\n    pass", timeout=0.5)
    assert r.timed_out and not r.restarted and r.error_type == "CellTimeout"
    assert kernel.execute("keep").display == "'me'"


def test_result_round_trips_through_json(kernel):
    r = kernel.execute("z = [1, 2]\nz")
    data = json.loads(json.dumps(r.to_dict()))
    assert data["display"] == "[1, 2]" and data["variables"][0]["name"] == "z"
    assert isinstance(r, ExecutionResult)
