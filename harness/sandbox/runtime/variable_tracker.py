"""Variable tracking: which names a cell created, changed (rebound or mutated in place) or deleted.

Detection, cheapest signal first (all per tracked name, after every cell):

1. **Presence** — a name that appears is *created*, one that disappears is *deleted*.
2. **Identity** — the name now points to another object (``id`` differs). Immutable scalars (None, bool, int,
   float, complex, str, bytes) compare by value instead, so ``x = 500`` run twice is not a change. The objects of the
   names a cell rebinds are kept alive until the cell ends, so a new object cannot take over a freed one's ``id``
   (which would read as "untouched"); the price is that such an object lives until the end of its cell.
3. **Shallow fingerprint** — O(1) per object: type, ``len`` of sized containers, ``shape`` of arrays/frames.
   Catches appends/drops made through aliases or functions the AST cannot see.
4. **Syntax** — the cell's AST says the object was mutated in place: an assignment, augmented assignment or
   ``del`` on a subscript/attribute rooted at the name (``df['x'] = ...``, ``df.loc[0, 'a'] = 1``, ``obj.a += 1``),
   a call of a known mutating method rooted at it (``lst.append``, ``d.update``, ``arr.sort`` ...), or any method
   call rooted at it with ``inplace=True``. The object is then *changed* without hashing it.
5. **Content fingerprint** — only for names the cell may have mutated in ways syntax cannot tell: names passed as
   an argument to a call that is not known to be pure, names on which an unknown method is called, globals read by
   user-defined functions the cell calls, and aliases (same ``id``) of all of these. For these names a content hash
   is taken before the cell (cached from the previous cell when the identity is unchanged) and after it. Numeric
   arrays and DataFrame blocks are hashed with CRC32 over their raw memory (~4 GB/s); object arrays hash their
   element pointers (so a replaced string is seen, a mutated list *inside* a cell is not).

A cell that touches nothing costs O(number of names); a 1,000,000-row DataFrame is hashed only when a cell hands it
to a function that might mutate it. Known blind spots (documented, by design): mutation of an object reachable
only through another container (``d = {'k': lst}``, then ``lst`` mutated via a name the cell does not mention),
mutation inside methods of user classes called without the object appearing in the cell, and value edits inside
objects that are neither containers, arrays nor frames (their ``__dict__`` is hashed one level deep).

Not tracked: names starting with ``_``, modules, and functions/classes not defined in the kernel (imported ones,
and the harness helpers such as ``print_result``).
"""

from __future__ import annotations

import ast
import builtins
import reprlib
import types
import zlib
from dataclasses import dataclass
from typing import Any

MUTATING_METHODS = frozenset(
    "append extend insert pop remove clear update setdefault popitem sort reverse add discard "
    "difference_update intersection_update symmetric_difference_update fill resize put itemset setflags "
    "setfield byteswap partition __setitem__ __delitem__ __iadd__ set_axis rename_axis "
    "insert_column update_inplace".split()
)
# Methods that never mutate their receiver (frequent in analysis code; avoids hashing big frames for ``df.head()``).
PURE_METHODS = frozenset(
    "head tail describe info mean median sum min max std var count nunique unique value_counts copy groupby agg "
    "aggregate merge join filter query loc iloc at iat astype to_numpy tolist to_list to_dict to_json to_csv "
    "to_string reset_index set_index sort_values sort_index drop dropna fillna rename replace isna notna isnull "
    "notnull any all round abs corr cov apply map items keys values get index find startswith endswith split strip "
    "lower upper format join shape dtypes columns idxmax idxmin quantile cumsum pivot pivot_table melt stack "
    "unstack sample nlargest nsmallest duplicated drop_duplicates equals mode rank diff pct_change shift clip "
    "between isin where mask explode transpose dot reshape ravel flatten argmax argmin argsort item".split()
)
# Calls that never mutate their arguments.
PURE_FUNCTIONS = frozenset(
    "print len repr str int float bool list tuple dict set frozenset sorted reversed sum min max abs round type "
    "isinstance issubclass hasattr getattr id hash iter enumerate zip range format any all map filter "
    "print_result display".split()
)
DYNAMIC_NAMES = frozenset({"globals", "vars", "locals", "exec", "eval", "setattr", "delattr", "__import__"})
_SCALARS = (type(None), bool, int, float, complex, str, bytes)
_MAX_ITEMS = 10_000
_repr = reprlib.Repr()
_repr.maxstring = 80
_repr.maxother = 80
_repr.maxlist = _repr.maxtuple = _repr.maxdict = _repr.maxset = 8


@dataclass
class CellNames:
    """What a cell's AST says about the names it touches."""

    stored: set[str]  # rebound (assign, for, with, import, def, class, del)
    mutated: set[str]  # mutated in place by syntax
    hash_suspects: set[str]  # may have been mutated in ways syntax cannot tell
    dynamic: bool  # uses globals()/exec/...: every name is a suspect


def _root_name(node: ast.AST) -> str | None:
    while isinstance(node, (ast.Attribute, ast.Subscript, ast.Starred)):
        node = node.value
    return node.id if isinstance(node, ast.Name) else None


class _Visitor(ast.NodeVisitor):
    def __init__(self) -> None:
        self.names = CellNames(set(), set(), set(), False)
        self.called: set[str] = set()

    def _target(self, node: ast.AST, augmented: bool = False) -> None:
        if isinstance(node, ast.Name):
            self.names.stored.add(node.id)
        elif isinstance(node, (ast.Tuple, ast.List)):
            for elt in node.elts:
                self._target(elt, augmented)
        elif isinstance(node, ast.Starred):
            self._target(node.value, augmented)
        elif isinstance(node, (ast.Attribute, ast.Subscript)):
            root = _root_name(node)
            if root:
                self.names.mutated.add(root)
            self.visit(node)

    def visit_Assign(self, node: ast.Assign) -> None:
        for target in node.targets:
            self._target(target)
        self.visit(node.value)

    def visit_AnnAssign(self, node: ast.AnnAssign) -> None:
        if node.value is not None:
            self._target(node.target)
            self.visit(node.value)

    def visit_AugAssign(self, node: ast.AugAssign) -> None:
        root = _root_name(node.target)
        if root:  # ``x += 1`` rebinds (or mutates a list in place): treat as both
            self.names.stored.add(root) if isinstance(node.target, ast.Name) else None
            self.names.mutated.add(root)
        self.visit(node.value)

    def visit_Delete(self, node: ast.Delete) -> None:
        for target in node.targets:
            self._target(target)

    def visit_For(self, node: ast.For) -> None:
        self._target(node.target)
        self.generic_visit(node)

    visit_AsyncFor = visit_For

    def visit_withitem(self, node: ast.withitem) -> None:
        if node.optional_vars is not None:
            self._target(node.optional_vars)
        self.visit(node.context_expr)

    def visit_NamedExpr(self, node: ast.NamedExpr) -> None:
        self._target(node.target)
        self.visit(node.value)

    def visit_Import(self, node: ast.Import | ast.ImportFrom) -> None:
        for alias in node.names:
            if alias.name == "*":
                self.names.dynamic = True
            else:
                self.names.stored.add((alias.asname or alias.name).split(".")[0])

    visit_ImportFrom = visit_Import

    def visit_FunctionDef(self, node: ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) -> None:
        self.names.stored.add(node.name)  # the body runs later, when called: handled through co_names

    visit_AsyncFunctionDef = visit_FunctionDef
    visit_ClassDef = visit_FunctionDef

    def visit_Global(self, node: ast.Global) -> None:
        self.names.hash_suspects.update(node.names)

    def visit_Call(self, node: ast.Call) -> None:
        func = node.func
        pure = False
        if isinstance(func, ast.Name):
            self.called.add(func.id)
            if func.id in DYNAMIC_NAMES:
                self.names.dynamic = True
            pure = func.id in PURE_FUNCTIONS
        elif isinstance(func, ast.Attribute):
            root = _root_name(func.value)
            inplace = any(
                kw.arg == "inplace" and not (isinstance(kw.value, ast.Constant) and kw.value.value is False)
                for kw in node.keywords
            )
            if root and (func.attr in MUTATING_METHODS or inplace):
                self.names.mutated.add(root)
            elif root and func.attr not in PURE_METHODS:
                self.names.hash_suspects.add(root)
            has_out = any(kw.arg == "out" for kw in node.keywords)
            pure = func.attr in PURE_METHODS and not has_out
        for arg in [*node.args, *(kw.value for kw in node.keywords)]:
            if not pure:
                root = _root_name(arg)
                if root:
                    self.names.hash_suspects.add(root)
        self.generic_visit(node)


def analyse_cell(tree: ast.AST, namespace: dict[str, Any]) -> CellNames:
    """Names a cell stores into, mutates by syntax, or may mutate otherwise (see module docstring)."""
    visitor = _Visitor()
    visitor.visit(tree)
    names = visitor.names
    # Globals read by user-defined functions the cell calls (and the functions those call), two levels deep.
    frontier = [namespace.get(n) for n in visitor.called]
    seen: set[int] = set()
    for _ in range(3):
        nxt = []
        for fn in frontier:
            code = getattr(fn, "__code__", None)
            if code is None or id(code) in seen:
                continue
            seen.add(id(code))
            for co_name in _code_names(code):
                if co_name in namespace:
                    names.hash_suspects.add(co_name)
                    nxt.append(namespace[co_name])
        frontier = nxt
    if names.dynamic or any(n in DYNAMIC_NAMES for n in names.hash_suspects):
        names.dynamic = True
    return names


def _code_names(code: types.CodeType) -> set[str]:
    out = set(code.co_names)
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            out |= _code_names(const)
    return out


# ---- fingerprints ----------------------------------------------------------------------------------------------


def _buffer_crc(arr: Any, crc: int = 0) -> int:
    import numpy as np

    if arr.dtype.hasobject:
        if not arr.flags.c_contiguous:
            arr = np.ascontiguousarray(arr)
        # Hash the element pointers: any rebinding of an element changes them. Copy-free view of the memory.
        import ctypes

        raw = (ctypes.c_char * arr.nbytes).from_address(arr.ctypes.data) if arr.nbytes else b""
        return zlib.crc32(memoryview(raw), crc)
    if not arr.flags.c_contiguous:
        arr = np.ascontiguousarray(arr)
    if arr.dtype.kind in "mM":  # datetime64 / timedelta64: the buffer protocol refuses them; same bytes as int64
        arr = arr.view(np.int64)
    return zlib.crc32(memoryview(arr).cast("B") if arr.nbytes else b"", crc)


def _array_like_fp(values: Any) -> Any:
    """Content fingerprint of a numpy array or pandas ExtensionArray."""
    import numpy as np

    if isinstance(values, np.ndarray):
        return ("nd", values.dtype.str, values.shape, _buffer_crc(values))
    for attr in ("_ndarray", "_codes"):
        inner = getattr(values, attr, None)
        if isinstance(inner, np.ndarray):
            extra = _array_like_fp(getattr(values, "categories", None)) if attr == "_codes" else None
            return (type(values).__name__, str(values.dtype), _array_like_fp(inner), extra)
    data, mask = getattr(values, "_data", None), getattr(values, "_mask", None)
    if isinstance(data, np.ndarray) and isinstance(mask, np.ndarray):
        return ("masked", str(values.dtype), _buffer_crc(data), _buffer_crc(mask))
    pa_array = getattr(values, "_pa_array", None)
    if pa_array is not None:
        crc = 0
        for chunk in getattr(pa_array, "chunks", [pa_array]):
            for buf in chunk.buffers():
                if buf is not None:
                    crc = zlib.crc32(memoryview(buf), crc)
        return ("arrow", str(values.dtype), len(values), crc)
    if hasattr(values, "_values"):  # an Index
        return _array_like_fp(values._values)
    try:
        import pandas as pd

        return ("hashed", int(pd.util.hash_array(np.asarray(values, dtype=object)).sum()))
    except Exception:
        return ("id", id(values))


def content_fingerprint(obj: Any, depth: int = 0) -> Any:
    """A hashable value that changes when ``obj``'s content changes (see module docstring for the limits)."""
    if isinstance(obj, _SCALARS):
        return (type(obj).__name__, obj)
    mod = type(obj).__module__ or ""
    if mod.startswith("numpy"):
        import numpy as np

        if isinstance(obj, np.ndarray):
            return _array_like_fp(obj)
        if isinstance(obj, np.generic):
            return ("np", obj.dtype.str, obj.tobytes())
    if mod.startswith("pandas"):
        return _pandas_fp(obj)
    if depth >= 3:
        return ("id", id(obj), _len(obj))
    if isinstance(obj, (list, tuple)):
        items = obj if len(obj) <= _MAX_ITEMS else obj[:: max(1, len(obj) // _MAX_ITEMS)]
        return (type(obj).__name__, len(obj), tuple(content_fingerprint(x, depth + 1) for x in items))
    if isinstance(obj, dict):
        items = list(obj.items())[:_MAX_ITEMS]
        return ("dict", len(obj), tuple((repr(k)[:64], content_fingerprint(v, depth + 1)) for k, v in items))
    if isinstance(obj, (set, frozenset)):
        try:
            return (type(obj).__name__, len(obj), hash(frozenset(obj)))
        except TypeError:
            return (type(obj).__name__, len(obj), id(obj))
    if isinstance(obj, (types.FunctionType, type)):
        return ("code", id(obj), id(getattr(obj, "__code__", None)))
    state = getattr(obj, "__dict__", None)
    if isinstance(state, dict):
        return ("obj", id(obj), content_fingerprint(state, depth + 1))
    return ("id", id(obj))


def _pandas_fp(obj: Any) -> Any:
    import pandas as pd

    if isinstance(obj, pd.DataFrame):
        mgr = getattr(obj, "_mgr", None)
        blocks = getattr(mgr, "blocks", None)
        if blocks is not None:
            parts = tuple((tuple(b.mgr_locs.as_array.tolist()), _array_like_fp(b.values)) for b in blocks)
        else:
            parts = tuple(_array_like_fp(obj[c].array) for c in obj.columns)
        return ("df", obj.shape, _array_like_fp(obj.columns), _array_like_fp(obj.index), parts)
    if isinstance(obj, pd.Series):
        return (
            "series",
            obj.name if isinstance(obj.name, _SCALARS) else repr(obj.name),
            _array_like_fp(obj.index),
            _array_like_fp(obj.array),
        )
    if isinstance(obj, pd.RangeIndex):
        return ("range", obj.start, obj.stop, obj.step)
    if isinstance(obj, pd.Index):
        return _array_like_fp(obj)
    if isinstance(obj, (pd.Timestamp, pd.Timedelta, pd.Period, pd.Interval)):
        return ("pd", repr(obj))
    state = getattr(obj, "__dict__", None)
    return ("pdobj", id(obj), len(state) if isinstance(state, dict) else None)


def _len(obj: Any) -> int | None:
    try:
        return len(obj) if isinstance(obj, (list, tuple, dict, set, frozenset, bytearray)) else None
    except Exception:
        return None


def shape_of(obj: Any) -> list[int] | None:
    shape = getattr(obj, "shape", None)
    if isinstance(shape, tuple) and all(isinstance(s, int) for s in shape):
        return list(shape)
    n = _len(obj)
    return [n] if n is not None else None


def shallow_fingerprint(obj: Any) -> Any:
    """O(1): type, identity-independent size signals."""
    shape = getattr(obj, "shape", None) if not isinstance(obj, type) else None
    if not isinstance(shape, tuple):
        shape = _len(obj)
    return (type(obj), shape)


def type_name(obj: Any) -> str:
    cls = type(obj)
    mod = cls.__module__ or ""
    if mod == "builtins":
        return cls.__qualname__
    top = mod.split(".")[0]
    short = {"pandas": "pd", "numpy": "np"}.get(top, mod)
    return f"{short}.{cls.__qualname__}"


def summarize(obj: Any, limit: int = 160) -> str:
    """A short, cheap description of a value (never a full repr of a big object)."""
    try:
        mod = type(obj).__module__ or ""
        if mod.startswith("pandas"):
            import pandas as pd

            if isinstance(obj, pd.DataFrame):
                cols = ", ".join(map(str, obj.columns[:8])) + (", ..." if obj.shape[1] > 8 else "")
                text = f"DataFrame {obj.shape[0]}x{obj.shape[1]} columns=[{cols}]"
            elif isinstance(obj, pd.Series):
                head = ", ".join(repr(v) for v in obj.head(5).tolist())
                more = ", ..." if len(obj) > 5 else ""
                text = f"Series name={obj.name!r} len={len(obj)} dtype={obj.dtype} [{head}{more}]"
            else:
                text = _repr.repr(obj)
        elif mod.startswith("numpy") and hasattr(obj, "shape") and getattr(obj, "ndim", 0) > 0:
            flat = obj.ravel()[:6].tolist() if obj.size else []
            text = f"ndarray {obj.dtype} shape={obj.shape} {flat}{'...' if obj.size > 6 else ''}"
        else:
            text = _repr.repr(obj)
    except Exception as exc:  # a broken __repr__ must not break tracking
        text = f"<{type(obj).__name__}: repr failed: {type(exc).__name__}>"
    return text if len(text) <= limit else text[: limit - 3] + "..."


# ---- the tracker ---------------------------------------------------------------------------------------------------


@dataclass
class _Entry:
    ident: int
    value_key: Any  # for scalars: (type, value); else None
    shallow: Any
    content: Any = None  # cached content fingerprint, None when not computed


class VariableTracker:
    """Keeps one entry per tracked name and diffs the namespace after each cell."""

    def __init__(self, hidden_ids: set[int], module_name: str = "__main__") -> None:
        self._hidden = hidden_ids
        self._module = module_name
        self._entries: dict[str, _Entry] = {}
        self._builtin_names = set(dir(builtins))
        self._held: list[Any] = []  # the values of the names a running cell rebinds (see before_cell)

    def is_tracked(self, name: str, value: Any) -> bool:
        if name.startswith("_") or id(value) in self._hidden or isinstance(value, types.ModuleType):
            return False
        if isinstance(value, (types.FunctionType, type, types.BuiltinFunctionType)):
            return getattr(value, "__module__", None) == self._module
        return True

    def _make_entry(self, value: Any) -> _Entry:
        key = (type(value), value) if isinstance(value, _SCALARS) else None
        return _Entry(id(value), key, shallow_fingerprint(value))

    def before_cell(self, namespace: dict[str, Any], names: CellNames) -> set[str]:
        """Compute missing content fingerprints of the suspects; returns the suspect set to re-check after."""
        suspects = set(self._entries) if names.dynamic else set(names.hash_suspects) & set(self._entries)
        # Keep the objects of the names the cell rebinds alive until after_cell: freed mid-cell, an object's address
        # (its id) could go to a new object of the same shape, and "same id" would then read as "untouched".
        self._held = [namespace[name] for name in names.stored if name in self._entries and name in namespace]
        by_id: dict[int, list[str]] = {}
        for name, entry in self._entries.items():
            by_id.setdefault(entry.ident, []).append(name)
        for name in list(suspects | names.mutated):
            entry = self._entries.get(name)
            if entry is not None:
                aliases = by_id.get(entry.ident, [])
                suspects.update(a for a in aliases if a not in names.mutated)
        for name in suspects:
            entry = self._entries[name]
            if entry.content is None and entry.value_key is None:
                entry.content = content_fingerprint(namespace[name]) if name in namespace else None
        return suspects

    def after_cell(self, namespace: dict[str, Any], names: CellNames, suspects: set[str]) -> list[dict[str, Any]]:
        try:
            return self._diff(namespace, names, suspects)
        finally:
            self._held = []

    def _diff(self, namespace: dict[str, Any], names: CellNames, suspects: set[str]) -> list[dict[str, Any]]:
        changes: list[dict[str, Any]] = []
        current = {n: v for n, v in list(namespace.items()) if self.is_tracked(n, v)}
        mutated_ids = {self._entries[n].ident for n in names.mutated if n in self._entries}
        for name in [n for n in self._entries if n not in current]:
            del self._entries[name]
            changes.append({"name": name, "kind": "deleted", "type": None, "shape": None, "summary": ""})
        for name, value in current.items():
            old = self._entries.get(name)
            new = self._make_entry(value)
            if old is None:
                kind = "created"
            elif old.value_key is not None or new.value_key is not None:
                same_value = old.value_key is not None and old.value_key == new.value_key
                kind = None if same_value else "changed"
            elif old.ident != new.ident or old.shallow != new.shallow or old.ident in mutated_ids:
                kind = "changed"
            elif name in suspects:
                new.content = content_fingerprint(value)
                kind = "changed" if new.content != old.content else None
                if kind is None:
                    self._entries[name] = new
                    continue
            else:
                continue  # untouched: keep the entry (and its cached content fingerprint)
            if name in suspects and new.content is None and new.value_key is None:
                new.content = content_fingerprint(value)
            self._entries[name] = new
            if kind:
                changes.append(
                    {
                        "name": name,
                        "kind": kind,
                        "type": type_name(value),
                        "shape": shape_of(value),
                        "summary": summarize(value),
                    }
                )
        return changes

    def state(self) -> list[tuple[Any, ...]]:
        """The entries as plain data for a state digest: per name its scalar key, shallow and cached content
        fingerprints, and the group of names sharing its object (ids themselves differ between processes)."""
        groups: dict[int, str] = {}
        for name, entry in sorted(self._entries.items()):
            groups.setdefault(entry.ident, name)
        return [
            (name, e.value_key, e.shallow, e.content, groups[e.ident]) for name, e in sorted(self._entries.items())
        ]

    def describe_all(self, namespace: dict[str, Any]) -> list[dict[str, Any]]:
        return [
            {
                "name": n,
                "type": type_name(namespace[n]),
                "shape": shape_of(namespace[n]),
                "summary": summarize(namespace[n]),
            }
            for n in self._entries
            if n in namespace
        ]
