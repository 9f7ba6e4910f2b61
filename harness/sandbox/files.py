"""The host's one way to read and write files in a kernel's workspace.

Anything in a workspace was written by untrusted code: a cell can ``os.symlink('/etc/shadow', 'answer.json')``,
link a task's ``private/answers.csv`` into it, ``os.mkfifo`` the submission file so a reader blocks forever, or
write a file of gigabytes. Every host-side reader and writer of workspace files (submission checks, graders'
inputs, workflows, the episode runtime) goes through the functions here, which:

- resolve the path one component at a time from the workspace root with ``O_NOFOLLOW`` and ``dir_fd`` — a
  symlink anywhere on the path (a file or a directory) is refused, and ``..`` or an absolute path is refused
  before any I/O, so nothing outside the workspace is ever opened;
- refuse anything but a regular file (FIFOs, sockets, device nodes, directories), checked with ``lstat`` before
  the open and ``fstat`` after it (same inode: no swap in between); FIFOs are opened ``O_NONBLOCK`` so even a
  race cannot block the host;
- refuse a file with more than one hard link (its content is shared with a path outside the workspace's control);
- read at most ``max_bytes`` (a larger file is refused, not truncated) within ``timeout_s``.

A refusal raises :class:`WorkspaceFileError` with the relative path and the reason — never the target's content or
where a link points. Writes replace the file atomically (temporary file + ``rename`` in the same directory), so a
link or FIFO planted at the destination is replaced, not followed.
"""

from __future__ import annotations

import errno
import os
import shutil
import stat
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

DEFAULT_MAX_BYTES = 64 * 1024 * 1024
"""The default read cap: larger workspace files are refused (a submission CSV or an answer is far smaller)."""

DEFAULT_TIMEOUT_S = 10.0
"""The default deadline for one read."""

_CHUNK = 1 << 20
_O_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_O_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_O_DIRECTORY = getattr(os, "O_DIRECTORY", 0)
_O_NONBLOCK = getattr(os, "O_NONBLOCK", 0)
_O_NOCTTY = getattr(os, "O_NOCTTY", 0)


class WorkspaceFileError(ValueError):
    """A workspace file the host refuses to read or write; ``reason`` says why, ``path`` is relative."""

    def __init__(self, path: str, reason: str) -> None:
        super().__init__(f"WORK_DIR/{path}: {reason}")
        self.path = path
        self.reason = reason


@dataclass(frozen=True)
class WorkspaceEntry:
    """A regular file found by :func:`list_files` (``path`` relative to the workspace, POSIX separators)."""

    path: str
    size: int


def _kind(mode: int) -> str:
    for test, name in (
        (stat.S_ISLNK, "a symbolic link"),
        (stat.S_ISFIFO, "a FIFO (named pipe)"),
        (stat.S_ISSOCK, "a socket"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISDIR, "a directory"),
    ):
        if test(mode):
            return name
    return "not a regular file"


def _parts(relpath: str | os.PathLike[str]) -> list[str]:
    text = os.fspath(relpath)
    pure = PurePosixPath(text)
    if not text or pure.is_absolute() or any(p in ("..", "") for p in pure.parts) or "\x00" in text:
        raise WorkspaceFileError(text or "(empty)", "not a relative path inside the workspace; name a file in it")
    parts = [p for p in pure.parts if p != "."]
    if not parts:
        raise WorkspaceFileError(text, "names the workspace itself, not a file in it")
    return parts


def _open_parent(root: str | Path, parts: list[str], rel: str) -> int:
    """A descriptor of the directory holding ``parts[-1]``, walked without following any link."""
    fd = os.open(os.fspath(root), os.O_RDONLY | _O_DIRECTORY | _O_CLOEXEC)
    try:
        for name in parts[:-1]:
            try:
                nxt = os.open(name, os.O_RDONLY | _O_DIRECTORY | _O_NOFOLLOW | _O_CLOEXEC, dir_fd=fd)
            except OSError as exc:
                if exc.errno in (errno.ELOOP, errno.ENOTDIR):
                    raise WorkspaceFileError(
                        rel, f"its folder {name!r} is a link or not a directory; refused"
                    ) from None
                if exc.errno == errno.ENOENT:
                    raise FileNotFoundError(errno.ENOENT, f"WORK_DIR/{rel}: no such file") from None
                raise
            os.close(fd)
            fd = nxt
        return fd
    except BaseException:
        os.close(fd)
        raise


def _lstat(dir_fd: int, name: str, rel: str) -> os.stat_result | None:
    try:
        return os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except FileNotFoundError:
        return None


def exists(root: str | Path, relpath: str) -> bool:
    """Whether the workspace has *any* entry at ``relpath`` (a link or FIFO counts: reading it is then refused)."""
    parts = _parts(relpath)
    try:
        fd = _open_parent(root, parts, os.fspath(relpath))
    except (FileNotFoundError, WorkspaceFileError):
        return False
    try:
        return _lstat(fd, parts[-1], os.fspath(relpath)) is not None
    finally:
        os.close(fd)


def read_bytes(
    root: str | Path, relpath: str, *, max_bytes: int = DEFAULT_MAX_BYTES, timeout_s: float = DEFAULT_TIMEOUT_S
) -> bytes:
    """The content of the regular file ``relpath`` in the workspace ``root``.

    Raises :class:`FileNotFoundError` when nothing is there and :class:`WorkspaceFileError` for a link (on the file
    or any folder above it), a FIFO, socket, device or directory, a hard-linked file, a file over ``max_bytes``
    or a read that outlives ``timeout_s``."""
    rel = os.fspath(relpath)
    parts = _parts(rel)
    deadline = time.monotonic() + timeout_s
    dir_fd = _open_parent(root, parts, rel)
    try:
        before = _lstat(dir_fd, parts[-1], rel)
        if before is None:
            raise FileNotFoundError(errno.ENOENT, f"WORK_DIR/{rel}: no such file")
        _check_regular(before, rel, max_bytes)
        try:
            fd = os.open(parts[-1], os.O_RDONLY | _O_NOFOLLOW | _O_NONBLOCK | _O_NOCTTY | _O_CLOEXEC, dir_fd=dir_fd)
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                raise WorkspaceFileError(rel, "is a symbolic link; refused (write the file itself)") from None
            raise
    finally:
        os.close(dir_fd)
    try:
        now = os.fstat(fd)
        if (now.st_dev, now.st_ino) != (before.st_dev, before.st_ino):
            raise WorkspaceFileError(rel, "was replaced while being opened; refused")
        _check_regular(now, rel, max_bytes)
        chunks: list[bytes] = []
        total = 0
        while True:
            if time.monotonic() > deadline:
                raise WorkspaceFileError(rel, f"reading took longer than {timeout_s:g} s; refused")
            chunk = os.read(fd, min(_CHUNK, max_bytes + 1 - total))
            if not chunk:
                return b"".join(chunks)
            chunks.append(chunk)
            total += len(chunk)
            if total > max_bytes:
                raise WorkspaceFileError(rel, f"is larger than the {max_bytes:,}-byte limit; refused")
    finally:
        os.close(fd)


def _check_regular(st: os.stat_result, rel: str, max_bytes: int) -> None:
    if not stat.S_ISREG(st.st_mode):
        raise WorkspaceFileError(rel, f"is {_kind(st.st_mode)}, not a regular file; refused (write the file itself)")
    if st.st_nlink > 1:
        raise WorkspaceFileError(rel, f"has {st.st_nlink} hard links; refused (write a new file, not a link)")
    if st.st_size > max_bytes:
        raise WorkspaceFileError(rel, f"is {st.st_size:,} bytes, over the {max_bytes:,}-byte limit; refused")


def read_text(
    root: str | Path, relpath: str, *, max_bytes: int = DEFAULT_MAX_BYTES, timeout_s: float = DEFAULT_TIMEOUT_S
) -> str:
    """:func:`read_bytes` decoded as UTF-8; undecodable content raises :class:`WorkspaceFileError`."""
    data = read_bytes(root, relpath, max_bytes=max_bytes, timeout_s=timeout_s)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise WorkspaceFileError(os.fspath(relpath), f"is not UTF-8 text (byte {exc.start}); write text") from None


def write_bytes(root: str | Path, relpath: str, data: bytes) -> None:
    """Replace ``relpath`` in the workspace with ``data``: a temporary file in the same folder, then ``rename``
    over whatever is there (a link or FIFO there is replaced, never followed). Folders above must exist and be
    real directories."""
    rel = os.fspath(relpath)
    parts = _parts(rel)
    dir_fd = _open_parent(root, parts, rel)
    try:
        tmp = f".{parts[-1]}.{os.getpid()}.{time.monotonic_ns()}.tmp"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _O_NOFOLLOW | _O_CLOEXEC, 0o644, dir_fd=dir_fd)
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
        finally:
            os.close(fd)
        try:
            os.rename(tmp, parts[-1], src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
        except OSError as exc:
            os.unlink(tmp, dir_fd=dir_fd)
            if exc.errno in (errno.EISDIR, errno.ENOTEMPTY, errno.EEXIST):
                raise WorkspaceFileError(rel, "is a directory; refused (remove it first)") from None
            raise
    finally:
        os.close(dir_fd)


def remove(root: str | Path, relpath: str) -> None:
    """Remove the entry ``relpath`` (a link is removed itself, never its target); nothing there is fine."""
    rel = os.fspath(relpath)
    parts = _parts(rel)
    try:
        dir_fd = _open_parent(root, parts, rel)
    except FileNotFoundError:
        return
    try:
        os.unlink(parts[-1], dir_fd=dir_fd)
    except FileNotFoundError:
        pass
    except IsADirectoryError:
        raise WorkspaceFileError(rel, "is a directory; refused (the host removes files only)") from None
    finally:
        os.close(dir_fd)


def copy_out(root: str | Path, relpath: str, dest: str | Path, *, max_bytes: int = DEFAULT_MAX_BYTES) -> Path:
    """Copy the workspace file ``relpath`` (read as :func:`read_bytes` does) to the host path ``dest`` and return
    it. Graders read the copy, so the worker cannot change or swap the file between validation and grading."""
    data = read_bytes(root, relpath, max_bytes=max_bytes)
    dest = Path(dest)
    dest.parent.mkdir(parents=True, exist_ok=True)
    dest.write_bytes(data)
    return dest


@contextmanager
def snapshot(root: str | Path, relpath: str, *, max_bytes: int = DEFAULT_MAX_BYTES) -> Iterator[Path]:
    """A host-owned copy of the workspace file ``relpath`` (same file name, in a temporary folder removed on exit)
    for readers that need a path, such as graders. Nothing there: the yielded path does not exist (the reader
    reports the missing file). A refused file raises :class:`WorkspaceFileError`."""
    folder = Path(tempfile.mkdtemp(prefix="stateguard-snapshot-"))
    try:
        dest = folder / PurePosixPath(os.fspath(relpath)).name
        try:
            copy_out(root, relpath, dest, max_bytes=max_bytes)
        except FileNotFoundError:
            pass
        yield dest
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def list_files(root: str | Path, *, limit: int = 10_000) -> list[WorkspaceEntry]:
    """The regular files in the workspace (recursively, at most ``limit``), never descending through a link;
    links, FIFOs, devices and hard-linked files are left out."""
    out: list[WorkspaceEntry] = []
    stack = [(os.fspath(root), "")]
    while stack and len(out) < limit:
        current, prefix = stack.pop()
        try:
            entries = sorted(os.scandir(current), key=lambda e: e.name)
        except OSError:
            continue
        for entry in entries:
            try:
                st = entry.stat(follow_symlinks=False)
            except OSError:
                continue
            rel = f"{prefix}{entry.name}"
            if stat.S_ISDIR(st.st_mode):
                stack.append((entry.path, rel + "/"))
            elif stat.S_ISREG(st.st_mode) and st.st_nlink == 1:
                out.append(WorkspaceEntry(rel, st.st_size))
    return sorted(out, key=lambda e: e.path)[:limit]
