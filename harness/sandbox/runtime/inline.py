"""Which probes may run inside the kernel process instead of a fork (``SandboxConfig.inline_probes``).

A forked probe costs a fork and an exit of the whole kernel image, and every page the kernel writes afterwards takes
a copy-on-write fault: ~10-60 ms here, where a one-line assertion takes well under 1 ms. Most probes are assertions
over the namespace (``assert (orders['store_id'] != 'S10').all()``) or recompute a value from the task data and
compare it. :func:`inline_refusal` accepts a probe for an in-kernel run only when its syntax shows it cannot change
the namespace, the objects in it, files or processes; the kernel then runs it in a *shallow copy* of the namespace,
so whatever the probe binds (names, functions, imports) vanishes with the copy. Anything else — or anything this
module cannot judge — is forked as before. The rules, all of which must hold:

- statements: expressions, ``assert``, ``if``, ``for``, ``pass``, ``raise``, ``return``; ``try`` without
  ``finally`` whose handlers all name builtin ``Exception`` subclasses (so a ``CellTimeout`` cannot be swallowed);
  ``import`` of numpy, pandas or math only; ``def`` without decorators; assignments (below). No ``while``,
  ``with``, ``class``, ``del``, ``global``;
- stores: a plain name always (it lands in the copy). A subscript or attribute store (``x['c'] = ...``,
  ``x.loc[m, 'c'] = ...``, ``x.columns = ...``, also augmented) only into a *fresh* local: a name the probe binds
  nowhere but from a call of a method in :data:`FRESH_METHODS` (``pd.read_csv(...)``, ``y.dropna().copy()``) — a new
  object that, pandas copy-on-write included, shares nothing writable with the namespace — and at most one level
  deep (``x[k]``, or ``x.loc/iloc/at/iat[k]``). An augmented assignment to a name needs a fresh local too (``+=``
  mutates a list in place);
- expressions: no ``lambda``, walrus, ``await``/``yield``, ``*``/``**`` unpacking in calls; no attribute starting
  with ``_`` (no dunders, no private state);
- calls: a builtin from :data:`INLINE_FUNCTIONS` that nothing shadows, a function the probe defines or a name it
  binds only to allowed methods (and never rebinds otherwise), or a method/module function from
  :data:`INLINE_METHODS` (pure and at most about linear: no ``apply``/``map`` with callables, no file output, no
  joins or pivots; :data:`JOIN_METHODS` only with ``allow_joins``), never with ``out=``, ``inplace=``, ``file=`` or
  ``copy=`` other than ``True``;
- every name the namespace holds that the probe reads (even one the probe also binds) holds a plain value:
  scalars, strings, numpy arrays (not object dtype) and scalars, pandas objects, the modules numpy/pandas/math, and
  lists, tuples, dicts and sets of those (checked up to :data:`MAX_SCANNED` elements, three levels deep);
  ``globals()`` returns the copy;
- pandas, when loaded, is 3.0 or newer (copy-on-write: reading a column caches nothing that changes later writes,
  and a frame derived from another never writes into it).

Blind spot (documented): the elements of pandas object columns are not inspected, so a user-defined object stored
in a frame whose ``__eq__``/``__abs__`` has side effects would run them in the kernel. The wall-clock limit holds
inline as in any cell (``CellTimeout``); a probe stuck inside one long C call is the one case where inline is worse:
the host restarts the kernel after the grace period, where a forked probe would only lose itself. The method list
therefore leaves out the calls whose cost can explode (joins, pivots, cross products).
"""

from __future__ import annotations

import ast
import builtins
import sys
import types
from typing import Any

INLINE_FUNCTIONS = frozenset(
    "abs all any bool dict divmod enumerate float frozenset globals int isinstance len list max min print range "
    "repr reversed round set sorted str sum tuple type zip".split()
)
"""Builtins an inline probe may call: no I/O beyond the captured output (``globals()`` is the namespace copy)."""

FRESH_METHODS = frozenset(
    "read_csv read_json read_parquet read_excel copy dropna fillna drop rename replace astype reset_index set_index "
    "sort_values sort_index drop_duplicates head tail nlargest nsmallest round abs to_frame to_datetime to_numeric "
    "agg aggregate sum mean median min max count size nunique value_counts describe quantile cumsum concat".split()
)
"""Calls whose result is a new object the probe may write into (pandas copy-on-write covers derived frames)."""

INLINE_METHODS = FRESH_METHODS | frozenset(
    "std var unique groupby loc iloc at iat to_numpy tolist to_list to_dict isna notna isnull notnull any all "
    "idxmax idxmin rank diff pct_change shift clip between isin duplicated equals mode items keys values get index "
    "find startswith endswith split strip lower upper title isdigit contains isclose allclose isnan isfinite isinf "
    "floor ceil fabs sqrt log exp prod cumprod argmax argmin argsort item ravel flatten reshape transpose "
    "issubset issuperset intersection union difference symmetric_difference where "
    "assert_frame_equal assert_series_equal assert_index_equal".split()
)
"""Methods (and module functions of numpy/pandas/math) an inline probe may call: pure and at most about linear."""

JOIN_METHODS = frozenset("merge join".split())
"""Joins: pure (a new frame), but a many-to-many key can make one run long inside a single C call, where the cell
timeout cannot interrupt it. Allowed inline only with ``allow_joins`` (``SandboxConfig.inline_joins``): for callers
whose probes repeat joins of the task's own reference code, which already ran in bounded time on the same data
(the synthesis's recomputation probes)."""

SAFE_MODULES = frozenset({"numpy", "pandas", "math"})
MAX_SCANNED = 10_000
INDEXERS = frozenset({"loc", "iloc", "at", "iat"})
_SCALARS = (type(None), bool, int, float, complex, str, bytes)
_STATEMENTS = (
    ast.Expr, ast.Assert, ast.If, ast.For, ast.Pass, ast.Raise, ast.Return, ast.Try, ast.Import, ast.ImportFrom,
    ast.FunctionDef, ast.Assign, ast.AugAssign,
)  # fmt: skip
_FORBIDDEN = (ast.Lambda, ast.NamedExpr, ast.Await, ast.Yield, ast.YieldFrom, ast.Starred)


class _Scope:
    """What the probe binds (every local name, the fresh ones, the functions it defines) and which methods the rules
    allow it to call and to write into the results of (:data:`JOIN_METHODS` included with ``allow_joins``)."""

    def __init__(self, allow_joins: bool = False) -> None:
        self.methods = INLINE_METHODS | JOIN_METHODS if allow_joins else INLINE_METHODS  # callable methods
        self.fresh_methods = FRESH_METHODS | JOIN_METHODS if allow_joins else FRESH_METHODS  # results one may write
        self.not_fresh: set[str] = set()
        self.fresh: set[str] = set()
        self.functions: set[str] = set()
        self.other: set[str] = set()  # names bound by something other than a def

    def bind(self, name: str, fresh: bool = False, function: bool = False) -> None:
        """``function``: bound to something callable the rules allow (a def of the probe's, an allowed method)."""
        (self.fresh if fresh else self.not_fresh).add(name)
        (self.functions if function else self.other).add(name)

    def is_local(self, name: str) -> bool:
        return name in self.fresh or name in self.not_fresh

    def is_fresh(self, name: str) -> bool:
        return name in self.fresh and name not in self.not_fresh

    def is_function(self, name: str) -> bool:
        return name in self.functions and name not in self.other


def inline_refusal(
    tree: ast.Module, namespace: dict[str, Any], helpers: dict[str, Any] | None = None, *, allow_joins: bool = False
) -> str | None:
    """None when the probe ``tree`` may run in the kernel (see the module docstring), else why not.

    ``helpers``: the kernel's own functions in the namespace (``print_result``), allowed while the name still holds
    that very object. ``allow_joins``: also accept :data:`JOIN_METHODS`."""
    helpers = {name: value for name, value in (helpers or {}).items() if namespace.get(name) is value}
    if not _pandas_ok():
        return "pandas < 3 (no copy-on-write)"
    scope = _Scope(allow_joins)
    nodes = _walk(tree)
    _collect_bindings(nodes, scope)
    for node in nodes:
        if isinstance(node, ast.stmt) and not isinstance(node, _STATEMENTS):
            return f"statement {type(node).__name__}"
        if isinstance(node, _FORBIDDEN):
            return f"expression {type(node).__name__}"
        if isinstance(node, ast.Attribute) and node.attr.startswith("_"):
            return f"private attribute {node.attr}"
        if isinstance(node, ast.Call) and (reason := _call_refusal(node, namespace, scope, helpers)):
            return reason
        if isinstance(node, (ast.Assign, ast.AugAssign)) and (reason := _store_refusal(node, scope)):
            return reason
        if isinstance(node, ast.FunctionDef) and node.decorator_list:
            return "decorated function"
        if isinstance(node, ast.ExceptHandler) and not _catches_exceptions_only(node.type):
            return "an except clause that could catch the cell timeout"
        if isinstance(node, (ast.Import, ast.ImportFrom)) and (reason := _import_refusal(node)):
            return reason
        if isinstance(node, ast.Try) and node.finalbody:
            return "try/finally (a return or continue in it would swallow the cell timeout)"
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load) and node.id not in helpers:
            # A name the namespace holds is judged by its value even where the probe binds it too: a read before
            # the probe's own binding (``x = x.copy()``) sees the namespace's object.
            if node.id in namespace:
                if not _plain(namespace[node.id], 0, [0]):
                    return f"name {node.id} holds a {type(namespace[node.id]).__name__}"
            elif not scope.is_local(node.id) and hasattr(builtins, node.id) and not _allowed_builtin(node.id):
                return f"name {node.id} (not an allowed builtin)"  # else undefined: a NameError, as in a fork
    return None


def _walk(tree: ast.AST) -> list[ast.AST]:
    """Every node of ``tree`` in :func:`ast.walk`'s order (breadth first), as a list: about twice as fast, and the
    two passes of :func:`inline_refusal` share it."""
    nodes = [tree]
    for node in nodes:  # the list grows while it is read
        for name in node._fields:
            value = getattr(node, name, None)
            if isinstance(value, ast.AST):
                nodes.append(value)
            elif isinstance(value, list):
                nodes.extend(item for item in value if isinstance(item, ast.AST))
    return nodes


def _collect_bindings(nodes: list[ast.AST], scope: _Scope) -> None:
    """Fill ``scope`` with every name the probe binds anywhere (module level and inside its functions alike)."""
    for node in nodes:
        if isinstance(node, ast.Assign):
            fresh, method = _is_fresh_value(node.value, scope), _is_method_ref(node.value, scope)
            for target in node.targets:
                for name in _target_names(target):
                    plain = isinstance(target, ast.Name)
                    scope.bind(name, fresh=fresh and plain, function=method and plain)
        elif isinstance(node, (ast.For, ast.comprehension)):
            for name in _target_names(node.target):
                scope.bind(name)
        elif isinstance(node, ast.FunctionDef):
            scope.bind(node.name, function=True)
            args = node.args
            for arg in [*args.posonlyargs, *args.args, *args.kwonlyargs, args.vararg, args.kwarg]:
                if arg is not None:
                    scope.bind(arg.arg)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            for alias in node.names:  # ``from numpy import isnan``: callable like the method of that name
                function = isinstance(node, ast.ImportFrom) and alias.name in scope.methods
                scope.bind((alias.asname or alias.name).split(".")[0], function=function)
        elif isinstance(node, ast.ExceptHandler) and node.name:
            scope.bind(node.name)


def _target_names(target: ast.AST) -> list[str]:
    """The plain names a store target binds (``a``, ``a, b``); subscript/attribute stores bind none."""
    if isinstance(target, ast.Name):
        return [target.id]
    if isinstance(target, (ast.Tuple, ast.List)):
        return [name for elt in target.elts for name in _target_names(elt)]
    return []


def _is_fresh_value(value: ast.AST, scope: _Scope) -> bool:
    return (
        isinstance(value, ast.Call)
        and isinstance(value.func, ast.Attribute)
        and value.func.attr in scope.fresh_methods
    )


def _is_method_ref(value: ast.AST, scope: _Scope) -> bool:
    """``check = pd.testing.assert_frame_equal if ... else ...``: a name bound to allowed methods only."""
    if isinstance(value, ast.IfExp):
        return _is_method_ref(value.body, scope) and _is_method_ref(value.orelse, scope)
    return isinstance(value, ast.Attribute) and value.attr in scope.methods


def _store_refusal(node: ast.Assign | ast.AugAssign, scope: _Scope) -> str | None:
    targets = node.targets if isinstance(node, ast.Assign) else [node.target]
    for target in targets:
        if isinstance(node, ast.AugAssign) and isinstance(target, ast.Name):
            if not scope.is_fresh(target.id):
                return f"augmented assignment to {target.id} (not a fresh local)"
            continue
        for sub in _flatten(target):
            if isinstance(sub, ast.Name):
                continue
            root = _store_root(sub)
            if root is None or not scope.is_fresh(root):
                return f"store into {type(sub).__name__} of {root or 'an expression'} (not a fresh local)"
    return None


def _flatten(target: ast.AST) -> list[ast.AST]:
    if isinstance(target, (ast.Tuple, ast.List)):
        return [sub for elt in target.elts for sub in _flatten(elt)]
    return [target]


def _store_root(target: ast.AST) -> str | None:
    """``x`` for ``x[k]``, ``x.attr`` and ``x.loc[k]`` (one level into a local object); None for anything deeper."""
    if isinstance(target, (ast.Subscript, ast.Attribute)):
        inner = target.value
        if isinstance(target, ast.Subscript) and isinstance(inner, ast.Attribute) and inner.attr in INDEXERS:
            inner = inner.value
        if isinstance(inner, ast.Name):
            return inner.id
    return None


def _call_refusal(node: ast.Call, namespace: dict[str, Any], scope: _Scope, helpers: dict[str, Any]) -> str | None:
    for kw in node.keywords:
        if kw.arg in ("out", "inplace", "file") or kw.arg is None:
            return "call with out=/inplace=/file=/**kwargs"
        if kw.arg == "copy" and not (isinstance(kw.value, ast.Constant) and kw.value.value is True):
            return "call with copy= (could return a view)"
    func = node.func
    if isinstance(func, ast.Name):
        if func.id in helpers or scope.is_function(func.id):
            return None
        if scope.is_local(func.id) or func.id in namespace or func.id not in INLINE_FUNCTIONS:
            return f"call of {func.id}"
        return None
    if isinstance(func, ast.Attribute):
        return None if func.attr in scope.methods else f"method {func.attr}"
    return f"call of a {type(func).__name__}"


def _catches_exceptions_only(kind: ast.AST | None) -> bool:
    """An except clause names only builtin ``Exception`` subclasses (never bare, ``BaseException`` or a variable)."""
    if isinstance(kind, ast.Tuple):
        return bool(kind.elts) and all(_catches_exceptions_only(elt) for elt in kind.elts)
    if isinstance(kind, ast.Name):
        value = getattr(builtins, kind.id, None)
        return isinstance(value, type) and issubclass(value, Exception)
    return False


def _import_refusal(node: ast.Import | ast.ImportFrom) -> str | None:
    if isinstance(node, ast.ImportFrom):
        modules = [node.module or ""] if node.level == 0 else [""]
        if any(alias.name == "*" for alias in node.names):
            return "import *"
    else:
        modules = [alias.name for alias in node.names]
    for module in modules:
        if module.split(".")[0] not in SAFE_MODULES:
            return f"import of {module or 'a relative module'}"
    return None


def _allowed_builtin(name: str) -> bool:
    value = getattr(builtins, name, None)
    return name in INLINE_FUNCTIONS or (isinstance(value, type) and issubclass(value, Exception))


def _pandas_ok() -> bool:
    pandas = sys.modules.get("pandas")
    if pandas is None:
        return True
    try:
        return int(str(pandas.__version__).split(".")[0]) >= 3
    except ValueError:
        return False


def _plain(value: Any, depth: int, scanned: list[int]) -> bool:
    """True for the plain value types an inline probe may read (see the module docstring)."""
    scanned[0] += 1
    if scanned[0] > MAX_SCANNED or depth > 3:
        return False
    kind = type(value)
    if kind in _SCALARS:
        return True
    if isinstance(value, types.ModuleType):
        return value.__name__.split(".")[0] in SAFE_MODULES
    module = (kind.__module__ or "").split(".")[0]
    if module == "numpy":
        return getattr(getattr(value, "dtype", None), "hasobject", False) is False
    if module == "pandas":
        return True
    if kind in (list, tuple, set, frozenset):
        return all(_plain(item, depth + 1, scanned) for item in value)
    if kind is dict:
        return all(_plain(k, depth + 1, scanned) and _plain(v, depth + 1, scanned) for k, v in value.items())
    return False
