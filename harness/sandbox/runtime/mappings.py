"""Shared memory mappings made private in a probe's fork, so a probe cannot write into the kernel's memory.

A fork shares ``MAP_SHARED`` mappings with its parent (``mmap.mmap(-1, n)``, an ``mmap``/``np.memmap`` of a file,
SysV or POSIX shared memory): a write there lands in the kernel (and in the file), whatever Landlock says. Before the
probe's user code runs, :func:`privatize_shared` replaces every shared mapping of the process (writable or not: a
read-only one may be made writable again with ``mprotect``), at the same address with the same protection and
content, by a private one:

- a mapping of a regular file that can be reopened by its path (same device and inode) is mapped again from the
  file with ``MAP_PRIVATE`` (no copy: pages are copied on write, as for the rest of the probe's memory);
- anything else (anonymous shared memory, memfd, SysV segments, deleted files, devices) is copied into a private
  anonymous mapping that ``mremap`` moves over the original.

If one cannot be replaced (no memory for the copy), :class:`SharedMappingError` is raised and the probe does not run.

The shared mappings are listed with the ``PROCMAP_QUERY`` ioctl on ``/proc/self/maps`` (Linux >= 6.11: the kernel
returns only the shared ones, ~10 us), else by parsing that file (~1 ms in a freshly forked probe).
"""

from __future__ import annotations

import ctypes
import errno
import mmap
import os
import re
import stat

_LIBC = ctypes.CDLL(None, use_errno=True)
_mmap = _LIBC.mmap
_mmap.restype = ctypes.c_void_p
_mmap.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long)
_mremap = _LIBC.mremap
_mremap.restype = ctypes.c_void_p
_mremap.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_size_t, ctypes.c_int, ctypes.c_void_p)
_mprotect = _LIBC.mprotect
_mprotect.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int)
_munmap = _LIBC.munmap
_munmap.argtypes = (ctypes.c_void_p, ctypes.c_size_t)
_ioctl = _LIBC.ioctl
_ioctl.argtypes = (ctypes.c_int, ctypes.c_ulong, ctypes.c_void_p)
_MAP_FAILED = ctypes.c_void_p(-1).value
_MAP_FIXED = 0x10
_MREMAP_MAYMOVE, _MREMAP_FIXED = 1, 2
_SHARED_LINE = re.compile(  # start-end perms (4th 's': shared) offset dev inode path
    rb"([0-9a-f]+)-([0-9a-f]+) ([r-])([w-])([x-])s ([0-9a-f]+) ([0-9a-f]+):([0-9a-f]+) (\d+) *(.*)"
)


class _ProcmapQuery(ctypes.Structure):
    """``struct procmap_query`` (``linux/fs.h``)."""

    _fields_ = [
        *((name, ctypes.c_uint64) for name in "size query_flags query_addr vma_start vma_end vma_flags".split()),
        *((name, ctypes.c_uint64) for name in "vma_page_size vma_offset inode".split()),
        *((name, ctypes.c_uint32) for name in "dev_major dev_minor vma_name_size build_id_size".split()),
        ("vma_name_addr", ctypes.c_uint64),
        ("build_id_addr", ctypes.c_uint64),
    ]


_PROCMAP_QUERY = (3 << 30) | (ctypes.sizeof(_ProcmapQuery) << 16) | (ord("f") << 8) | 17  # _IOWR('f', 17, ...)
_VMA_READ, _VMA_WRITE, _VMA_EXEC, _VMA_SHARED, _COVERING_OR_NEXT = 1, 2, 4, 8, 0x10
Mapping = tuple[int, int, int, int, tuple[int, int], int, str]


class SharedMappingError(OSError):
    """A shared mapping could not be made private (the probe must not run)."""


def shared_mappings() -> list[Mapping]:
    """``(start, end, prot, offset, (major, minor), inode, path)`` of every shared mapping of this process."""
    fd = os.open("/proc/self/maps", os.O_RDONLY | os.O_CLOEXEC)
    try:
        found = _query_shared(fd)
        if found is not None:
            return found
        with open(fd, "rb", closefd=False) as fh:
            data = fh.read()
    finally:
        os.close(fd)
    return _parse_shared(data)


def _query_shared(fd: int) -> list[Mapping] | None:
    """The shared mappings by ``PROCMAP_QUERY``; None when the kernel lacks it (or a name does not fit)."""
    name = ctypes.create_string_buffer(4096)
    query = _ProcmapQuery()
    out: list[Mapping] = []
    addr = 0
    while True:
        query.size, query.query_flags, query.query_addr = ctypes.sizeof(query), _VMA_SHARED | _COVERING_OR_NEXT, addr
        query.vma_name_size, query.vma_name_addr = len(name), ctypes.addressof(name)
        query.build_id_size = query.build_id_addr = 0
        if _ioctl(fd, _PROCMAP_QUERY, ctypes.byref(query)) != 0:
            return out if ctypes.get_errno() == errno.ENOENT else None
        prot = (
            (mmap.PROT_READ if query.vma_flags & _VMA_READ else 0)
            | (mmap.PROT_WRITE if query.vma_flags & _VMA_WRITE else 0)
            | (mmap.PROT_EXEC if query.vma_flags & _VMA_EXEC else 0)
        )
        path = os.fsdecode(name.value) if query.vma_name_size else ""
        dev = (query.dev_major, query.dev_minor)
        out.append((query.vma_start, query.vma_end, prot, query.vma_offset, dev, query.inode, path))
        addr = query.vma_end


def _parse_shared(data: bytes) -> list[Mapping]:
    """The shared mappings listed in the text of ``/proc/self/maps``."""
    out: list[Mapping] = []
    hit = data.find(b"s ")  # ~100 kB and a few shared lines: look only at the lines where "s " occurs
    while hit != -1:
        begin = data.rfind(b"\n", 0, hit) + 1
        end = data.find(b"\n", hit)
        end = len(data) if end == -1 else end
        m = _SHARED_LINE.fullmatch(data, begin, end)
        if m is not None:
            prot = (
                (mmap.PROT_READ if m[3] == b"r" else 0)
                | (mmap.PROT_WRITE if m[4] == b"w" else 0)
                | (mmap.PROT_EXEC if m[5] == b"x" else 0)
            )
            dev = (int(m[7], 16), int(m[8], 16))
            out.append((int(m[1], 16), int(m[2], 16), prot, int(m[6], 16), dev, int(m[9]), os.fsdecode(m[10])))
        hit = data.find(b"s ", end)
    return out


def _fail(what: str, start: int, end: int, path: str) -> SharedMappingError:
    err = ctypes.get_errno()
    return SharedMappingError(err, f"{what} {path or 'anonymous'} mapping at {start:#x} ({end - start} bytes)")


def _remap_file(start: int, length: int, prot: int, offset: int, dev: tuple[int, int], inode: int, path: str) -> bool:
    """Map the same file region again, privately, over the shared one; False when the file cannot be reopened."""
    if not path.startswith("/") or path.endswith(" (deleted)"):
        return False
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return False
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or (os.major(st.st_dev), os.minor(st.st_dev), st.st_ino) != (*dev, inode):
            return False
        if _mmap(start, length, prot, mmap.MAP_PRIVATE | _MAP_FIXED, fd, offset) != start:
            raise _fail("cannot map again the", start, start + length, path)  # the old one may be gone: no copy
        return True
    finally:
        os.close(fd)


def _copy(start: int, length: int, prot: int, path: str) -> None:
    """Move a private copy of the mapping over it."""
    if not prot & mmap.PROT_READ and _mprotect(start, length, mmap.PROT_READ) != 0:
        raise _fail("cannot read the", start, start + length, path)
    flags = mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS
    tmp = _mmap(None, length, mmap.PROT_READ | mmap.PROT_WRITE, flags, -1, 0)
    if tmp in (None, _MAP_FAILED):
        raise _fail("no memory to copy the", start, start + length, path)
    ctypes.memmove(tmp, start, length)
    moved = _mprotect(tmp, length, prot) == 0 and _mremap(tmp, length, length, _MREMAP_MAYMOVE | _MREMAP_FIXED, start)
    if moved != start:
        error = _fail("cannot replace the", start, start + length, path)
        _munmap(tmp, length)
        raise error


def privatize_shared(found: list[Mapping] | None = None) -> int:
    """Replace every shared mapping of this process by a private one (see the module docstring); returns how many.
    ``found``: :func:`shared_mappings` as listed by the parent just before it forked this process (a fork inherits
    exactly its parent's mappings; listing them in the parent, where the pages are warm, saves ~0.5 ms a probe).
    Raises :class:`SharedMappingError`."""
    count = 0
    for start, end, prot, offset, dev, inode, path in shared_mappings() if found is None else found:
        if not _remap_file(start, end - start, prot, offset, dev, inode, path):
            _copy(start, end - start, prot, path)
        count += 1
    return count
