"""A sandbox killed with ``kill -9`` leaves its temporary folder; the next sandbox started removes it, and never a
folder whose owner still runs."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

from harness.sandbox import Sandbox, SandboxConfig
from harness.sandbox.sandbox import OWNER_FILE, TMP_PREFIX, owner_stamp, remove_orphaned_tmp_roots

ISOLATION = "bwrap" if shutil.which("bwrap") else "none"
ROOT = Path(__file__).resolve().parents[2]
HOLD = """
import sys, time
from harness.sandbox import Sandbox, SandboxConfig
box = Sandbox(SandboxConfig(isolation=sys.argv[1]))
kernel = box.new_kernel(sys.argv[2])
print(box._tmp_root, flush=True)
time.sleep(120)
"""


def fake_root(parent: Path, stamp: str) -> Path:
    folder = Path(tempfile.mkdtemp(prefix=TMP_PREFIX, dir=parent))
    (folder / OWNER_FILE).write_text(stamp)
    (folder / "ws-x").mkdir()
    return folder


def test_only_folders_of_gone_owners_are_removed(tmp_path):
    mine = fake_root(tmp_path, owner_stamp(os.getpid()))
    reused = fake_root(tmp_path, f"{os.getpid()} 1")  # a live pid with another start time: a reused pid
    unowned = Path(tempfile.mkdtemp(prefix=TMP_PREFIX, dir=tmp_path))  # no owner file: left alone
    assert remove_orphaned_tmp_roots(tmp_path) == [reused]
    assert mine.is_dir() and unowned.is_dir() and not reused.exists()


def test_a_killed_sandbox_folder_is_removed_when_the_next_sandbox_starts(tmp_path):
    public = tmp_path / "public"
    public.mkdir()
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen([sys.executable, "-c", HOLD, ISOLATION, str(public)], stdout=subprocess.PIPE, env=env)
    folder = Path(proc.stdout.readline().decode().strip())
    assert folder.name.startswith(TMP_PREFIX) and any(folder.glob("ws-*"))
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=10)
    proc.stdout.close()
    assert folder.is_dir()  # close() never ran
    with Sandbox(SandboxConfig(isolation=ISOLATION)) as box, box.new_kernel(public) as kernel:
        assert not folder.exists()
        assert kernel.execute("1 + 1").display == "2"  # the new sandbox works
