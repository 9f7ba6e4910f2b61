"""Checkpoints (fork snapshots, restorable many times) and probes (in the clean verifier: they cannot change the
kernel)."""

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
    kernel.probe("s.append(99)")  # a probe runs in the verifier, over exported data: the kernel's state is the same
    e = kernel.checkpoint()
    assert kernel._checkpoints[e] is kernel._checkpoints[a]
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
    def forked():  # the checkpoint processes the host holds
        return [cp.channel.pid for cp in set(kernel._checkpoints.values()) if cp.channel is not None]

    kernel.execute("s = [1]")
    released = kernel.checkpoint()
    assert forked() == []  # deferred: no process yet
    kernel.release(released)  # released before anything ran: never forked
    kept = kernel.checkpoint()
    kernel.restore(kept)  # restoring a deferred checkpoint: the live process already is the snapshot
    assert forked() == []
    kernel.probe("s.append(99)")  # a probe runs nothing in the kernel process: still deferred
    assert forked() == []
    kernel.execute("s.append(2)")  # a cell (or a digest): the checkpoint is forked first
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
