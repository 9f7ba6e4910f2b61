"""The export's fast path: a DataFrame/Series of numeric and string columns as raw column buffers, read without
running any Python-level code of pandas, numpy or pyarrow.

Covered: an (exact or subclassed) ``DataFrame`` whose block manager is pandas' own ``BlockManager`` holding only
``NumpyBlock`` s of exact ``numpy.ndarray`` values of a native bool/int/uint/float dtype (no ``longdouble``) and
``ExtensionBlock`` s of an exact ``ArrowStringArray`` (pandas' default string dtype: an exact ``StringDtype`` with
storage ``"pyarrow"`` and ``na_value`` NaN or ``pd.NA``, over a ``ChunkedArray`` of exact ``string``/``large_string``
chunks), whose columns are a ``RangeIndex`` or an ``Index`` of plain labels (exact ``str``/``int``/``bool``/``None``/
finite ``float``; numpy- or ``ArrowStringArray``-backed), and whose row index is a ``RangeIndex`` or a numpy-backed
``Index`` of such a dtype; a ``Series`` likewise (one such block, a plain name). Anything else (other extension
arrays, object columns, a ``MultiIndex``, a time zone, ...) returns None here and takes the checked path of
:mod:`.export`.

Everything is read through references taken when this module is imported (in the zygote, before any worker code):
the Cython getset descriptors of ``pandas._libs.internals`` (``BlockManager.blocks``/``axes``, ``Block.values``/
``_mgr_locs``, ``BlockPlacement.as_array``), the ``__dict__`` getsets of pandas' classes (instance dictionaries
whose keys are all exact ``str``, so no key's ``__eq__`` runs), numpy's getsets and C methods on ``ndarray`` and
``dtype`` (immutable C types), pyarrow's Cython getsets and methods (``ChunkedArray.to_pylist``/``chunks``/``type``,
``Array.buffers``/``offset``/``null_count``/``type``, ``DataType.id``; immutable types), ``memoryview`` and
``os.pwrite``. A string column's dtype is read from its ``__dict__`` (``_storage``, ``_na_value``: compared as an
exact ``str``, by identity with ``pd.NA``, or as an exact NaN ``float``). Types are compared by identity. A
Python-level attribute of pandas, numpy or pyarrow that the worker replaced (``DataFrame.__len__``, a ``blocks``
property shadowing the Cython one, ``numpy.arange``, ``pyarrow.array``) is never looked up, so this path needs no
integrity scan of those libraries; the runtime's own modules, ``builtins`` and the standard modules it calls are still
checked (:data:`.export.RUNTIME_INTEGRITY`).

A frame a probe reads only some str-labelled columns of (``harness.sandbox.probes.projections``) is read the same way,
then cut to those columns from the block placements alone (:func:`_project`: row slices of the blocks, no pandas call),
and crosses as an ordinary frame entry with fewer columns, marked ``projected``.

The buffers go into one memfd per variable (64-byte aligned offsets in the entry, C order; a string column's chunks as
their Arrow buffers, whole, with each chunk's length, offset and null count), sealed by the caller; the verifier maps
it privately and rebuilds the same blocks zero-copy (``verifier._rebuild_fast``; the string chunks are validated).
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np
import pandas as pd
import pandas._libs.internals as _cy_internals
import pyarrow as pa
from pandas.core.internals.blocks import ExtensionBlock, NumpyBlock
from pandas.core.internals.managers import BlockManager, SingleBlockManager

ALIGN = 64
DTYPE_CHARS = "?bBhHiIlLqQefd"
"""numpy type characters of the dtypes the fast path carries (bool, the integers, float16/32/64)."""

_type, _id, _len, _list, _sorted, _range, _set = type, id, len, list, sorted, range, set
_map, _memoryview, _dict_get, _str, _slice, _enumerate = map, memoryview, dict.get, str, slice, enumerate
_pwrite = os.pwrite


def _getset(kind: type, name: str) -> Any:
    return kind.__dict__[name].__get__


def _dict_getset(kind: type) -> Any:
    return next(c.__dict__["__dict__"] for c in kind.__mro__ if "__dict__" in c.__dict__).__get__


_MGR_BLOCKS = _getset(_cy_internals.BlockManager, "blocks")
_MGR_AXES = _getset(_cy_internals.BlockManager, "axes")
_BLOCK_VALUES = _getset(_cy_internals.Block, "values")
_BLOCK_LOCS = _getset(_cy_internals.Block, "_mgr_locs")
_PLACEMENT_ARRAY = _getset(_cy_internals.BlockPlacement, "as_array")
_ND_DTYPE, _ND_SHAPE, _ND_NDIM = (_getset(np.ndarray, n) for n in ("dtype", "shape", "ndim"))
_ND_COPY, _ND_TOLIST, _ND_GETITEM = np.ndarray.copy, np.ndarray.tolist, np.ndarray.__getitem__
_DT_STR, _DT_NATIVE = _getset(np.dtype, "str"), _getset(np.dtype, "isnative")
_RANGE_START, _RANGE_STOP, _RANGE_STEP = (_getset(range, n) for n in ("start", "stop", "step"))
_TO_PYLIST, _CHUNKED_TYPE = pa.ChunkedArray.to_pylist, _getset(pa.ChunkedArray, "type")
_ARROW_TYPE_ID = _getset(pa.DataType, "id")
_ARROW_STRING_IDS = frozenset(_ARROW_TYPE_ID(t) for t in (pa.string(), pa.large_string(), pa.string_view()))
_ARROW_DATATYPE = pa.DataType
_CHUNKS, _CHUNK_TYPE = _getset(pa.ChunkedArray, "chunks"), _getset(pa.Array, "type")
_CHUNK_OFFSET, _CHUNK_NULLS, _CHUNK_BUFFERS = (
    _getset(pa.Array, "offset"),
    _getset(pa.Array, "null_count"),
    pa.Array.buffers,
)
_STRING_CHUNKS = {_id(pa.lib.StringArray): "string", _id(pa.lib.LargeStringArray): "large_string"}
_STRING_TYPE_IDS = {_ARROW_TYPE_ID(pa.string()): "string", _ARROW_TYPE_ID(pa.large_string()): "large_string"}
_BUFFER, _NA, _STRING_DTYPE = pa.Buffer, pd.NA, pd.StringDtype
_FRAME, _SERIES, _INDEX, _RANGE_INDEX = pd.DataFrame, pd.Series, pd.Index, pd.RangeIndex
_ARROW_STRING = pd.arrays.ArrowStringArray
_NDARRAY, _CHUNKED, _PLACEMENT, _NUMPY_BLOCK = np.ndarray, pa.ChunkedArray, _cy_internals.BlockPlacement, NumpyBlock
_EXTENSION_BLOCK = ExtensionBlock
_BLOCK_MANAGER, _SINGLE_MANAGER = BlockManager, SingleBlockManager
_DICT_OF_FRAME = _dict_getset(_FRAME)  # NDFrame's: also a Series'
_DICT_OF_INDEX = _dict_getset(_INDEX)
_DICT_OF_SINGLE = _dict_getset(_SINGLE_MANAGER)
_DICT_OF_ARRAY = _dict_getset(_ARROW_STRING)
_DICT_OF_DTYPE = _dict_getset(_STRING_DTYPE)
_DTYPE_IDS = frozenset(_id(_type(np.dtype(c))) for c in DTYPE_CHARS)
_LABEL_IDS = frozenset(map(id, (str, int, bool, type(None))))
_STR_ONLY = frozenset({str})


class NotFast(Exception):
    """The value is outside what the fast path reads; the checked path exports it."""


def _fields(mapping: Any, *keys: str) -> tuple[Any, ...]:
    """``keys`` of an instance dictionary; its keys must all be exact ``str`` (a lookup then compares no object
    of the worker's)."""
    if _type(mapping) is not dict or not _set(_map(_type, mapping)) <= _STR_ONLY:
        raise NotFast
    values = []
    for key in keys:
        value = _dict_get(mapping, key, _MISSING)
        if value is _MISSING:
            raise NotFast
        values.append(value)
    return tuple(values)


_MISSING = object()


def _label(value: Any) -> Any:
    kind = _type(value)
    if _id(kind) in _LABEL_IDS:
        return value
    if kind is float and value == value and value - value == 0.0:  # float's own ==/- on an exact float
        return value
    raise NotFast


def _numeric(values: Any, ndim: int) -> Any:
    """``values`` when it is an exact ndarray of ``ndim`` dimensions and a carried native dtype."""
    if _type(values) is not _NDARRAY or _ND_NDIM(values) != ndim:
        raise NotFast
    dtype = _ND_DTYPE(values)
    if _id(_type(dtype)) not in _DTYPE_IDS or not _DT_NATIVE(dtype):
        raise NotFast
    return values


def _range_of(value: Any) -> list[int]:
    if _type(value) is not range:
        raise NotFast
    return [_RANGE_START(value), _RANGE_STOP(value), _RANGE_STEP(value)]


def _row_index(index: Any, arrays: list[Any]) -> dict[str, Any]:
    kind = _type(index)
    if kind is _RANGE_INDEX:
        rng, name = _fields(_DICT_OF_INDEX(index), "_range", "_name")
        return {"range": _range_of(rng), "name": _label(name)}
    if kind is not _INDEX:
        raise NotFast
    data, name = _fields(_DICT_OF_INDEX(index), "_data", "_name")
    values = _numeric(data, 1)
    arrays.append(values)
    return {"dtype": _DT_STR(_ND_DTYPE(values)), "length": _ND_SHAPE(values)[0], "name": _label(name)}


def _column_labels(columns: Any) -> tuple[list[Any], Any]:
    kind = _type(columns)
    if kind is _RANGE_INDEX:
        rng, name = _fields(_DICT_OF_INDEX(columns), "_range", "_name")
        return _list(_range(*_range_of(rng))), _label(name)
    if kind is not _INDEX:
        raise NotFast
    data, name = _fields(_DICT_OF_INDEX(columns), "_data", "_name")
    if _type(data) is _NDARRAY:
        labels = _ND_TOLIST(data)  # the elements themselves (an object array) or Python numbers
    elif _type(data) is _ARROW_STRING:
        (chunked,) = _fields(_DICT_OF_ARRAY(data), "_pa_array")
        if _type(chunked) is not _CHUNKED:
            raise NotFast
        kind = _CHUNKED_TYPE(chunked)  # plain strings only: an extension type's scalars could run Python code
        if _type(kind) is not _ARROW_DATATYPE or _ARROW_TYPE_ID(kind) not in _ARROW_STRING_IDS:
            raise NotFast
        labels = _TO_PYLIST(chunked)
    else:
        raise NotFast
    return [_label(v) for v in labels], _label(name)


def _strings(values: Any, nrows: int) -> tuple[dict[str, Any], list[Any]]:
    """An exact ``ArrowStringArray`` of ``nrows`` rows (module docstring) as its block entry without ``locs``
    (``string``: its dtype's ``na_value``, ``"nan"`` or ``"NA"``; ``chunks``: each chunk's type, length, offset, null
    count and buffer slots) and the chunks' buffers (None slots omitted), in that order."""
    if _type(values) is not _ARROW_STRING:
        raise NotFast
    chunked, dtype = _fields(_DICT_OF_ARRAY(values), "_pa_array", "_dtype")
    if _type(chunked) is not _CHUNKED or _type(dtype) is not _STRING_DTYPE:
        raise NotFast
    storage, na_value = _fields(_DICT_OF_DTYPE(dtype), "_storage", "_na_value")
    if _type(storage) is not str or storage != "pyarrow":
        raise NotFast
    if na_value is _NA:
        na = "NA"
    elif _type(na_value) is float and na_value != na_value:  # float's own != on an exact float: NaN
        na = "nan"
    else:
        raise NotFast
    chunks = _CHUNKS(chunked)
    if _type(chunks) is not list:
        raise NotFast
    specs, buffers, total = [], [], 0
    for chunk in chunks:
        kind, arrow = _dict_get(_STRING_CHUNKS, _id(_type(chunk))), _CHUNK_TYPE(chunk)
        if (
            kind is None
            or _type(arrow) is not _ARROW_DATATYPE
            or _dict_get(_STRING_TYPE_IDS, _ARROW_TYPE_ID(arrow)) != kind
        ):
            raise NotFast
        held = _CHUNK_BUFFERS(chunk)
        if _type(held) is not list or _len(held) != 3:
            raise NotFast
        slots: list[dict[str, int] | None] = []
        for buffer in held:
            if buffer is None:
                slots.append(None)
                continue
            if _type(buffer) is not _BUFFER:
                raise NotFast
            slots.append({})
            buffers.append(buffer)
        length = _len(chunk)  # the exact Cython type's own __len__
        total += length
        specs.append(
            {"type": kind, "length": length, "offset": _CHUNK_OFFSET(chunk), "null_count": _CHUNK_NULLS(chunk)}
            | {"buffers": slots}
        )
    if total != nrows:
        raise NotFast
    return {"string": na, "chunks": specs}, buffers


def _blocks(blocks: Any, ncols: int, nrows: int) -> tuple[list[dict[str, Any]], list[Any]]:
    """The blocks' entries and, per block, what it writes: a numeric block's ndarray, a string block's list of
    Arrow buffers."""
    if _type(blocks) is not tuple:
        raise NotFast
    out, items, seen = [], [], []
    for block in blocks:
        kind = _type(block)
        if kind is not _NUMPY_BLOCK and kind is not _EXTENSION_BLOCK:
            raise NotFast
        placement = _BLOCK_LOCS(block)
        if _type(placement) is not _PLACEMENT:
            raise NotFast
        locs = _PLACEMENT_ARRAY(placement)
        if _type(locs) is not _NDARRAY:
            raise NotFast
        locs = _ND_TOLIST(locs)
        seen += locs
        if kind is _EXTENSION_BLOCK:
            if _len(locs) != 1:
                raise NotFast
            spec, buffers = _strings(_BLOCK_VALUES(block), nrows)
            items.append(buffers)
            out.append({**spec, "locs": locs})
            continue
        values = _numeric(_BLOCK_VALUES(block), 2)
        shape = _ND_SHAPE(values)
        if shape[0] != _len(locs) or shape[1] != nrows:
            raise NotFast
        items.append(values)
        out.append({"dtype": _DT_STR(_ND_DTYPE(values)), "shape": [shape[0], shape[1]], "locs": locs})
    if _sorted(seen) != _list(_range(ncols)):
        raise NotFast
    return out, items


def _flat(items: list[Any]) -> list[Any]:
    """The blocks' items (:func:`_blocks`) as the flat list :func:`write` takes."""
    return [part for item in items for part in (item if _type(item) is list else [item])]


def _project(
    labels: list[Any], blocks: list[dict[str, Any]], items: list[Any], wanted: Any
) -> tuple[list[Any], list[dict[str, Any]], list[Any]] | None:
    """The columns whose label is in ``wanted`` (a list of exact ``str``; :func:`harness.sandbox.probes.projections`),
    in the frame's order, duplicates kept: ``(labels, blocks, items)`` with each numeric block cut to runs of its
    wanted rows (views: only those rows are written) and each string block kept or dropped. None (export it whole)
    unless every label of the frame is an exact ``str`` and each wanted label is one of them. Only exact ``str`` are
    hashed or compared (their own methods)."""
    if _type(wanted) is not list or not _set(_map(_type, wanted)) <= _STR_ONLY:
        return None
    if not _set(_map(_type, labels)) <= _STR_ONLY:
        return None
    wanted = _set(wanted)
    keep = [p for p, label in _enumerate(labels) if label in wanted]
    if _len(_set([labels[p] for p in keep])) != _len(wanted):
        return None
    position = {p: i for i, p in _enumerate(keep)}
    out, views = [], []
    for block, values in zip(blocks, items, strict=True):
        locs = block["locs"]
        if "chunks" in block:  # a string column: one loc, kept whole or dropped
            if locs[0] in position:
                out.append({**block, "locs": [position[locs[0]]]})
                views.append(values)
            continue
        rows = [r for r, loc in _enumerate(locs) if loc in position]
        start = 0
        while start < _len(rows):
            end = start + 1
            while end < _len(rows) and rows[end] == rows[end - 1] + 1:
                end += 1
            low, high = rows[start], rows[end - 1] + 1
            views.append(values if low == 0 and high == _len(locs) else _ND_GETITEM(values, _slice(low, high)))
            shape = [high - low, block["shape"][1]]
            out.append({"dtype": block["dtype"], "shape": shape, "locs": [position[loc] for loc in locs[low:high]]})
            start = end
    return [labels[p] for p in keep], out, views


def read(obj: Any, frame: bool, columns: Any = None) -> tuple[dict[str, Any], list[Any]]:
    """The fast entry of a DataFrame (``frame``) or Series and the arrays to write (index data first, then the
    blocks': ndarrays and Arrow buffers), or :class:`NotFast`. ``columns``: the str labels a probe reads of a frame
    (:func:`_project`; a projected entry says ``projected``, and is a frame entry like any other, with fewer columns);
    ignored for a Series."""
    arrays: list[Any] = []
    if frame:
        (manager,) = _fields(_DICT_OF_FRAME(obj), "_mgr")
        if _type(manager) is not _BLOCK_MANAGER:
            raise NotFast
        axes = _MGR_AXES(manager)
        if _type(axes) is not list or _len(axes) != 2:
            raise NotFast
        labels, columns_name = _column_labels(axes[0])
        index = _row_index(axes[1], arrays)
        nrows = index["length"] if "length" in index else _len(_range(*index["range"]))
        blocks, items = _blocks(_MGR_BLOCKS(manager), _len(labels), nrows)
        entry = {"kind": "frame", "columns": labels, "columns_names": [columns_name], "multi": False}
        projected = None if columns is None else _project(labels, blocks, items, columns)
        if projected is not None:
            entry["columns"], blocks, items = projected
            entry["projected"] = True
        arrays += _flat(items)
    else:
        manager, series_name = _fields(_DICT_OF_FRAME(obj), "_mgr", "_name")
        if _type(manager) is not _SINGLE_MANAGER:
            raise NotFast
        axes, held = _fields(_DICT_OF_SINGLE(manager), "axes", "blocks")
        if _type(axes) is not list or _len(axes) != 1 or _type(held) is not tuple or _len(held) != 1:
            raise NotFast
        index = _row_index(axes[0], arrays)
        nrows = index["length"] if "length" in index else _len(_range(*index["range"]))
        kind = _type(held[0])
        if kind is _EXTENSION_BLOCK:
            spec, buffers = _strings(_BLOCK_VALUES(held[0]), nrows)
            arrays += buffers
            blocks = [{**spec, "locs": [0]}]
        elif kind is _NUMPY_BLOCK:
            values = _numeric(_BLOCK_VALUES(held[0]), 1)
            if _ND_SHAPE(values)[0] != nrows:
                raise NotFast
            arrays.append(values)
            blocks = [{"dtype": _DT_STR(_ND_DTYPE(values)), "shape": [nrows], "locs": [0]}]
        else:
            raise NotFast
        entry = {"kind": "series", "name": _label(series_name)}
    return {**entry, "path": "fast", "index": index, "blocks": blocks}, arrays


def write(fd: int, entry: dict[str, Any], arrays: list[Any]) -> None:
    """Write ``arrays`` (C order) into ``fd`` at 64-byte aligned offsets, recorded as ``offset`` in ``entry``'s
    index (when it has data) and blocks, in that order; a string block's buffers in its chunks' buffer slots, which
    also get their ``size``."""
    targets = [] if "range" in entry["index"] else [entry["index"]]
    for block in entry["blocks"]:
        if "chunks" in block:
            targets += [slot for chunk in block["chunks"] for slot in chunk["buffers"] if slot is not None]
        else:
            targets.append(block)
    offset = 0
    for target, values in zip(targets, arrays, strict=True):
        view = _memoryview(values)
        if not view.c_contiguous:
            view = _memoryview(_ND_COPY(values))  # ndarray.copy: C order (an Arrow buffer is always contiguous)
        size = view.nbytes
        if size:  # (a view with a zero in its shape cannot be cast; it writes nothing)
            view = view.cast("B")
        target["offset"] = offset
        if "dtype" not in target and "length" not in target:
            target["size"] = size
        done = 0
        while done < size:
            done += _pwrite(fd, view[done:], offset + done)
        offset += -(-size // ALIGN) * ALIGN
