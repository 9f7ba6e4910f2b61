"""Sandbox lifecycle: refusing to run without isolation, the isolation-none warning, zygote recovery, workspaces."""

from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from harness.sandbox import Sandbox, SandboxError, SandboxUnavailableError

REPO = Path(__file__).resolve().parents[3]


def test_missing_bubblewrap_refuses_to_run_and_says_how_to_fix_it(make_config):
    with pytest.raises(SandboxUnavailableError, match="isolation: none"):
        Sandbox(make_config("bwrap", bwrap_path="/nonexistent/bwrap"))


def test_isolation_none_warns_loudly(caplog, task_dir, make_config):
    with caplog.at_level(logging.WARNING), Sandbox(make_config("none")) as sb:
        assert sb.execute_once("print(6 * 7)", task_dir / "public").stdout == "42\n"
    assert any("ISOLATION DISABLED" in rec.getMessage() for rec in caplog.records)


def test_zygote_death_is_recovered_and_existing_kernels_report_it_honestly(isolation, task_dir, make_config):
    with Sandbox(make_config(isolation)) as sb:
        k = sb.new_kernel(task_dir / "public")
        k.execute("a = 1")
        os.killpg(sb._zygote.pid, signal.SIGKILL)  # simulate a crash of the zygote (and of bwrap)
        sb._zygote.wait()
        fresh = sb.new_kernel(task_dir / "public")
        assert fresh.execute("2 + 2").display == "4"
        r = k.execute("a")
        if isolation == "bwrap":  # kernels live in the zygote's PID namespace and die with it
            assert r.restarted and r.error_type == "KernelDied"
        else:
            assert r.display == "1"
        assert k.execute("3").display == "3"


def test_bad_arguments_are_reported(sandbox, task_dir, tmp_path):
    with pytest.raises(ValueError, match="not an existing directory"):
        sandbox.new_kernel(tmp_path / "missing")
    (tmp_path / "file").write_text("x")
    with pytest.raises(ValueError, match="not a directory"):
        sandbox.new_kernel(task_dir / "public", workspace=tmp_path / "file")


def test_given_workspace_is_used_and_kept_after_close(sandbox, task_dir, tmp_path):
    ws = tmp_path / "ws"
    k = sandbox.new_kernel(task_dir / "public", workspace=ws)
    assert k.execute("open('out.csv', 'w').write('a\\n1\\n')").ok
    k.close()
    assert (ws / "out.csv").read_text() == "a\n1\n"
    with pytest.raises(SandboxError, match="closed"):
        k.execute("1")


def test_temporary_workspace_is_removed_on_close(sandbox, task_dir):
    k = sandbox.new_kernel(task_dir / "public")
    ws = Path(k.workspace)
    k.execute("open('x', 'w').write('1')")
    k.close()
    assert not ws.exists()


def test_kernels_do_not_see_each_other(sandbox, task_dir):
    a, b = sandbox.new_kernel(task_dir / "public"), sandbox.new_kernel(task_dir / "public")
    try:
        a.execute("open('/tmp/shared.txt', 'w').write('a')\nopen('mine.txt', 'w').write('a')")
        r = b.execute(
            f"import os\nprint(os.path.exists('/tmp/shared.txt'))\n"
            f"open({str(Path(a.workspace) / 'mine.txt')!r}).read()"
        )
        assert r.stdout == "False\n" and r.error_type in ("FileNotFoundError", "PermissionError")
    finally:
        a.close()
        b.close()


def test_bench_script_smoke(isolation):
    out = subprocess.run(
        [
            sys.executable,
            str(REPO / "scripts" / "bench_sandbox.py"),
            "--n",
            "2",
            "--isolation",
            isolation,
            "--no-ipykernel",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=REPO,
    )
    assert out.returncode == 0, out.stderr
    metrics = json.loads(out.stdout.strip().splitlines()[-1])
    for key in ("cell_ms_p50", "kernel_start_ms_p50", "checkpoint_ms_p50", "probe_ms_p50", "spec_filter_cold_ms_p50"):
        assert isinstance(metrics[key], float) and metrics[key] > 0
    assert {"ipykernel_cell_ms_p50", "speedup_vs_ipykernel"} <= set(metrics)
    assert metrics["ipykernel_cell_ms_p50"] is None and metrics["isolation"] == isolation


def test_read_only_binds_under_tmp_survive_the_episode_tmp(isolation, task_dir, make_config, tmp_path):
    # A clone (and its .venv) may live under /tmp, which every episode replaces with a fresh tmpfs: the
    # interpreter's directories and extra read-only binds must still be visible inside the kernel.
    lib = tmp_path / "sitelib"
    lib.mkdir()
    (lib / "tmp_bound_module.py").write_text("VALUE = 42\n")
    assert str(lib).startswith("/tmp/")
    with Sandbox(make_config(isolation, extra_ro_binds=[str(lib)])) as sb:
        k = sb.new_kernel(task_dir / "public")
        r = k.execute(f"import sys\nsys.path.insert(0, {str(lib)!r})\nimport tmp_bound_module\ntmp_bound_module.VALUE")
        assert r.ok, r.traceback
        assert r.display == "42"
        w = k.execute(f"open({str(lib / 'x.txt')!r}, 'w').write('no')")
        assert not w.ok  # read-only inside
        assert k.execute("print('still fine')").stdout == "still fine\n"
