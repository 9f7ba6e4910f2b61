"""Which probes may run inside the kernel process instead of a fork (``SandboxConfig.inline_probes``).

A forked probe costs a fork and an exit of the whole kernel image, and every page the kernel writes afterwards takes
a copy-on-write fault: ~10-25 ms here, where a one-line assertion takes well under 1 ms. Most probes are such
assertions (``assert (orders['store_id'] != 'S10').all()``, ``assert all(abs(v - round(v, 2)) < 1e-9 for v in x)``).
:func:`inline_refusal` accepts a probe for an in-kernel run only when its syntax alone shows it cannot change the
namespace, the objects in it, files or processes; the kernel then runs it in a *shallow copy* of the namespace, so
names the probe binds vanish with the copy. Anything else — or anything this module cannot judge — is forked as
before. The rules, all of which must hold:

- statements: expressions, ``assert``, ``if``, ``pass`` and assignments whose targets are plain names (no subscript,
  attribute, augmented or deleting stores; no loops, ``try``, ``with``, definitions, imports, ``global``);
- expressions: no ``lambda``, walrus, ``await``/``yield``; no attribute starting with ``_`` (no dunders, no private
  state);
- calls: a builtin from :data:`INLINE_FUNCTIONS` that the namespace does not shadow, or a method from
  :data:`INLINE_METHODS` (pure, cheap, no callables or file output: no ``apply``/``map``/``to_csv``/``merge``),
  without an ``out=``, ``inplace=`` or ``file=`` keyword;
- names: bound by the probe itself, an allowed builtin, or a namespace value of a plain type — scalars, strings,
  numpy arrays (not object dtype) and scalars, pandas objects, the modules numpy/pandas/math, and lists, tuples,
  dicts and sets of those (checked up to :data:`MAX_SCANNED` elements, three levels deep);
- pandas, when loaded, is 3.0 or newer (copy-on-write: reading a column caches nothing that changes later writes).

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
    "abs all any bool dict divmod enumerate float frozenset int isinstance len list max min print "
    "range repr reversed round set sorted str sum tuple zip".split()
)
"""Builtins an inline probe may call: no I/O beyond the captured output."""

INLINE_METHODS = frozenset(
    "head tail describe mean median sum min max std var count nunique unique value_counts copy groupby agg aggregate "
    "loc iloc at iat astype to_numpy tolist to_list to_dict reset_index set_index sort_values sort_index drop "
    "dropna fillna rename replace isna notna isnull notnull any all round abs idxmax idxmin quantile cumsum rank "
    "diff pct_change shift clip between isin nlargest nsmallest duplicated drop_duplicates equals mode items keys "
    "values get index find startswith endswith split strip lower upper title isdigit isclose allclose isnan isfinite "
    "isinf floor ceil fabs sqrt log exp prod cumprod argmax argmin argsort item ravel flatten reshape transpose "
    "issubset issuperset intersection union difference symmetric_difference".split()
)
"""Methods (and module functions of numpy/pandas/math) an inline probe may call: pure and at most about linear."""

SAFE_MODULES = frozenset({"numpy", "pandas", "math"})
MAX_SCANNED = 10_000
_SCALARS = (type(None), bool, int, float, complex, str, bytes)
_STATEMENTS = (ast.Expr, ast.Assert, ast.If, ast.Pass, ast.Assign)
_FORBIDDEN = (ast.Lambda, ast.NamedExpr, ast.Await, ast.Yield, ast.YieldFrom, ast.Starred)


def inline_refusal(tree: ast.Module, namespace: dict[str, Any], helpers: dict[str, Any] | None = None) -> str | None:
    """None when the probe ``tree`` may run in the kernel (see the module docstring), else why not.

    ``helpers``: the kernel's own functions in the namespace (``print_result``), allowed while the name still holds
    that very object."""
    helpers = {name: value for name, value in (helpers or {}).items() if namespace.get(name) is value}
    if not _pandas_ok():
        return "pandas < 3 (no copy-on-write)"
    local = _bound_names(tree)
    if isinstance(local, str):
        return local
    for node in ast.walk(tree):
        if isinstance(node, ast.stmt) and not isinstance(node, _STATEMENTS):
            return f"statement {type(node).__name__}"
        if isinstance(node, _FORBIDDEN):
            return f"expression {type(node).__name__}"
        if isinstance(node, ast.Attribute) and node.attr.startswith("_"):
            return f"private attribute {node.attr}"
        if isinstance(node, ast.Call) and (reason := _call_refusal(node, namespace, local, helpers)):
            return reason
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load) and node.id not in local:
            if node.id in helpers:
                continue
            if node.id in namespace:
                if not _plain(namespace[node.id], 0, [0]):
                    return f"name {node.id} holds a {type(namespace[node.id]).__name__}"
            elif node.id not in INLINE_FUNCTIONS and hasattr(builtins, node.id):
                return f"name {node.id} (not an allowed builtin)"  # else undefined: a NameError, as in a fork
    return None


def _bound_names(tree: ast.Module) -> set[str] | str:
    """Names the probe binds (assignment targets, comprehension variables); a reason string for a non-name store."""
    local: set[str] = set()
    for node in ast.walk(tree):
        targets: list[ast.AST] = []
        if isinstance(node, ast.Assign):
            targets = list(node.targets)
        elif isinstance(node, ast.comprehension):
            targets = [node.target]
        for target in targets:
            for sub in ast.walk(target):
                if isinstance(sub, ast.Name):
                    local.add(sub.id)
                elif not isinstance(sub, (ast.Tuple, ast.List, ast.expr_context)):
                    return f"store into {type(sub).__name__}"
    return local


def _call_refusal(node: ast.Call, namespace: dict[str, Any], local: set[str], helpers: dict[str, Any]) -> str | None:
    if any(kw.arg in ("out", "inplace", "file") or kw.arg is None for kw in node.keywords):
        return "call with out=/inplace=/file=/**kwargs"
    func = node.func
    if isinstance(func, ast.Name):
        if func.id in helpers:
            return None
        if func.id in local or func.id in namespace or func.id not in INLINE_FUNCTIONS:
            return f"call of {func.id}"
        return None
    if isinstance(func, ast.Attribute):
        return None if func.attr in INLINE_METHODS else f"method {func.attr}"
    return f"call of a {type(func).__name__}"


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
