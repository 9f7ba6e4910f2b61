"""Adversarial cells: one property per test, each followed by a normal cell that must still work (in the same
kernel when it survives, else in the restarted one, whose result reports the restart)."""

from __future__ import annotations

import ast
import os
import time
import uuid
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]


def assert_still_works(kernel, *, restarted: bool = False) -> None:
    r = kernel.execute(
        "import pandas as pd\nprobe_df = pd.DataFrame({'a': [1, 2]})\nprint(probe_df.a.sum())\n"
        "open('alive.txt', 'w').write('ok')"
    )
    assert r.ok and r.stdout == "3\n", r.traceback
    assert (Path(kernel.workspace) / "alive.txt").read_text() == "ok"
    if not restarted:
        assert kernel.execute("marker").display == "'before'"


@pytest.fixture()
def marked(kernel):
    assert kernel.execute("marker = 'before'").ok
    return kernel


def test_cannot_read_private_answers(marked, task_dir):
    r = marked.execute(f"print(open({str(task_dir / 'private' / 'answer.txt')!r}).read())\n")
    r2 = marked.execute("print(open(DATA_DIR + '/../private/answer.txt').read())")
    assert not r.ok and not r2.ok and "42" not in r.stdout + r2.stdout
    assert r.error_type in ("FileNotFoundError", "PermissionError")
    assert_still_works(marked)


def test_cannot_read_a_host_file_under_root(marked):
    secret_dir = Path("/root") if os.access("/root", os.W_OK) else Path.home()
    secret = secret_dir / f".stateguard-test-{uuid.uuid4().hex}"
    secret.write_text("host secret")
    try:
        r = marked.execute(f"print(open({str(secret)!r}).read())")
        assert not r.ok and "host secret" not in r.stdout
    finally:
        secret.unlink()
    assert_still_works(marked)


def test_cannot_read_the_repository_source(marked):
    r = marked.execute(f"print(open({str(REPO / 'harness' / '__init__.py')!r}).read())")
    assert not r.ok and "StateGuard" not in r.stdout
    assert_still_works(marked)


def test_cannot_write_outside_the_workspace(marked, task_dir):
    targets = ["/usr/evil.txt", f"{task_dir / 'public' / 'evil.txt'}", "/evil.txt", f"{REPO / 'evil.txt'}"]
    code = (
        "hits = []\n"
        + "".join(
            f"try:\n    open({t!r}, 'w').write('x'); hits.append({t!r})\nexcept OSError:\n    pass\n" for t in targets
        )
        + "print(hits)"
    )
    r = marked.execute(code)
    assert r.ok, r.traceback
    # The kernel's own /tmp is a private, writable tmpfs: a path there (e.g. a repo cloned under /tmp) is not the
    # host's file. Everything else must fail inside, and no target may appear on the host.
    hits = ast.literal_eval(r.stdout)
    assert [h for h in hits if not h.startswith("/tmp/")] == []
    assert not any(Path(t).exists() for t in targets)
    assert_still_works(marked)


def test_cannot_write_into_the_public_data_mount(marked, task_dir):
    r = marked.execute("open(f'{DATA_DIR}/data/sales.csv', 'a').write('evil')")
    assert not r.ok and "evil" not in (task_dir / "public" / "data" / "sales.csv").read_text()
    assert_still_works(marked)


def test_no_network(marked):
    r = marked.execute("import socket\nsocket.create_connection(('1.1.1.1', 53), timeout=2)")
    assert not r.ok and r.error_type in ("PermissionError", "OSError", "TimeoutError", "ConnectionRefusedError")
    assert_still_works(marked)


def test_fork_bomb_is_contained(marked):
    r = marked.execute("import os\nwhile True:\n    os.fork()", timeout=5)
    assert not r.ok
    assert_still_works(marked, restarted=r.restarted)


def test_memory_limit_raises_memory_error(marked):
    r = marked.execute("import numpy as np\nbig = np.ones((40_000, 40_000))")
    assert not r.ok and r.memory_exceeded and not r.restarted
    assert_still_works(marked)


def test_infinite_loop_is_interrupted(marked):
    r = marked.execute("while True:\n    pass", timeout=0.5)
    assert r.timed_out and not r.restarted
    assert_still_works(marked)


def test_loop_that_ignores_the_interrupt_gets_the_kernel_restarted(marked):
    r = marked.execute(
        "import signal\nfor s in (signal.SIGALRM, signal.SIGXCPU, signal.SIGINT):\n"
        "    signal.signal(s, signal.SIG_IGN)\nwhile True:\n    pass",
        timeout=0.5,
    )
    assert r.timed_out and r.restarted and "restarted" in r.restart_reason
    assert {c.name for c in r.variables if c.kind == "deleted"} == {"marker"}
    assert_still_works(marked, restarted=True)


def test_printing_100_mb_is_truncated_quickly(marked):
    r = marked.execute("print('x' * 100_000_000)")
    assert r.ok and r.output_truncated and len(r.stdout) < 200_000
    assert "bytes omitted" in r.stdout and r.duration_s < 10
    assert_still_works(marked)


def test_killing_the_parent_process_does_not_hurt(marked):
    r = marked.execute("import os\nos.kill(os.getppid(), 9)")
    assert not r.restarted
    assert_still_works(marked)


def test_after_a_restore_killing_the_parent_spares_the_snapshot(marked):
    """A restore forks once and swaps roles: the checkpoint process becomes the kernel, its child parks as the
    snapshot. The kernel's parent is then the episode init (its old parent, the replaced kernel, is gone), so
    killing it does nothing, and the snapshot still restores (again and again)."""
    marked.execute("s = [1]")
    cp = marked.checkpoint()
    marked.execute("s.append(2)")
    snapshot = marked._checkpoints[cp].channel.pid
    marked.restore(cp)
    moved = marked._checkpoints[cp].channel.pid
    assert moved != snapshot and marked._k.pid == snapshot  # the parked process became the kernel
    code = (
        "import os, time\ntime.sleep(0.2)\n"
        "try:\n    os.kill(os.getppid(), 9)\nexcept OSError:\n    pass\nprint(os.getppid())"
    )
    r = marked.execute(code)
    assert r.ok and not r.restarted and int(r.stdout) not in (moved, snapshot)
    marked.execute("s.append(3)")
    for _ in range(2):
        marked.restore(cp)
        assert marked.execute("s").display == "[1]"
    marked.release(cp)
    assert_still_works(marked)


def test_killing_everything_reachable_does_not_hurt_the_sandbox(marked, sandbox, task_dir):
    other = sandbox.new_kernel(task_dir / "public")
    try:
        other.execute("mine = 1")
        r = marked.execute(
            "import os, signal\ntry:\n    os.kill(-1, signal.SIGKILL)\nexcept OSError:\n    pass\n"
            "for p in os.listdir('/proc'):\n    if p.isdigit() and int(p) != os.getpid():\n"
            "        try:\n            os.kill(int(p), signal.SIGKILL)\n"
            "        except OSError:\n            pass"
        )
        assert not r.restarted
        assert other.execute("mine").display == "1" and other.restarts == 0
    finally:
        other.close()
    assert_still_works(marked)


def test_deleting_the_workspace(marked):
    r = marked.execute("import shutil\nopen('f.txt', 'w').write('x')\nshutil.rmtree(WORK_DIR, ignore_errors=True)")
    assert r.ok
    assert Path(marked.workspace).is_dir()
    assert_still_works(marked)


def test_sys_exit_is_an_error_not_an_exit(marked):
    r = marked.execute("import sys\nsys.exit(3)")
    assert not r.ok and r.error_type == "SystemExit" and not r.restarted
    assert_still_works(marked)


def test_os_exit_restarts_the_kernel(marked):
    r = marked.execute("import os\nos._exit(0)")
    assert not r.ok and r.restarted and r.error_type == "KernelDied"
    assert_still_works(marked, restarted=True)


def test_segfault_restarts_the_kernel_and_says_why(marked):
    r = marked.execute("import ctypes\nctypes.string_at(0)")
    assert r.restarted and "SIGSEGV" in r.restart_reason
    assert_still_works(marked, restarted=True)


def test_garbage_on_the_channel_is_treated_as_a_crash(marked):
    r = marked.execute(
        "import os\nfor fd in range(3, 64):\n    try:\n        os.write(fd, b'\\xff' * 64)\n"
        "    except OSError:\n        pass"
    )
    # Either the kernel's own channel was hit (crash + restart) or nothing reachable was (still fine).
    assert_still_works(marked, restarted=r.restarted)


def _host_tree(pid: int) -> list[int]:
    out, stack = [], [pid]
    while stack:
        current = stack.pop()
        out.append(current)
        for tid in os.listdir(f"/proc/{current}/task"):
            with open(f"/proc/{current}/task/{tid}/children") as fh:
                stack.extend(int(x) for x in fh.read().split())
    return out


def test_cannot_kill_the_zygote(marked, sandbox, task_dir):
    targets = _host_tree(sandbox._zygote.pid)  # bwrap (or the zygote itself) and everything below it, host pids
    r = marked.execute(
        f"import os\nkilled = []\nfor p in set({targets!r}) - {{os.getpid()}}:\n"
        "    try:\n        os.kill(p, 9); killed.append(p)\n    except OSError:\n        pass\nprint(killed)"
    )
    assert r.ok and r.stdout == "[]\n" and sandbox._zygote.poll() is None
    fresh = sandbox.new_kernel(task_dir / "public")
    assert fresh.execute("1 + 1").display == "2"
    fresh.close()
    assert_still_works(marked, restarted=r.restarted)


def test_other_kernels_and_the_zygote_survive_abuse(sandbox, task_dir, marked):
    other = sandbox.new_kernel(task_dir / "public")
    try:
        other.execute("kept = 7")
        marked.execute("import ctypes\nctypes.string_at(0)")
        marked.execute("import os\nwhile True:\n    os.fork()", timeout=2)
        assert other.execute("kept").display == "7" and other.restarts == 0
        fresh = sandbox.new_kernel(task_dir / "public")  # the zygote still forks kernels
        assert fresh.execute("1 + 1").display == "2"
        fresh.close()
    finally:
        other.close()


SURROGATE = "b'caf\\xe9'.decode('utf8', 'surrogateescape')"


def test_a_lone_surrogate_in_any_output_is_escaped_and_the_kernel_keeps_its_state(marked):
    escaped = "caf\\udce9"  # what errors="backslashreplace" writes
    cells = {
        f"print({SURROGATE})": lambda r: r.stdout == escaped + "\n",
        f"import sys\nprint({SURROGATE}, file=sys.stderr)": lambda r: r.stderr == escaped + "\n",
        f"raise ValueError({SURROGATE})": lambda r: r.error_message == escaped and escaped in r.traceback,
        f"print_result({SURROGATE})": lambda r: r.results == [escaped],
        f"s = {SURROGATE}\ns": lambda r: r.display == f"'{escaped}'" and escaped in r.variables[0].summary,
    }
    for code, check in cells.items():
        r = marked.execute(code)
        assert not r.restarted and check(r), (code, r)
        assert marked.execute("marker").display == "'before'"
    p = marked.probe(f"print({SURROGATE})")
    assert p.ok and p.stdout == escaped + "\n"
    assert_still_works(marked)


THREAD_CELL = (  # a thread that bumps n, logs the time and appends to a file every 10 ms, forever
    "import threading, time\nn, stamps = 0, []\ndef bump():\n    global n\n    while True:\n        n += 1\n"
    "        stamps.append(time.time())\n        open('ticks.txt', 'a').write('x')\n        time.sleep(0.01)\n"
    "threading.Thread(target=bump, name='bumper', daemon=True).start()\ntime.sleep(0.05)"
)


def test_a_thread_left_running_is_stopped_and_named_when_its_cell_ends(marked):
    r = marked.execute(THREAD_CELL)
    assert r.ok and not r.restarted, r.traceback
    assert "stopped 1 thread(s)" in r.stderr and "'bumper' at <cell-" in r.stderr
    ticks = Path(marked.workspace) / "ticks.txt"
    n, size = marked.execute("n").display, ticks.stat().st_size
    time.sleep(0.1)
    assert marked.execute("n").display == n and ticks.stat().st_size == size
    assert marked.execute("import threading\nthreading.active_count()").display == "1"
    assert_still_works(marked)


def test_a_thread_that_cannot_be_stopped_restarts_the_kernel_and_says_why(marked):
    r = marked.execute("import _thread, time\n_thread.start_new_thread(time.sleep, (60,))")  # no Python frame
    assert r.restarted and r.error_type == "ThreadNotStopped"
    assert "could not be stopped" in r.restart_reason and "no Python frame" in r.restart_reason
    assert_still_works(marked, restarted=True)


def test_a_checkpoint_is_the_state_at_the_call_even_with_a_thread_started_before(marked):
    r = marked.execute(THREAD_CELL)
    assert r.ok and "stopped 1 thread(s)" in r.stderr, r.traceback
    taken = time.time()
    cp = marked.checkpoint()  # deferred: forked when the next cell comes, 0.1 s later
    time.sleep(0.1)
    marked.execute("stamps.append('later')\nn = -1")
    marked.restore(cp)
    at_call = f"n == len(stamps) > 0 and all(isinstance(s, float) and s < {taken!r} for s in stamps)"
    assert marked.execute(at_call).display == "True"
    assert_still_works(marked)


def test_a_probe_cannot_write_through_a_shared_memory_mapping(marked):
    r = marked.execute(
        "import mmap, numpy as np\nanon = mmap.mmap(-1, 16)\nanon[:5] = b'hello'\n"
        "view = np.frombuffer(anon, np.uint8)\n"
        "fh = open('shared.bin', 'w+b')\nfh.write(b'0' * 16)\nfh.flush()\nfile_map = mmap.mmap(fh.fileno(), 16)"
    )
    assert r.ok, r.traceback
    p = marked.probe("anon[:5] = b'HACKD'\nfile_map[:1] = b'X'")  # mappings are not data: they never cross
    assert not p.ok and set(p.unavailable) == {"anon", "file_map"}
    p = marked.probe("view[:1] = 72\nprint(bytes(view[:5]))")  # an array over a mapping crosses as a copy
    assert p.ok and p.stdout == "b'Hello'\n", p.traceback or p.error_message
    r = marked.execute("print(bytes(anon[:5]), bytes(view[:1]), bytes(file_map[:2]))")
    assert r.stdout == "b'hello' b'h' b'00'\n"
    assert (Path(marked.workspace) / "shared.bin").read_bytes() == b"0" * 16
    assert_still_works(marked)
