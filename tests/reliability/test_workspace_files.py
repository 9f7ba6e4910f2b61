"""The host reads and writes workspace files only through ``harness.sandbox.files``: links (to a host file, to a
task's ``private/``, to a directory), FIFOs, sockets, devices, hard links and huge files are refused with a reason,
nothing hangs, no target content is echoed; then a normal file still works. The last tests plant the links from
inside a real kernel and check the submission check and the episode's grade."""

from __future__ import annotations

import os
import shutil
import socket
import stat
import time
from pathlib import Path

import pytest

from harness.manager.policy_registry import get_policy
from harness.manager.runtime import ManagerRuntime, RuntimeConfig
from harness.sandbox import Sandbox, SandboxConfig, files
from harness.sandbox.files import WorkspaceFileError
from harness.tasks import load_task
from harness.worker import ScriptedWorker
from harness.workflow import artifacts

ISOLATION = "bwrap" if shutil.which("bwrap") else "none"
SECRET = "SECRET-CONTENT-7f3a"


@pytest.fixture
def layout(tmp_path: Path) -> tuple[Path, Path]:
    """A workspace and, beside it, a host file with secret content."""
    ws = tmp_path / "ws"
    ws.mkdir()
    secret = tmp_path / "private" / "answers.json"
    secret.parent.mkdir()
    secret.write_text(f'{{"answer": "{SECRET}"}}')
    return ws, secret


def refused(ws: Path, name: str, reason: str) -> None:
    t0 = time.monotonic()
    with pytest.raises(WorkspaceFileError, match=reason) as info:
        files.read_bytes(ws, name, timeout_s=2.0)
    assert time.monotonic() - t0 < 2.0
    assert SECRET not in str(info.value) and str(info.value).startswith(f"WORK_DIR/{name}: ")
    (ws / "ok.json").write_text('{"x": 1}')  # a normal file right after still reads
    assert files.read_text(ws, "ok.json") == '{"x": 1}'


def test_a_symlink_to_a_host_file_is_refused(layout):
    ws, secret = layout
    os.symlink(secret, ws / "answer.json")
    refused(ws, "answer.json", "symbolic link")


def test_a_relative_symlink_into_private_is_refused(layout):
    ws, _ = layout
    os.symlink("../private/answers.json", ws / "answer.json")
    refused(ws, "answer.json", "symbolic link")


def test_a_symlinked_folder_is_refused(layout):
    ws, secret = layout
    os.symlink(secret.parent, ws / "out")
    refused(ws, "out/answers.json", "folder 'out' is a link")


def test_a_fifo_does_not_hang_the_host(layout):
    ws, _ = layout
    os.mkfifo(ws / "answer.json")
    refused(ws, "answer.json", "FIFO")


def test_a_socket_and_a_device_node_are_refused(layout):
    ws, _ = layout
    server = socket.socket(socket.AF_UNIX)
    server.bind(str(ws / "sock.json"))
    try:
        refused(ws, "sock.json", "socket")
    finally:
        server.close()
    try:
        os.mknod(ws / "null.json", stat.S_IFCHR | 0o600, os.makedev(1, 3))
    except PermissionError:  # not root: make a directory stand for the non-regular entry instead
        (ws / "null.json").mkdir()
        refused(ws, "null.json", "directory")
    else:
        refused(ws, "null.json", "character device")


def test_a_hard_link_is_refused(layout):
    ws, secret = layout
    os.link(secret, ws / "answer.json")  # same file system: the link shares the private file's content
    refused(ws, "answer.json", "hard links")


def test_a_huge_file_is_refused_without_being_read(layout):
    ws, _ = layout
    with open(ws / "big.csv", "wb") as fh:
        fh.truncate(files.DEFAULT_MAX_BYTES + 1)  # sparse: costs no disk
    refused(ws, "big.csv", "over the")
    (ws / "small.csv").write_bytes(b"a" * 100)
    with pytest.raises(WorkspaceFileError, match="larger than the 10-byte limit|over the 10-byte limit"):
        files.read_bytes(ws, "small.csv", max_bytes=10)


def test_paths_that_leave_the_workspace_are_refused_before_any_io(layout):
    ws, secret = layout
    for bad in ("../private/answers.json", str(secret), "", "a/../../x"):
        with pytest.raises(WorkspaceFileError, match="not a relative path"):
            files.read_bytes(ws, bad)
    with pytest.raises(FileNotFoundError):
        files.read_bytes(ws, "missing.json")


def test_writes_replace_a_planted_link_instead_of_following_it(layout):
    ws, secret = layout
    os.symlink(secret, ws / "submission.csv")
    files.write_bytes(ws, "submission.csv", b"id,y\n1,0\n")
    assert SECRET in secret.read_text()  # the target is untouched
    assert not (ws / "submission.csv").is_symlink() and (ws / "submission.csv").read_bytes() == b"id,y\n1,0\n"
    os.symlink(secret, ws / "answer.json")
    files.remove(ws, "answer.json")
    assert not os.path.lexists(ws / "answer.json") and secret.exists()


def test_listing_keeps_only_regular_files(layout):
    ws, secret = layout
    (ws / "sub").mkdir()
    (ws / "sub" / "a.csv").write_text("x")
    (ws / "b.json").write_text("{}")
    os.symlink(secret, ws / "link.json")
    os.symlink(secret.parent, ws / "linkdir")
    os.mkfifo(ws / "fifo")
    assert [(e.path, e.size) for e in files.list_files(ws)] == [("b.json", 2), ("sub/a.csv", 1)]


# ---------------------------------------------------------------- planted from inside a real kernel


@pytest.fixture(scope="module")
def sandbox():
    with Sandbox(SandboxConfig(isolation=ISOLATION)) as box:
        yield box


def closed_form_task(root: Path):
    task = root / "tiny-sum"
    (task / "public").mkdir(parents=True)
    (task / "private").mkdir()
    (task / "public" / "data.csv").write_text("x\n1\n2\n3\n")
    (task / "private" / "answers.json").write_text(f'[["total", "{SECRET}"], ["rows", "3"]]')
    (task / "description.md").write_text("What are the sum of column x of data.csv and its number of rows?\n")
    (task / "config.yaml").write_text("id: tiny-sum\nkind: closed_form\nanswer_format: '@total[value] @rows[value]'\n")
    return load_task(task)


def test_a_kernel_cannot_submit_the_private_answers_through_a_link(sandbox, tmp_path):
    task = closed_form_task(tmp_path)
    answers = task.private_dir / "answers.json"
    with sandbox.new_kernel(task.public_dir) as kernel:
        ws = Path(kernel.workspace)
        link = kernel.execute(f"import os\nos.symlink({str(answers)!r}, 'answer.json')")
        assert link.ok, link.error_message
        validation = artifacts.check(task, ws)
        assert not validation.valid and "symbolic link" in validation.error and SECRET not in validation.error
        fifo = kernel.execute("os.remove('answer.json'); os.mkfifo('answer.json')")
        assert fifo.ok, fifo.error_message
        assert "FIFO" in artifacts.check(task, ws).error
        artifacts.clear(task, ws)  # removes the FIFO itself
        good = kernel.execute("import json\njson.dump({'total': 6, 'rows': 3}, open('answer.json', 'w'))")
        assert good.ok and artifacts.check(task, ws).answer == {"total": 6, "rows": 3}


def artifact_task(root: Path, last_cell: str):
    task = root / "tiny-artifact"
    (task / "public").mkdir(parents=True)
    (task / "private").mkdir()
    (task / "config.yaml").write_text(
        "id: tiny-artifact\nkind: artifact\nsubmission:\n  id_column: id\n  metric: accuracy\n"
    )
    (task / "description.md").write_text("Predict y = x > 1 for each row of data.csv; write submission.csv.\n")
    (task / "public" / "data.csv").write_text("id,x\n1,0\n2,2\n3,5\n")
    (task / "public" / "sample_submission.csv").write_text("id,y\n1,0\n2,0\n3,0\n")
    (task / "private" / "answers.csv").write_text("id,y\n1,0\n2,1\n3,1\n")
    (task / "private" / "solution.py").write_text(f"import os\nimport pandas as pd\n# %%\n{last_cell}\n")
    return load_task(task)


def grade_episode(sandbox, task) -> dict:
    with sandbox.new_kernel(task.public_dir) as kernel:
        worker = ScriptedWorker.for_task(task, kernel)
        return ManagerRuntime(task, kernel, worker, get_policy("none"), RuntimeConfig()).run().grade


def test_an_episode_grades_a_linked_submission_invalid_and_a_real_one_by_its_content(sandbox, tmp_path):
    answers = tmp_path / "linked" / "tiny-artifact" / "private" / "answers.csv"
    linked = artifact_task(tmp_path / "linked", f"os.symlink({str(answers)!r}, 'submission.csv')")
    grade = grade_episode(sandbox, linked)
    assert grade["valid"] is False and grade["score"] is None and "symbolic link" in grade["details"]["error"]
    real = artifact_task(
        tmp_path / "real", "pd.DataFrame({'id': [1, 2, 3], 'y': [0, 1, 1]}).to_csv('submission.csv', index=False)"
    )
    grade = grade_episode(sandbox, real)
    assert grade["valid"] is True and grade["score"] == 1.0
