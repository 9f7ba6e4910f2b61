"""Thin ctypes wrappers for the Linux primitives the sandbox needs and Python 3.10/3.11 does not expose:
namespaces (unshare), mounts, capabilities, no_new_privs, the child subreaper bit and Landlock.

Every wrapper raises ``OSError`` with the failing action named, so setup fails closed: a kernel whose isolation
could not be established never runs user code.
"""

from __future__ import annotations

import ctypes
import os
import struct

_libc = ctypes.CDLL(None, use_errno=True)
_libc.mount.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_ulong, ctypes.c_void_p]
_libc.umount2.argtypes = [ctypes.c_char_p, ctypes.c_int]
_libc.unshare.argtypes = [ctypes.c_int]
_libc.prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong]
_libc.syscall.restype = ctypes.c_long

CLONE_NEWNS = 0x00020000
CLONE_NEWIPC = 0x08000000
CLONE_NEWPID = 0x20000000
CLONE_NEWNET = 0x40000000

MS_RDONLY = 1
MS_NOSUID = 2
MS_NODEV = 4
MS_NOEXEC_PROC = 8  # MS_NOEXEC
MS_REMOUNT = 32
MS_BIND = 4096
MS_REC = 16384
MS_PRIVATE = 1 << 18
MNT_DETACH = 2

PR_SET_PDEATHSIG = 1
PR_CAPBSET_DROP = 24
PR_SET_SECUREBITS = 28
PR_SET_NO_NEW_PRIVS = 38
PR_SET_CHILD_SUBREAPER = 36
PR_CAP_AMBIENT = 47
PR_CAP_AMBIENT_CLEAR_ALL = 4
# SECBIT_NOROOT | _LOCKED, SECBIT_NO_SETUID_FIXUP | _LOCKED, SECBIT_KEEP_CAPS_LOCKED, SECBIT_NO_CAP_AMBIENT_RAISE | _L
SECUREBITS_LOCKDOWN = 0x01 | 0x02 | 0x04 | 0x08 | 0x20 | 0x40 | 0x80

SYS_CAPSET = 126
SYS_LANDLOCK_CREATE_RULESET = 444
SYS_LANDLOCK_ADD_RULE = 445
SYS_LANDLOCK_RESTRICT_SELF = 446


def _check(ret: int, action: str) -> None:
    if ret < 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{action}: {os.strerror(err)}")


def unshare(flags: int) -> None:
    _check(_libc.unshare(flags), f"unshare({flags:#x})")


def mount(source: str | None, target: str, fstype: str | None, flags: int, data: str | None = None) -> None:
    enc = lambda s: None if s is None else s.encode()  # noqa: E731
    _check(_libc.mount(enc(source), target.encode(), enc(fstype), flags, enc(data)), f"mount {source} on {target}")


def bind_mount(source: str, target: str, *, readonly: bool) -> None:
    """Recursive bind of ``source`` on ``target``; read-only binds are remounted nosuid,nodev,ro."""
    mount(source, target, None, MS_BIND | MS_REC)
    flags = MS_BIND | MS_REMOUNT | MS_NOSUID | MS_NODEV | (MS_RDONLY if readonly else 0)
    mount(None, target, None, flags)


def umount_detach(target: str) -> None:
    _check(_libc.umount2(target.encode(), MNT_DETACH), f"umount {target}")


def prctl(option: int, arg2: int = 0, arg3: int = 0, arg4: int = 0, arg5: int = 0) -> int:
    ret = _libc.prctl(option, arg2, arg3, arg4, arg5)
    _check(ret, f"prctl({option})")
    return ret


def set_no_new_privs() -> None:
    prctl(PR_SET_NO_NEW_PRIVS, 1)


def set_child_subreaper() -> None:
    prctl(PR_SET_CHILD_SUBREAPER, 1)


def set_parent_death_signal(sig: int) -> None:
    prctl(PR_SET_PDEATHSIG, sig)


def drop_all_capabilities() -> None:
    """Empty the bounding, ambient, effective, permitted and inheritable sets and lock the securebits, so not even
    an ``execve`` of a setuid binary by uid 0 can regain a capability."""
    try:
        prctl(PR_SET_SECUREBITS, SECUREBITS_LOCKDOWN)
    except OSError:
        pass  # needs CAP_SETPCAP; without it the capability sets below are already empty or cannot be raised
    for cap in range(64):
        if _libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) < 0:
            if ctypes.get_errno() == 22:  # EINVAL: past the last capability this kernel knows
                break
    try:
        prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL)
    except OSError:
        pass
    header = struct.pack("Ii", 0x20080522, 0)  # _LINUX_CAPABILITY_VERSION_3, this process
    data = bytes(24)  # two zeroed __user_cap_data_struct {effective, permitted, inheritable}
    hbuf = ctypes.create_string_buffer(header, len(header))
    dbuf = ctypes.create_string_buffer(data, len(data))
    _check(_libc.syscall(SYS_CAPSET, hbuf, dbuf), "capset(drop all)")


# ---- Landlock -----------------------------------------------------------------------------------------------------
LL_EXECUTE = 1 << 0
LL_WRITE_FILE = 1 << 1
LL_READ_FILE = 1 << 2
LL_READ_DIR = 1 << 3
LL_REMOVE_DIR = 1 << 4
LL_REMOVE_FILE = 1 << 5
LL_MAKE_CHAR = 1 << 6
LL_MAKE_DIR = 1 << 7
LL_MAKE_REG = 1 << 8
LL_MAKE_SOCK = 1 << 9
LL_MAKE_FIFO = 1 << 10
LL_MAKE_BLOCK = 1 << 11
LL_MAKE_SYM = 1 << 12
LL_REFER = 1 << 13  # ABI 2
LL_TRUNCATE = 1 << 14  # ABI 3
LL_NET_BIND_TCP = 1 << 0  # ABI 4
LL_NET_CONNECT_TCP = 1 << 1
LL_SCOPE_ABSTRACT_UNIX_SOCKET = 1 << 0  # ABI 6
LL_SCOPE_SIGNAL = 1 << 1
_FILE_ONLY = LL_EXECUTE | LL_WRITE_FILE | LL_READ_FILE | LL_TRUNCATE
_O_PATH = 0o10000000


def landlock_abi() -> int:
    """The Landlock ABI version of the running kernel, 0 when Landlock is unavailable."""
    ret = _libc.syscall(SYS_LANDLOCK_CREATE_RULESET, None, 0, 1)  # LANDLOCK_CREATE_RULESET_VERSION
    return int(ret) if ret > 0 else 0


def _write_rights(abi: int) -> int:
    rights = LL_WRITE_FILE | LL_REMOVE_DIR | LL_REMOVE_FILE | LL_MAKE_CHAR | LL_MAKE_DIR | LL_MAKE_REG | LL_MAKE_SOCK
    rights |= LL_MAKE_FIFO | LL_MAKE_BLOCK | LL_MAKE_SYM
    if abi >= 2:
        rights |= LL_REFER
    if abi >= 3:
        rights |= LL_TRUNCATE
    return rights


def landlock_restrict(
    *,
    writable: list[str],
    readable: list[str] | None = None,
    deny_tcp: bool = True,
    scope_signals: bool = True,
) -> int:
    """Restrict this process (and all its future children) with Landlock; returns the ABI used (0: unavailable).

    - writes (create, modify, delete, rename, truncate) are allowed only beneath ``writable`` (files or dirs);
    - when ``readable`` is given, reads are allowed only beneath ``readable`` + ``writable`` (else unrestricted);
    - ``deny_tcp``: no TCP bind/connect at all (ABI >= 4);
    - ``scope_signals``: no signals to processes outside this Landlock domain, no connecting to abstract unix
      sockets created outside it (ABI >= 6).
    Requires no_new_privs. Missing paths are skipped.
    """
    abi = landlock_abi()
    if abi <= 0:
        return 0
    fs_rights = _write_rights(abi)
    if readable is not None:
        fs_rights |= LL_READ_FILE | LL_READ_DIR
    net_rights = (LL_NET_BIND_TCP | LL_NET_CONNECT_TCP) if (deny_tcp and abi >= 4) else 0
    scoped = (LL_SCOPE_ABSTRACT_UNIX_SOCKET | LL_SCOPE_SIGNAL) if (scope_signals and abi >= 6) else 0
    size = 8 + (8 if abi >= 4 else 0) + (8 if abi >= 6 else 0)
    attr = struct.pack("QQQ", fs_rights, net_rights, scoped)[:size]
    abuf = ctypes.create_string_buffer(attr, len(attr))
    ruleset = _libc.syscall(SYS_LANDLOCK_CREATE_RULESET, abuf, len(attr), 0)
    _check(ruleset, "landlock_create_ruleset")
    try:
        rules: dict[str, int] = {}
        for path in writable:
            rules[path] = rules.get(path, 0) | _write_rights(abi) | (fs_rights & (LL_READ_FILE | LL_READ_DIR))
        for path in readable or []:
            rules[path] = rules.get(path, 0) | (fs_rights & (LL_READ_FILE | LL_READ_DIR))
        for path, rights in rules.items():
            try:
                fd = os.open(path, _O_PATH | os.O_CLOEXEC)
            except OSError:
                continue
            try:
                if not os.path.isdir(path):
                    rights &= _FILE_ONLY
                rights &= fs_rights
                if not rights:
                    continue
                rule = struct.pack("=Qi", rights, fd)  # struct landlock_path_beneath_attr (packed)
                rbuf = ctypes.create_string_buffer(rule, len(rule))
                _check(_libc.syscall(SYS_LANDLOCK_ADD_RULE, ruleset, 1, rbuf, 0), f"landlock_add_rule {path}")
            finally:
                os.close(fd)
        _check(_libc.syscall(SYS_LANDLOCK_RESTRICT_SELF, ruleset, 0), "landlock_restrict_self")
    finally:
        os.close(ruleset)
    return abi
