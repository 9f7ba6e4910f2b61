"""The clean verifier: the process that computes every probe's and check's verdict, and its rebuild of exported data.

One verifier per episode, forked from the episode init (itself a fork of the zygote: no worker code ever ran in its
ancestry). Before it serves, it is confined like a probe: Landlock with no writable path at all (reads: the public
dir, the workspace, the Python installation), no TCP, rlimits as a kernel's, ``PR_SET_DUMPABLE`` 0 (the worker's
kernel cannot ptrace it or read/write its memory through ``/proc``), and ``sys.path`` without the working directory
(a module the worker wrote is never imported here). Per ``check`` it rebuilds the fast path's frames (raw column
buffers of :mod:`.fastexport`, zero-copy over a private mapping of the sealed memfd) here, once per export, then forks
a child that rebuilds the other variables from the sealed memfds the kernel exported (:mod:`.export`; Arrow IPC ->
pandas, ``np.frombuffer``, JSON), runs the code in a fresh namespace (``print_result``, ``DATA_DIR``, ``BASE_PATH``,
``WORK_DIR`` as in the kernel) and replies in the shape of a kernel cell; the child is killed at its deadline, so no
check's state reaches the next one (nor this process's copy of the rebuilt frames, which no code but the rebuild
touches here).
"""

from __future__ import annotations

import fcntl
import importlib
import json
import mmap
import os
import socket
import sys
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.ipc  # noqa: F401 - pa.ipc
from pandas.api.internals import create_dataframe_from_blocks

from . import syscalls
from .export import SEALS
from .fastexport import DTYPE_CHARS
from .kernel import KernelRuntime, failed_probe
from .protocol import ProtocolError, recv_msg, send_msg

HOST_MAX_MSG = 64 << 20
PR_SET_DUMPABLE = 4


def _value(data: Any) -> Any:
    """A JSON-exported value back as Python (see ``export._json_value``)."""
    if isinstance(data, list):
        return [_value(v) for v in data]
    if not isinstance(data, dict):
        return data
    if "float" in data:
        return float(data["float"])
    if "tuple" in data:
        return tuple(_value(v) for v in data["tuple"])
    if "set" in data:
        return {_value(v) for v in data["set"]}
    if "frozenset" in data:
        return frozenset(_value(v) for v in data["frozenset"])
    if "dict" in data:
        return {_hashable(_value(k)): _value(v) for k, v in data["dict"]}
    if "np" in data:
        return np.dtype(data["np"]).type(_value(data["value"]))
    if "timestamp" in data:
        stamp = pd.Timestamp(data["timestamp"], unit="ns")
        stamp = stamp.tz_localize("UTC").tz_convert(data["tz"]) if data["tz"] else stamp
        return stamp.as_unit(data["unit"])
    if "timedelta" in data:
        return pd.Timedelta(data["timedelta"], unit="ns").as_unit(data["unit"])
    if "nat" in data:
        return pd.NaT
    raise ValueError(f"unknown exported value {str(data)[:100]}")


def _hashable(value: Any) -> Any:
    return tuple(_hashable(v) for v in value) if isinstance(value, list) else value


def _labels(labels: list[Any], multi: bool, names: list[Any]) -> Any:
    values = [tuple(_value(v) for v in label) if isinstance(label, list) else _value(label) for label in labels]
    if multi:
        return pd.MultiIndex.from_tuples(values, names=[_value(n) for n in names])
    return pd.Index(values, name=_value(names[0]) if names else None, tupleize_cols=False)


def _mapped(fd: int) -> mmap.mmap | bytes:
    if fcntl.fcntl(fd, fcntl.F_GET_SEALS) & SEALS != SEALS:
        raise ValueError("an exported buffer is not sealed; refusing it")
    size = os.fstat(fd).st_size
    if not size:
        return b""
    return mmap.mmap(fd, size, flags=mmap.MAP_PRIVATE, prot=mmap.PROT_READ | mmap.PROT_WRITE)


def _fast_array(buf: Any, dtype: str, shape: list[int], offset: int) -> np.ndarray:
    kind = np.dtype(dtype)
    if kind.char not in DTYPE_CHARS or not kind.isnative:
        raise ValueError(f"an exported column has dtype {dtype!r}, which the fast path does not carry")
    count = 1
    for size in shape:
        count *= size
    if not count:
        return np.empty(shape, dtype=kind)
    return np.frombuffer(buf, dtype=kind, count=count, offset=offset).reshape(shape)


_ARROW_STRINGS = {"string": pa.string(), "large_string": pa.large_string()}
_NA_VALUES = {"nan": np.nan, "NA": pd.NA}


def _fast_buffer(whole: pa.Buffer, slot: dict[str, Any] | None) -> pa.Buffer | None:
    if slot is None:
        return None
    offset, size = slot["offset"], slot["size"]
    if not (isinstance(offset, int) and isinstance(size, int) and 0 <= offset and 0 <= size <= whole.size - offset):
        raise ValueError(f"an exported string buffer ({offset}, {size}) lies outside its memfd of {whole.size} bytes")
    return whole.slice(offset, size)


def _fast_strings(buf: Any, block: dict[str, Any], nrows: int) -> pd.arrays.ArrowStringArray:
    """A string column of :mod:`.fastexport` (its chunks' Arrow buffers in ``buf``) as an ``ArrowStringArray`` of
    its dtype, zero-copy; each chunk is fully validated first (offsets within the data, UTF-8)."""
    whole = pa.py_buffer(buf)
    chunks = []
    for spec in block["chunks"]:
        buffers = [_fast_buffer(whole, slot) for slot in spec["buffers"]]
        chunk = pa.Array.from_buffers(
            _ARROW_STRINGS[spec["type"]], spec["length"], buffers, null_count=spec["null_count"], offset=spec["offset"]
        )
        chunk.validate(full=True)
        chunks.append(chunk)
    kind = chunks[0].type if chunks else pa.large_string()
    values = pd.arrays.ArrowStringArray(
        pa.chunked_array(chunks, type=kind), dtype=pd.StringDtype("pyarrow", na_value=_NA_VALUES[block["string"]])
    )
    if len(values) != nrows:
        raise ValueError(f"an exported string column has {len(values)} rows, not {nrows}")
    return values


def _rebuild_fast(entry: dict[str, Any], buf: Any) -> Any:
    """A DataFrame/Series from :mod:`.fastexport`'s raw column buffers (numeric blocks, string columns), zero-copy
    over the private mapping ``buf``, with the kernel's block layout (no consolidating copy)."""
    spec = entry["index"]
    name = _value(spec["name"])
    if "range" in spec:
        index = pd.RangeIndex(*spec["range"], name=name)
    else:
        index = pd.Index(_fast_array(buf, spec["dtype"], [spec["length"]], spec["offset"]), name=name, copy=False)
    blocks = entry["blocks"]

    def values_of(block: dict[str, Any]) -> Any:
        if "chunks" in block:
            return _fast_strings(buf, block, len(index))
        return _fast_array(buf, block["dtype"], block["shape"], block["offset"])

    if entry["kind"] == "series":
        (block,) = blocks
        return pd.Series(values_of(block), index=index, name=_value(entry["name"]), copy=False)
    columns = _labels(entry["columns"], entry["multi"], entry["columns_names"])
    if sorted(loc for block in blocks for loc in block["locs"]) != list(range(len(columns))):
        raise ValueError("the exported blocks do not place each column once")
    arrays = [(values_of(b), np.asarray(b["locs"], dtype=np.intp)) for b in blocks]
    return create_dataframe_from_blocks(arrays, index=index, columns=columns)


def rebuild(variables: dict[str, Any], fds: list[int]) -> dict[str, Any]:
    """The exported ``variables`` (entries of ``export.export``'s reply) as Python values; ``fds``: their memfds."""
    out: dict[str, Any] = {}
    for name, entry in variables.items():
        kind = entry["kind"]
        if kind == "json":
            out[name] = _value(entry["value"])
        elif kind == "module":
            out[name] = importlib.import_module(entry["name"])
        elif kind == "array":
            buf = _mapped(fds[entry["fd"]])
            out[name] = np.frombuffer(buf, dtype=np.dtype(entry["dtype"])).reshape(entry["shape"])
        elif entry.get("path") == "fast":
            out[name] = _rebuild_fast(entry, _mapped(fds[entry["fd"]]))
        else:
            table = pa.ipc.open_stream(pa.py_buffer(_mapped(fds[entry["fd"]]))).read_all()
            frame = table.to_pandas(split_blocks=True)
            if kind == "series":
                series = frame["c0"]
                series.name = _value(entry["name"]) if not isinstance(entry["name"], list) else tuple(entry["name"])
                out[name] = series
            else:
                frame.columns = _labels(entry["columns"], entry["multi"], entry["columns_names"])
                out[name] = frame
    return out


def unavailable_reply(unavailable: dict[str, str], names: list[str]) -> dict[str, Any]:
    """The reply of a probe that names variables which did not cross as data."""
    listed = "; ".join(f"{n!r}: {unavailable[n]}" for n in names)
    reply = failed_probe(f"not available to probes: {listed}"[:4000])
    reply.update(error_type="NameError", traceback=f"NameError: not available to probes: {listed}"[:4000])
    return reply


class VerifierRuntime(KernelRuntime):
    """A kernel-shaped process that runs no worker code: each ``check`` runs in a fork over rebuilt data."""

    def setup(self) -> None:
        self._fast: dict[tuple[Any, ...], tuple[Any, Any]] = {}  # (memfd, entry) -> (its mapping, rebuilt value)
        self._stale: list[Any] = []  # entries dropped from the cache, released once the reply is sent
        self.init_pid = os.getpid()  # strays are this process's descendants only (never the kernel or checkpoints)
        syscalls.prctl(PR_SET_DUMPABLE, 0)
        paths = self.spec["paths"]
        readable = self.spec.get("readable")
        if readable is not None:
            readable = [*readable, paths["workspace"]]
        # a kernel's setup, then no writes at all: the kernel's Landlock layer is stacked under this one
        super().setup()
        if self.limits.get("landlock", True):
            syscalls.landlock_restrict(writable=["/dev/null"], readable=readable)
        cwd = os.getcwd()
        sys.path[:] = [p for p in sys.path if p not in ("", ".", cwd) and not p.startswith(paths["workspace"])]

    def _prebuilt(self, variables: dict[str, Any], fds: list[int]) -> dict[str, Any]:
        """The fast-path variables of this check, rebuilt here (before the fork) once per exported memfd: a later
        check of the same export reuses them, and each check's fork gets its own copy-on-write view. Only the
        current check's variables stay cached; the others are released after the reply (:meth:`serve`), as freeing
        an export's memory takes a few milliseconds."""
        built: dict[str, Any] = {}
        kept: dict[tuple[Any, ...], tuple[Any, Any]] = {}
        for name, entry in variables.items():
            if entry.get("path") != "fast":
                continue
            fd = fds[entry["fd"]]
            stat = os.fstat(fd)
            key = (stat.st_dev, stat.st_ino, json.dumps(entry, sort_keys=True))
            item = self._fast.get(key) or kept.get(key)
            if item is None:
                buf = _mapped(fd)
                item = (buf, _rebuild_fast(entry, buf))
            kept[key] = item
            built[name] = item[1]
        self._stale.append(self._fast)
        self._fast = kept
        return built

    def check(self, msg: dict[str, Any], fds: list[int]) -> dict[str, Any]:
        code, timeout = msg["code"], float(msg.get("timeout", self.limits["cell_timeout_s"]))
        variables: dict[str, Any] = msg.get("variables", {})
        unavailable: dict[str, str] = msg.get("unavailable", {})
        named = [n for n in msg.get("hard", []) if n in unavailable]
        built: dict[str, Any] = {}
        failed: Exception | None = None
        if not named:
            try:
                built = self._prebuilt(variables, fds)
            except Exception as exc:  # noqa: BLE001 - reported by the probe below
                failed = exc

        def prepare(runtime: KernelRuntime) -> dict[str, Any] | None:
            if named:
                return unavailable_reply(unavailable, named)
            try:
                if failed is not None:
                    raise failed
                runtime.namespace.update(rebuild({n: e for n, e in variables.items() if n not in built}, fds))
                runtime.namespace.update(built)
            except Exception as exc:  # noqa: BLE001 - the probe cannot run: say why, as a probe failure
                reply = unavailable_reply({}, [])
                reply.update(error_type="ProbeFailed", error_message=f"the exported data could not be read: {exc!r}")
                return reply
            return None

        try:
            return self.probe_in_fork(code, timeout, set(), prepare=prepare, landlock=False)
        finally:
            for fd in fds:
                os.close(fd)

    def serve(self, trusted: tuple[Any, ...] | None = None) -> None:
        send_msg(self.sock, {"op": "hello", "role": "verifier", "pid": os.getpid()})
        while True:
            try:
                msg, fds, _ = recv_msg(self.sock, max_bytes=HOST_MAX_MSG)
            except ProtocolError:
                return
            if msg.get("op") == "check":
                try:
                    reply = self.check(msg, fds)
                except Exception as exc:  # noqa: BLE001
                    reply = {"ok": False, "error_type": "KernelInternalError", "error_message": repr(exc)[:2000]}
            else:
                for fd in fds:
                    os.close(fd)
                reply = {"ok": False, "error_type": "UnknownOp", "error_message": f"unknown op {msg.get('op')!r}"}
            try:
                send_msg(self.sock, reply)
            except OSError:
                return
            self._stale.clear()


def verifier_main(sock: socket.socket, spec: dict[str, Any], init_pid: int) -> None:
    runtime = VerifierRuntime(sock, spec, init_pid)
    try:
        runtime.setup()
    except BaseException as exc:  # noqa: BLE001 - fail closed
        send_msg(sock, {"op": "hello", "role": "verifier", "error": f"verifier setup failed: {exc!r}"})
        os._exit(1)
    runtime.serve()
