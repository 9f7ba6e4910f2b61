"""Variables of the kernel as data, for the clean verifier (:mod:`.verifier`) that computes every probe's verdict.

The kernel runs the worker's code, so nothing it computes is trusted as a verdict. What crosses to the verifier is
data only, each variable in its own sealed memfd (``F_SEAL_WRITE|F_SEAL_GROW|F_SEAL_SHRINK``) passed with SCM_RIGHTS,
or inline as JSON when it is a small plain value:

- a ``pandas.DataFrame``/``Series`` of numpy-backed numeric columns with a plain index and labels (the common case):
  raw column buffers, block by block (the fast path, :mod:`.fastexport`; the entry says ``path: "fast"``);
- any other exact ``pandas.DataFrame``/``Series`` (a subclass: its base data, said in ``converted``): Arrow IPC of
  its columns (labels and the Series name as JSON; the index in the pandas metadata);
- an exact ``numpy.ndarray`` of a non-object dtype: its bytes (C order), dtype and shape;
- ``str``/``int``/``float``/``bool``/``None``, numpy scalars, ``list``/``tuple``/``dict``/``set`` of these (bounded),
  pandas ``Timestamp``/``Timedelta``: JSON (an ``int``/``float``/``str`` subclass crosses as its base value);
- a module: its name (the verifier imports it clean).

Everything else (functions, models, worker-defined objects, object columns holding anything but plain values,
custom extension arrays, time zones other than the standard ones) is reported ``unavailable`` with the reason: it
never crosses, so no method of the worker's runs in the verifier, and none runs here either (element types are
checked with ``type``, not with the objects' own methods; pickle is never used).

Tampering: before it reads anything, :func:`export` checks that no module or class of this runtime, builtins and the
standard modules it calls (and no function's ``__code__`` in them) differs from the snapshot the zygote took before
any worker code ran (:data:`RUNTIME_INTEGRITY`); if one does, every variable is unavailable with a message naming
the modified attribute. The fast path runs no Python-level code of pandas, numpy or pyarrow: it reads the block
manager, its blocks, their values and placements, the index and the labels only through C-level references taken at
import (Cython getsets of ``pandas._libs.internals``, ``__dict__`` getsets, ``ndarray``/``dtype`` getsets and
methods, ``ChunkedArray.to_pylist``; see :mod:`.fastexport`), so a patched pandas/numpy/pyarrow attribute is never
looked up there and those libraries need no scan for it. Before a variable takes any other path, the same check
also covers every module and class of numpy, pandas and pyarrow (:data:`INTEGRITY`, ~100k entries, a few
milliseconds; once per export); if one differs, that variable is unavailable, naming it. So a patched
``pandas.DataFrame.sum``, ``builtins.len`` or ``KernelRuntime.run_cell`` cannot redirect the export; the entry points
and the checks are reached through references the kernel bound at setup. What stays possible inside the worker's
process is listed in ``harness/sandbox/__init__.py``.
"""

from __future__ import annotations

import fcntl
import itertools
import json
import mmap
import operator
import os
import sys
import types
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.ipc  # noqa: F401 - pa.ipc

from . import fastexport

SEALS = fcntl.F_SEAL_WRITE | fcntl.F_SEAL_GROW | fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_SEAL
MAX_JSON_CHARS = 1_000_000
MAX_ITEMS = 10_000
RUNTIME_MODULES = (
    *("sg_runtime", "builtins"),
    *("os", "posix", "fcntl", "mmap", "json", "socket", "_socket", "operator", "types", "functools", "itertools"),
)
"""Top-level names of the modules :data:`RUNTIME_INTEGRITY` snapshots: the export's own code and the standard
modules it calls (checked before every export)."""
CHECKED_MODULES = (*RUNTIME_MODULES, "numpy", "pandas", "pyarrow")
"""Top-level names of the modules whose dictionaries (and classes) :data:`INTEGRITY` snapshots: the runtime's, and
the libraries the checked path walks (checked before a variable takes that path)."""
NOT_DATA = "is not data; probes see DataFrames, Series, numpy arrays, scalars, small containers of these and modules"

_type, _len, _set, _map, _id, _issubclass = type, len, set, map, id, issubclass
_QUALNAME = type.__dict__["__qualname__"].__get__  # the getset of ``type`` itself: no metaclass can intercept it
_TYPE_DICT = type.__dict__["__dict__"].__get__
_DICT_OF_MODULE = types.ModuleType.__dict__["__dict__"].__get__
_FRAME, _SERIES = pd.DataFrame, pd.Series
_BLOCK_MANAGER = pd.core.internals.managers.BlockManager
_SINGLE_MANAGER = pd.core.internals.managers.SingleBlockManager
_DICT_OF = next(c.__dict__["__dict__"] for c in _FRAME.__mro__ if "__dict__" in c.__dict__).__get__
_PLAIN_IDS = frozenset(map(id, (str, int, float, bool, type(None))))
_IN_OBJECT_COLUMNS = _PLAIN_IDS | {id(np.float64), id(pd.Timestamp)}
_NP_SCALAR_IDS = frozenset(
    id(t) for t in set(np.sctypeDict.values()) if issubclass(t, (np.bool_, np.integer, np.floating))
)
_INDEX_IDS = frozenset(
    map(id, (pd.Index, pd.RangeIndex, pd.MultiIndex, pd.DatetimeIndex, pd.TimedeltaIndex, pd.CategoricalIndex))
)
_EXTENSION_IDS = frozenset(
    id(getattr(pd.arrays, name))
    for name in (
        "ArrowStringArray",
        "ArrowExtensionArray",
        "StringArray",
        "IntegerArray",
        "FloatingArray",
        "BooleanArray",
        "DatetimeArray",
        "TimedeltaArray",
        "Categorical",
    )
    if hasattr(pd.arrays, name)
)


def _standard_tz_types() -> tuple[type, ...]:
    import datetime
    import zoneinfo

    kinds: list[type] = [datetime.timezone, zoneinfo.ZoneInfo]
    try:
        import pytz

        kinds += [type(pytz.utc), *{type(pytz.timezone(z)) for z in ("Europe/Paris", "EST")}]
    except ImportError:
        pass
    return tuple(kinds)


_TZ_IDS = frozenset(map(id, _standard_tz_types()))


class Unavailable(Exception):
    """A variable that cannot cross as data (the message says why)."""


_DATA_TYPES = (int, float, complex, str, bytes, bool, type(None), tuple, list, dict, set, frozenset)


def _code_like(value: Any) -> bool:
    """Whether a module or class attribute is behaviour (a function, class, descriptor, object) rather than plain
    data; plain data (caches, counters, settings) changes legitimately and is not snapshotted."""
    return type(value) not in _DATA_TYPES


class Integrity:
    """Identity snapshot of the behaviour in the module and class dictionaries the export walks (functions, classes,
    descriptors and their code objects), taken before any worker code runs; :meth:`modified` names the first entry
    that changed since (None: none did). Identities are compared, never values, so no ``__eq__`` runs. A key added
    later is accepted when its value is a module (a lazy submodule import) or plain data, refused otherwise (in a
    class it could shadow an inherited method; in a module, a builtin)."""

    def __init__(self, modules: tuple[str, ...] = CHECKED_MODULES, own_classes: bool = False) -> None:
        self.modules = frozenset(modules)
        self.own_classes = own_classes  # only classes defined in ``modules`` (not those they merely reference)
        self.entries: list[tuple[str, Any, tuple[str, ...]]] = []  # (label, live mapping, snapshotted keys)
        self._freeze()

    def take(self) -> None:
        """Snapshot the loaded modules named in ``modules`` (top-level names) and the classes they hold."""
        entries: list[tuple[str, Any, tuple[str, ...]]] = []
        seen: set[int] = set()
        for name, module in sorted(sys.modules.items()):
            if type(module) is not types.ModuleType or name.split(".")[0] not in self.modules:
                continue
            mappings = [(name, vars(module))]
            mappings += [
                (f"{v.__module__}.{v.__qualname__}", v.__dict__)
                for v in vars(module).values()
                if isinstance(v, type) and (not self.own_classes or str(v.__module__).split(".")[0] in self.modules)
            ]
            for label, mapping in mappings:
                if id(mapping) not in seen:
                    seen.add(id(mapping))
                    entries.append((label, mapping, tuple(k for k, v in mapping.items() if _code_like(v))))
        self.entries = entries
        self._freeze()

    def _freeze(self) -> None:
        """Flatten the snapshot so :meth:`modified` runs as a few C-level passes."""
        kept = [(label, mapping, keys) for label, mapping, keys in self.entries if keys]
        self.entries = kept
        self._mappings = tuple(mapping for _, mapping, _ in kept)
        self._sizes = tuple(len(mapping) for mapping in self._mappings)
        self._getters = tuple(operator.itemgetter(*keys) if len(keys) > 1 else _single(keys[0]) for _, _, keys in kept)
        self._values = tuple(
            v for getter, mapping in zip(self._getters, self._mappings, strict=True) for v in getter(mapping)
        )
        self._functions = tuple(v for v in self._values if type(v) is types.FunctionType)
        self._codes = tuple(f.__code__ for f in self._functions)
        self._value_codes = tuple(v.__code__ if type(v) is types.FunctionType else None for v in self._values)

    def modified(
        self,
        _len: Any = len,
        _all: Any = all,
        _map: Any = map,
        _is: Any = operator.is_,
        _tuple: Any = tuple,
        _chain: Any = itertools.chain.from_iterable,
        _code: Any = operator.attrgetter("__code__"),
    ) -> str | None:
        try:
            values = _tuple(_chain(_map(_call, self._getters, self._mappings)))
        except KeyError:  # a snapshotted key was deleted
            return self._changed()
        if _all(_map(_is, values, self._values)) and _all(_map(_is, _map(_code, self._functions), self._codes)):
            if _tuple(_map(_len, self._mappings)) == self._sizes:
                return None
            return self._added()
        return self._changed()

    def _changed(self) -> str:
        offset = 0
        for label, mapping, keys in self.entries:
            for key in keys:
                old, code = self._values[offset], self._value_codes[offset]
                offset += 1
                new = mapping.get(key, _MISSING)
                if new is not old:
                    return f"{label}.{key}{' (deleted)' if new is _MISSING else ''}"
                if code is not None and old.__code__ is not code:
                    return f"{label}.{key}.__code__"
        return "a module or class"

    def _added(self) -> str | None:
        """Accept keys added since the snapshot that are modules or plain data (re-snapshotting those entries)."""
        for (label, mapping, keys), size in zip(self.entries, self._sizes, strict=True):
            if len(mapping) == size:
                continue
            for key, value in list(mapping.items()):
                if key not in keys and _code_like(value) and type(value) is not types.ModuleType:
                    return f"{label}.{key} (added)"
        self._freeze()
        return None


_MISSING = object()


def _single(key: str) -> Any:
    return lambda mapping: (mapping[key],)


def _call(getter: Any, mapping: Any) -> Any:
    return getter(mapping)


INTEGRITY = Integrity(CHECKED_MODULES)
"""Taken by the zygote once its preload and this runtime are imported; kernels fork with it."""
RUNTIME_INTEGRITY = Integrity(RUNTIME_MODULES, own_classes=True)
"""The same for the runtime and standard modules and their own classes only (not the pandas/numpy/pyarrow classes the
runtime refers to): all the fast path (:mod:`.fastexport`) relies on."""


def take_snapshots() -> None:
    """Snapshot :data:`INTEGRITY` and :data:`RUNTIME_INTEGRITY` (the zygote, before any worker code)."""
    INTEGRITY.take()
    RUNTIME_INTEGRITY.take()


# ---- values to data ------------------------------------------------------------------------------------------------
def _name_of(kind: Any) -> str:
    """``module.qualname`` of a class, read through ``type``'s own descriptors (no metaclass code runs)."""
    module = _TYPE_DICT(kind).get("__module__")
    module = str.__str__(module) if _issubclass(_type(module), str) else "?"
    return f"{module}.{str.__str__(_QUALNAME(kind))}"


def _describe(value: Any) -> str:
    return f"a {_name_of(_type(value))} object"


def _plain_values(values: Any, what: str) -> None:
    """Refuse an object array holding anything but plain values (exact types, compared by id: no method runs)."""
    ids = _set(_map(_id, _map(_type, values.ravel(order="K"))))
    odd = ids - _IN_OBJECT_COLUMNS
    if odd:
        kind = next(_type(v) for v in values.ravel(order="K") if _id(_type(v)) in odd)
        raise Unavailable(f"{what} holds {_name_of(kind)} objects, which are not plain values")


def _check_array(values: Any, what: str) -> None:
    kind = _type(values)
    if kind is np.ndarray:
        if values.dtype.kind == "O":
            _plain_values(values, what)
        elif values.dtype.kind not in "biufcmMU":
            raise Unavailable(f"{what} has dtype {values.dtype.str}, which does not cross")
        return
    if _id(kind) not in _EXTENSION_IDS:
        raise Unavailable(f"{what} is a {_name_of(kind)} array, not one of pandas' own")
    if kind is pd.arrays.StringArray:
        _plain_values(values._ndarray, what)
    elif kind is pd.Categorical:
        _check_index(values.categories, f"{what} (categories)")
    elif kind is pd.arrays.DatetimeArray and values.tz is not None and _id(_type(values.tz)) not in _TZ_IDS:
        raise Unavailable(f"{what} has a time zone of type {_name_of(_type(values.tz))}")


def _check_labels(labels: Any, what: str) -> list[Any]:
    out = []
    for label in labels:
        out.append([_json_value(v, what) for v in label] if _type(label) is tuple else _json_value(label, what))
    return out


def _check_index(index: Any, what: str) -> None:
    kind = _type(index)
    if _id(kind) not in _INDEX_IDS:
        raise Unavailable(f"{what} is a {_name_of(kind)}, not one of pandas' own index types")
    _check_labels(index.names, f"{what} names")
    if kind is pd.RangeIndex:
        return
    if kind is pd.MultiIndex:
        for level in index.levels:
            _check_index(level, f"{what} (level)")
        return
    _check_array(index._data, what)


def _json_value(value: Any, what: str, depth: int = 0) -> Any:
    kind = _type(value)
    if _id(kind) in _PLAIN_IDS:
        if kind is float and not (value == value and value - value == 0.0):  # NaN or an infinity
            return {"float": float.__repr__(value)}
        return value
    if depth > 20:
        raise Unavailable(f"{what} nests too deeply")
    if kind is list or kind is tuple or kind is set or kind is frozenset or kind is dict:
        if _len(value) > MAX_ITEMS:
            raise Unavailable(f"{what} has {_len(value)} items (more than {MAX_ITEMS})")
        if kind is dict:
            pairs = list(dict.items(value))
            return {"dict": [[_json_value(k, what, depth + 1), _json_value(v, what, depth + 1)] for k, v in pairs]}
        items = [_json_value(v, what, depth + 1) for v in (list.copy(value) if kind is list else value)]
        return items if kind is list else {kind.__name__: items}
    if _id(kind) in _NP_SCALAR_IDS:
        return {"np": value.dtype.str, "value": _json_value(value.item(), what, depth + 1)}
    if kind is pd.Timestamp:
        tz = value.tz
        if tz is not None and _id(_type(tz)) not in _TZ_IDS:
            raise Unavailable(f"{what} has a time zone of type {_name_of(_type(tz))}")
        return {"timestamp": value.value, "unit": value.unit, "tz": None if tz is None else str(tz)}
    if kind is pd.Timedelta:
        return {"timedelta": value.value, "unit": value.unit}
    if value is pd.NaT:
        return {"nat": True}
    raise Unavailable(f"{_describe(value)} {NOT_DATA}")


_CONTAINER_IDS = frozenset(map(id, (list, tuple, set, frozenset, dict)))


def _builtin_tree(value: Any, depth: int = 0) -> bool:
    """Whether ``value`` is an exact ``str``/``int``/``float``/``bool``/``None`` or a (bounded) list, tuple, set,
    frozenset or dict of such trees: :func:`_json_value` then calls only builtins (no numpy, pandas or pyarrow code),
    so the value needs no library scan. Types are compared by identity; iteration of exact builtin containers runs no
    code of the worker's."""
    kind = _type(value)
    if _id(kind) in _PLAIN_IDS:
        return True
    if _id(kind) not in _CONTAINER_IDS or depth > 20 or _len(value) > MAX_ITEMS:
        return False
    if kind is dict:
        return all(_builtin_tree(k, depth + 1) and _builtin_tree(v, depth + 1) for k, v in list(dict.items(value)))
    return all(_builtin_tree(v, depth + 1) for v in (list.copy(value) if kind is list else value))


def _base_value(value: Any) -> tuple[Any, str] | None:
    """An int/float/str subclass as its base value, through the base type's own slot (never the subclass's)."""
    kind = _type(value)
    for base, convert in ((int, int.__int__), (float, float.__float__), (str, str.__str__)):
        if _issubclass(kind, base):
            return convert(value), base.__name__
    return None


def _memfd(name: str, size: int) -> tuple[int, mmap.mmap]:
    fd = os.memfd_create(f"export-{name}"[:200], os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
    try:
        os.ftruncate(fd, size)
        return fd, mmap.mmap(fd, size) if size else mmap.mmap(-1, 1)
    except BaseException:
        os.close(fd)
        raise


def _seal(fd: int) -> int:
    fcntl.fcntl(fd, fcntl.F_ADD_SEALS, SEALS)
    return fd


def _write_table(name: str, table: pa.Table) -> int:
    """Arrow IPC of ``table`` in a new sealed memfd. Written with ``write(2)`` (the kernel fills the memfd's pages in
    one pass), about twice as fast as faulting in a writable mapping of it page by page."""
    fd = os.memfd_create(f"export-{name}"[:200], os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
    try:
        with os.fdopen(fd, "wb", buffering=0, closefd=False) as raw:
            sink = pa.PythonFile(raw, mode="w")
            with pa.ipc.new_stream(sink, table.schema) as writer:
                writer.write_table(table)
        return _seal(fd)
    except BaseException:
        os.close(fd)
        raise


def _clean_frame(obj: Any, what: str, converted: dict[str, str], name: str) -> Any:
    """A new DataFrame/Series over a shallow copy of ``obj``'s block manager, read from its instance dict (so neither
    a subclass nor an instance attribute changes what is read); ``obj`` itself is not modified."""
    frame = _issubclass(_type(obj), _FRAME)
    manager = _DICT_OF(obj).get("_mgr")
    if _type(manager) is not (_BLOCK_MANAGER if frame else _SINGLE_MANAGER):
        raise Unavailable(f"{what}'s data is held in a {_type(manager).__qualname__}, not a pandas block manager")
    if _type(obj) is not (_FRAME if frame else _SERIES):
        converted[name] = f"{_describe(obj)} (a {'DataFrame' if frame else 'Series'} subclass) crossed as its data"
    manager = manager.copy(deep=False)
    return (_FRAME if frame else _SERIES)._from_mgr(manager, manager.axes)


def _export_frame(name: str, obj: Any, converted: dict[str, str]) -> tuple[dict[str, Any], int]:
    clean = _clean_frame(obj, name, converted, name)
    _check_index(clean.index, f"{name}'s index")
    entry: dict[str, Any]
    if _type(clean) is _FRAME:
        columns = clean.columns
        _check_index(columns, f"{name}'s columns")
        labels = _check_labels(columns, f"{name}'s column labels")
        for position, values in enumerate(clean._mgr.arrays):
            _check_array(values, f"{name}'s column {labels[position]!r}")
        entry = {
            "kind": "frame",
            "columns": labels,
            "columns_names": _check_labels(columns.names, f"{name}'s column names"),
            "multi": _type(columns) is pd.MultiIndex,
        }
        clean._mgr.set_axis(0, pd.Index([f"c{i}" for i in range(_len(labels))]))
        table = pa.Table.from_pandas(clean, preserve_index=None, nthreads=1)
    else:
        _check_array(clean._values, name)
        series_name = _DICT_OF(obj).get("_name")
        entry = {"kind": "series", "name": _check_labels([series_name], f"{name}'s name")[0]}
        table = pa.Table.from_pandas(clean.to_frame("c0"), preserve_index=None, nthreads=1)
    return entry, _write_table(name, table)


def _export_fast(
    name: str, obj: Any, frame: bool, converted: dict[str, str], columns: Any = None
) -> tuple[dict[str, Any], int] | None:
    """The fast path (:mod:`.fastexport`) when it covers ``obj``, else None (the checked path exports it).
    ``columns``: the labels a probe reads of a frame (``fastexport.read`` projects to them when it can)."""
    try:
        entry, arrays = fastexport.read(obj, frame, columns)
    except Exception:  # noqa: BLE001 - NotFast, or a layout it does not expect: the checked path decides
        return None
    fd = os.memfd_create(f"export-{name}"[:200], os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
    try:
        fastexport.write(fd, entry, arrays)
        _seal(fd)
    except BaseException:
        os.close(fd)
        raise
    if _type(obj) is not (_FRAME if frame else _SERIES):
        converted[name] = f"{_describe(obj)} (a {'DataFrame' if frame else 'Series'} subclass) crossed as its data"
    return entry, fd


def _export_array(name: str, arr: Any) -> tuple[dict[str, Any], int]:
    if arr.dtype.kind not in "biufcmM?":
        raise Unavailable(f"a numpy array of dtype {arr.dtype.str} {NOT_DATA}")
    data = np.ascontiguousarray(arr)
    fd, mm = _memfd(name, data.nbytes)
    try:
        if data.nbytes:
            np.frombuffer(mm, dtype=np.uint8, count=data.nbytes)[:] = data.reshape(-1).view(np.uint8)
        mm.close()
        return {"kind": "array", "dtype": arr.dtype.str, "shape": list(arr.shape)}, _seal(fd)
    except BaseException:
        os.close(fd)
        raise


def export(namespace: dict[str, Any], names: list[str], columns: Any = None) -> tuple[dict[str, Any], list[int]]:
    """The variables ``names`` of ``namespace`` as data: ``(reply, fds)``. ``reply``: ``variables`` (name -> entry,
    ``fd`` indexing ``fds``), ``unavailable`` (name -> reason), ``missing`` (names not defined), ``converted``
    (name -> how a subclass crossed). ``columns``: name -> the str column labels the probe reads of it (from the host,
    :func:`harness.sandbox.probes.projections`); a frame on the fast path is then exported with those columns only
    (its entry says ``projected``); the checked path and every other value ignore it. The caller closes ``fds`` once
    they are sent."""
    variables: dict[str, Any] = {}
    unavailable: dict[str, str] = {}
    converted: dict[str, str] = {}
    missing: list[str] = []
    fds: list[int] = []
    tampered = RUNTIME_INTEGRITY.modified()
    libraries: list[str | None] = []  # INTEGRITY.modified(), computed once a variable needs the checked path
    # only exact-str names: a key object of the worker's could run its __eq__ on a hash collision
    plain = {k: v for k, v in dict.items(namespace) if _type(k) is str}
    columns = columns if _type(columns) is dict else {}
    for name in names:
        if tampered is not None:
            unavailable[name] = f"the worker's code modified {tampered}, so no variable is read from its kernel"
            continue
        if name not in plain:
            missing.append(name)
            continue
        value = plain[name]
        frame = _issubclass(_type(value), _FRAME)
        try:
            if frame or _issubclass(_type(value), _SERIES):
                wanted = dict.get(columns, name) if frame else None
                fast = _export_fast(name, value, frame, converted, wanted)
                if fast is not None:
                    variables[name] = {**fast[0], "fd": _len(fds)}
                    fds.append(fast[1])
                    continue
            # a module (its name, read through a C getset) and a tree of builtin values cross without running any
            # library code: only the other values pay the library scan
            if not (_type(value) is types.ModuleType or _builtin_tree(value)):
                if not libraries:
                    libraries.append(INTEGRITY.modified())
                if libraries[0] is not None:
                    unavailable[name] = (
                        f"the worker's code modified {libraries[0]}, so {name} is not read from its kernel"
                    )
                    continue
            if _type(value) is types.ModuleType:
                module = _DICT_OF_MODULE(value).get("__name__")
                if _type(module) is not str:
                    raise Unavailable(f"{name} is a module without a plain name")
                variables[name] = {"kind": "module", "name": module}
            elif frame or _issubclass(_type(value), _SERIES):
                entry, fd = _export_frame(name, value, converted)
                variables[name] = {**entry, "fd": _len(fds)}
                fds.append(fd)
            elif _type(value) is np.ndarray:
                entry, fd = _export_array(name, value)
                variables[name] = {**entry, "fd": _len(fds)}
                fds.append(fd)
            else:
                base = _base_value(value) if _id(_type(value)) not in _PLAIN_IDS else None
                if base is not None:
                    converted[name] = f"{_describe(value)} (a {base[1]} subclass) crossed as its {base[1]} value"
                    value = base[0]
                data = _json_value(value, name)
                text = json.dumps(data, allow_nan=False)
                if _len(text) > MAX_JSON_CHARS:
                    raise Unavailable(f"{name} is {_len(text)} characters as JSON (more than {MAX_JSON_CHARS})")
                variables[name] = {"kind": "json", "value": data}
        except Unavailable as exc:
            unavailable[name] = str(exc)
        except Exception as exc:  # noqa: BLE001 - e.g. pyarrow cannot type a column
            unavailable[name] = f"{name} could not be exported as data ({type(exc).__name__}: {str(exc)[:300]})"
    reply = {"ok": True, "variables": variables, "unavailable": unavailable, "missing": missing}
    return {**reply, "converted": converted}, fds
