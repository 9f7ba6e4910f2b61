"""Checkpoints (fork snapshots, restorable many times) and probes (throwaway forks that cannot change the kernel)."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.sandbox import SandboxError


def test_restore_returns_the_namespace_and_can_be_repeated(kernel):
    kernel.execute("x = [1]")
    cp = kernel.checkpoint()
    kernel.execute("x.append(2)\ny = 3")
    kernel.restore(cp)
    assert kernel.execute("print(x, 'y' in dir())").stdout == "[1] False\n"
    kernel.execute("x.append(9)")
    kernel.restore(cp)
    assert kernel.execute("x").display == "[1]"
    assert cp in kernel.checkpoints


def test_versions_after_restore_match_the_checkpoint_and_are_never_reused(kernel):
    kernel.execute("v = 1")
    cp = kernel.checkpoint()
    assert kernel.execute("v = 2").variables[0].version == 2
    kernel.restore(cp)
    assert kernel.variables()["v"].version == 1
    assert kernel.execute("v = 3").variables[0].version == 3


def test_released_checkpoint_is_gone(kernel):
    cp = kernel.checkpoint()
    kernel.release(cp)
    with pytest.raises(SandboxError, match="unknown checkpoint"):
        kernel.restore(cp)


def test_checkpoint_limit_is_enforced_with_a_clear_error(sandbox, task_dir):
    k = sandbox.new_kernel(task_dir / "public")
    try:
        for _ in range(sandbox.config.max_checkpoints):
            k.checkpoint()
        with pytest.raises(SandboxError, match="max_checkpoints"):
            k.checkpoint()
    finally:
        k.close()


def test_checkpoints_survive_a_cell_that_forks_processes(kernel):
    kernel.execute("a = 1")
    cp = kernel.checkpoint()
    kernel.execute("import subprocess\np = subprocess.Popen(['sleep', '30'])\na = 2")
    kernel.restore(cp)
    assert kernel.execute("a").display == "1"


def test_probe_sees_the_namespace_but_cannot_change_it(kernel):
    kernel.execute("import pandas as pd\ndf = pd.DataFrame({'a': [1, 2, 3]})\nn = 1")
    p = kernel.probe("n = 99\ndf.drop(columns='a', inplace=True)\nprint(df.shape, n)")
    assert p.ok and p.probe and p.stdout == "(3, 0) 99\n"
    assert p.variables == []
    r = kernel.execute("print(df.shape, n)")
    assert r.stdout == "(3, 1) 1\n" and r.variables == []


def test_probe_cannot_write_files(kernel):
    p = kernel.probe("open(f'{WORK_DIR}/probe.txt', 'w').write('x')")
    assert not p.ok and p.error_type == "PermissionError"
    assert not (Path(kernel.workspace) / "probe.txt").exists() and p.files == []


def test_probe_timeout_leaves_the_kernel_alive(kernel):
    kernel.execute("k = 5")
    p = kernel.probe("import signal\nsignal.signal(signal.SIGALRM, signal.SIG_IGN)\nwhile True: pass", timeout=0.5)
    assert not p.ok and p.timed_out and not p.restarted
    assert kernel.execute("k").display == "5"


def test_a_checkpoint_with_nothing_run_since_shares_the_process_and_ids_release_independently(kernel):
    kernel.execute("s = [1]")
    a = kernel.checkpoint()
    b = kernel.checkpoint()
    assert a != b
    assert kernel._checkpoints[a] is kernel._checkpoints[b]  # no second fork
    kernel.probe("s.append(99)")  # the probe ran in (a fork of) the kernel process: a new checkpoint is a new snapshot
    e = kernel.checkpoint()
    assert kernel._checkpoints[e] is not kernel._checkpoints[a]
    kernel.release(e)
    kernel.execute("s.append(2)")
    c = kernel.checkpoint()
    assert kernel._checkpoints[c] is not kernel._checkpoints[a]  # a cell ran: a new snapshot
    kernel.release(a)
    kernel.restore(b)  # still usable after its twin was released
    d = kernel.checkpoint()  # right after a restore: the restored snapshot is shared
    assert kernel._checkpoints[d] is kernel._checkpoints[b]
    assert kernel.execute("s").display == "[1]"
    kernel.execute("s.append(3)")
    kernel.release(b)
    kernel.restore(d)
    assert kernel.execute("s").display == "[1]"
    kernel.restore(c)
    assert kernel.execute("s").display == "[1, 2]"
    for cp in (c, d):
        kernel.release(cp)
    assert a not in kernel.checkpoints and kernel.checkpoints == []


def test_a_checkpoint_is_forked_only_when_the_kernel_process_next_runs_something(kernel):
    forked = kernel._keep_pids  # the checkpoint processes the host holds
    kernel.execute("s = [1]")
    released = kernel.checkpoint()
    assert forked() == []  # deferred: no process yet
    kernel.release(released)  # released before anything ran: never forked
    kept = kernel.checkpoint()
    kernel.restore(kept)  # restoring a deferred checkpoint: the live process already is the snapshot
    assert forked() == []
    kernel.probe("s.append(99)")  # a probe (or a cell, a digest): the checkpoint is forked first
    assert len(forked()) == 1
    kernel.execute("s.append(2)")
    assert len(forked()) == 1
    kernel.restore(kept)
    assert kernel.execute("s").display == "[1]"
    kernel.release(kept)
    assert forked() == []


def test_a_deferred_checkpoint_dies_with_its_kernel_and_says_so(kernel):
    import os
    import signal

    kernel.execute("s = [1]")
    cp = kernel.checkpoint()
    os.kill(kernel._k.host_pid, signal.SIGKILL)  # the kernel dies before the checkpoint was forked
    result = kernel.execute("s")
    assert result.restarted and result.error_type == "KernelDied"
    assert cp not in kernel.checkpoints
    with pytest.raises(SandboxError, match=f"unknown checkpoint '{cp}'"):
        kernel.restore(cp)
    assert kernel.execute("t = 2\nt").display == "2"  # the restarted kernel serves the next request


def test_reset_starts_over_like_a_new_kernel(kernel):
    kernel.execute("a = 1\nopen('out.txt', 'w').write('x')")
    kernel.execute("a = 2")
    kernel.checkpoint()
    kernel.execute("a = 3")  # the deferred checkpoint is forked now
    old_pids = set(kernel._keep_pids())
    assert len(old_pids) == 1
    kernel.reset()
    assert kernel.variables() == {} and kernel.checkpoints == []
    assert not (kernel.workspace / "out.txt").exists()
    result = kernel.execute("print('a' in dir())\na = 5")
    assert result.stdout == "False\n" and result.variables[0].version == 1  # versions start again
    assert kernel.checkpoint() == "cp1"
    assert not old_pids & set(kernel._keep_pids())
    assert kernel.execute("print(a)").stdout == "5\n"


def test_an_id_only_checkpoint_forks_nothing_and_refuses_a_restore(kernel):
    kernel.execute("s = [1]")
    a = kernel.checkpoint(restorable=False)
    kernel.execute("s.append(2)")  # a real deferred checkpoint would be forked here
    assert kernel._keep_pids() == []
    b = kernel.checkpoint()
    assert [a, b] == ["cp1", "cp2"]  # one id sequence for both kinds
    assert kernel._checkpoints[a] is not kernel._checkpoints[b]  # never shared with a restorable one
    with pytest.raises(SandboxError, match=f"checkpoint {a} was taken with restorable=False.*restorable=True"):
        kernel.restore(a)
    assert kernel.execute("s").display == "[1, 2]"  # the refused restore changed nothing
    kernel.release(a)
    assert kernel.checkpoints == [b]
    kernel.execute("s.append(3)")
    kernel.restore(b)  # the restorable one still works
    assert kernel.execute("s").display == "[1, 2]"


def test_id_only_checkpoints_count_against_the_limit(sandbox, task_dir, make_config):
    from harness.sandbox import Sandbox

    with Sandbox(make_config(sandbox.config.isolation, max_checkpoints=2)) as small:
        with small.new_kernel(task_dir / "public") as k:
            k.checkpoint(restorable=False)
            k.checkpoint(restorable=False)
            with pytest.raises(SandboxError, match="max_checkpoints=2"):
                k.checkpoint(restorable=False)


# ---------------------------------------------------------------- inline probes (SandboxConfig.inline_probes)


@pytest.fixture(scope="module")
def inline_sandbox(sandbox, make_config):
    from harness.sandbox import Sandbox

    with Sandbox(make_config(sandbox.config.isolation, inline_probes=True)) as sb:
        yield sb


@pytest.fixture()
def inline_kernel(inline_sandbox, task_dir):
    with inline_sandbox.new_kernel(task_dir / "public") as k:
        k.execute(
            "import pandas as pd\nimport numpy as np\n"
            "df = pd.read_csv(f'{DATA_DIR}/data/sales.csv')\nrates = [0.25, 0.5]\nlimit = 10"
        )
        yield k


def test_a_read_only_probe_runs_inline_with_the_same_result_as_a_forked_one(inline_kernel, kernel):
    kernel.execute(
        "import pandas as pd\nimport numpy as np\n"
        "df = pd.read_csv(f'{DATA_DIR}/data/sales.csv')\nrates = [0.25, 0.5]\nlimit = 10"
    )
    probes = [
        "assert (df['amount'] > 0).all()\nprint(df.groupby('region')['amount'].sum().to_dict())",
        "assert all(abs(v - round(v, 1)) < 1e-9 for v in rates), 'not rounded'",
        "assert df['amount'].max() < limit, f'max {df[\"amount\"].max()} over {limit}'",
        "x = sorted(set(df['region']))\nx",
        "print_result(float(np.round(df['amount'].mean(), 2)))",
    ]
    for code in probes:
        inline, forked = inline_kernel.probe(code), kernel.probe(code)
        for field in ("ok", "stdout", "display", "error_type", "error_message", "traceback", "results"):
            assert getattr(inline, field) == getattr(forked, field), (code, field)
    assert inline_kernel.probe_counts == {"inline": len(probes), "forked": 0}
    assert kernel.probe_counts == {"inline": 0, "forked": len(probes)}  # off by default
    failed = inline_kernel.probe("assert df['amount'].max() < limit, 'too big'")
    assert not failed.ok and failed.error_type == "AssertionError" and failed.error_message == "too big"


def test_an_inline_probe_leaves_the_namespace_and_cell_numbering_untouched(inline_kernel):
    before = inline_kernel.execute("1 / 0")
    p = inline_kernel.probe("x = 5\nlimit = 99\nprint(x + limit)")
    assert p.ok and p.stdout == "104\n" and inline_kernel.probe_counts["inline"] == 1
    after = inline_kernel.execute("print(limit)\n'x' in dir()")
    assert after.stdout == "10\n" and after.display == "False" and after.variables == []
    again = inline_kernel.execute("1 / 0")  # the probe took no cell number: <cell-N> follows on
    number = int(before.traceback.split("<cell-")[1].split(">")[0])
    assert f"<cell-{number + 2}>" in again.traceback


@pytest.mark.parametrize(
    "code",
    [
        "df.sort_values('amount', inplace=True)",  # inplace= mutates
        "df['amount'] = 0",  # a subscript store
        "rates.append(1)",  # a mutating method
        "d = df\nd.loc[0, 'amount'] = 0",  # a store through an alias
        "df.to_csv(f'{WORK_DIR}/x.csv')",  # writes a file
        "open(f'{WORK_DIR}/x.txt', 'w')",  # a builtin that is not allowed
        "import os\nos.getpid()",  # an import
        "df['amount'].apply(lambda v: v)",  # a callable
        "df.__class__",  # a dunder
    ],
)
def test_a_probe_that_could_change_something_is_forked(inline_kernel, code):
    inline_kernel.probe(code)
    assert inline_kernel.probe_counts == {"inline": 0, "forked": 1}
    state = inline_kernel.execute("print(df['amount'].tolist(), rates)\nimport os\nos.listdir(WORK_DIR)")
    assert state.stdout == "[10, 20, 5] [0.25, 0.5]\n" and state.display == "[]"


def test_a_probe_reading_a_user_object_or_a_shadowed_builtin_is_forked(inline_kernel):
    inline_kernel.execute("class Box:\n    def __eq__(self, other):\n        return True\nbox = Box()")
    inline_kernel.probe("assert box == 1")
    inline_kernel.execute("def len(x):\n    return 0")
    inline_kernel.probe("assert len(rates) == 2")
    inline_kernel.execute("nested = {'a': [1, box]}")
    inline_kernel.probe("assert 'a' in nested")
    inline_kernel.execute("def print_result(value):\n    rates.append(value)")  # no longer the kernel's helper
    inline_kernel.probe("print_result(1)")
    assert inline_kernel.probe_counts == {"inline": 0, "forked": 4}
    assert inline_kernel.execute("rates").display == "[0.25, 0.5]"


def test_a_recomputation_probe_runs_inline_and_leaves_no_trace(inline_kernel, kernel):
    """The shape of the synthesis evidence probes: imports, a helper function with try/except, a frame read from the
    task data and written into (a fresh local), a comparison with the namespace. Same result as a forked run; the
    namespace, the files and the frame in the kernel are as before."""
    kernel.execute("import pandas as pd\ndf = pd.read_csv(f'{DATA_DIR}/data/sales.csv')")
    inline_kernel.execute("df = df.copy()")  # the fixture's frame, to compare with the fresh read below
    code = (
        "import pandas as _pd\n"
        "def _same(a, b):\n"
        "    try:\n"
        "        _pd.testing.assert_frame_equal(a, b, check_dtype=False)\n"
        "        return True\n"
        "    except (AssertionError, TypeError, ValueError):\n"
        "        return False\n"
        "chk = _pd.read_csv(f'{DATA_DIR}/data/sales.csv')\n"
        "chk['amount'] = chk['amount'] * 2\n"
        "chk.loc[chk['region'] == 'north', 'region'] = 'N'\n"
        "assert 'df' in globals()\n"
        "assert _same(df, chk), f'df differs from the recomputation: {chk[\"amount\"].tolist()}'\n"
    )
    inline, forked = inline_kernel.probe(code), kernel.probe(code)
    assert inline_kernel.probe_counts == {"inline": 1, "forked": 0}
    assert not inline.ok and inline.error_type == "AssertionError"
    assert inline.error_message == forked.error_message == "df differs from the recomputation: [20, 40, 10]"
    state = inline_kernel.execute(
        "print(df['amount'].tolist(), df['region'].tolist(), '_same' in dir(), 'chk' in dir())"
    )
    assert state.stdout == "[10, 20, 5] ['north', 'south', 'north'] False False\n" and state.variables == []
    assert inline.files == [] and list(Path(inline_kernel.workspace).iterdir()) == []


def test_a_join_probe_runs_inline_only_with_inline_joins(inline_sandbox, sandbox, make_config, task_dir, kernel):
    """``inline_joins`` (synthesis): a recomputation that merges frames runs inline, with the forked result."""
    from harness.sandbox import Sandbox

    setup = "import pandas as pd\ndf = pd.read_csv(f'{DATA_DIR}/data/sales.csv')"
    code = (
        "import pandas as _pd\n"
        "chk = _pd.read_csv(f'{DATA_DIR}/data/sales.csv')\n"
        "zones = chk[['region']].drop_duplicates()\n"
        "zones['zone'] = zones['region'].str.upper()\n"
        "chk = chk.merge(zones, on='region', how='left')\n"
        "chk['amount'] = chk['amount'] * 2\n"
        "assert df['amount'].tolist() == chk['amount'].tolist(), f'zones {chk[\"zone\"].tolist()}'\n"
    )
    kernel.execute(setup)
    forked = kernel.probe(code)
    assert not forked.ok and forked.error_message == "zones ['NORTH', 'SOUTH', 'NORTH']"
    with inline_sandbox.new_kernel(task_dir / "public") as k:  # inline_probes only: a join still forks
        k.execute(setup)
        assert k.probe(code).error_message == forked.error_message
        assert k.probe_counts == {"inline": 0, "forked": 1}
    config = make_config(sandbox.config.isolation, inline_probes=True, inline_joins=True)
    with Sandbox(config) as sb, sb.new_kernel(task_dir / "public") as k:
        k.execute(setup)
        inline = k.probe(code)
        assert k.probe_counts == {"inline": 1, "forked": 0}
        for field in ("ok", "stdout", "error_type", "error_message", "traceback", "results"):
            assert getattr(inline, field) == getattr(forked, field), field
        assert k.execute("print(sorted(dir()))").stdout.count("chk") == 0  # the probe's names are gone


def test_inline_joins_needs_inline_probes():
    from harness.sandbox import SandboxConfig

    with pytest.raises(ValueError, match="inline_joins=true needs inline_probes=true"):
        SandboxConfig(isolation="none", inline_joins=True)
