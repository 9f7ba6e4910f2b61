"""Host side of probes: which kernel variables a probe's code reads (so only those are exported as data), and which
columns of a frame it can observe (so only those are exported: column projection).

Projection (:func:`projections`). A variable is exported projected to a set of str column labels only when every use
of its name in the probe is one of ``NAME['label']``, ``NAME[['label', ...]]`` (str constants), ``NAME.label`` (an
identifier that is no attribute of a pandas ``DataFrame``, class or instance, and does not start with ``_``: pandas
resolves it as the column) or ``len(NAME)`` (the builtin, not bound by the probe), each read (never assigned or
deleted), and the probe never binds the name itself. The kernel then exports the frame with only the columns carrying
those labels (same index, same order, duplicated labels kept), and only when each label is an existing column, every
column label of the frame is a ``str`` and its columns are a plain index; a Series, any other value, or a frame where
those do not hold, is exported whole (so a missing label raises the same ``KeyError``/``AttributeError`` as before).

Soundness: each allowed use reads either the index length (unchanged) or the columns with the named labels (all of
them, identical data, labels, dtypes and index), so a projected probe computes the same result as on the full frame:
it never observes the other columns. Any other use (passing the frame to a function, ``.loc``, ``.shape``,
``.columns``, a computed key, iteration, a bare name, a name the probe rebinds) exports the full frame. A probe that
could reach a variable without naming it (an import, ``global``/``nonlocal``, ``globals()``/``vars()``/``eval``/
``getattr`` and the like, an attribute starting with ``_``, frame and ``gc`` introspection attributes) is never
projected.
"""

from __future__ import annotations

import ast
import builtins

import pandas as pd

PREDEFINED = frozenset({"print_result", "DATA_DIR", "BASE_PATH", "WORK_DIR"})
"""Names the verifier defines itself, as the kernel does."""
MAX_EXPORTED = 60
"""Variables one probe may read from the kernel (each crosses as its own sealed memfd)."""
FRAME_ATTRIBUTES = frozenset(dir(pd.DataFrame)) | frozenset(vars(pd.DataFrame()))
"""Names a ``DataFrame`` resolves as an attribute before any column: ``NAME.attr`` is a column access only outside."""
DYNAMIC_NAMES = frozenset(
    {"globals", "locals", "vars", "eval", "exec", "compile", "__import__", "getattr", "setattr", "delattr"}
    | {"breakpoint", "__builtins__", "builtins"}
)
"""Names through which a probe could reach a variable without naming it: such a probe is never projected."""
INTROSPECTION_ATTRIBUTES = frozenset(
    {"f_globals", "f_locals", "f_back", "f_builtins", "gi_frame", "cr_frame", "ag_frame", "tb_frame", "tb_next"}
    | {"modules", "currentframe", "stack", "trace", "getouterframes", "getinnerframes", "walk_stack", "getmembers"}
    | {"get_referrers", "get_referents", "get_objects"}
)
"""Attributes reaching frames, ``sys.modules`` or the garbage collector's view: such a probe is never projected."""


def names_read(tree: ast.Module) -> tuple[list[str], list[str]]:
    """``(names, hard)``: the names a probe's code reads, builtins excluded, in order of first use, and those of them
    it never binds itself (a probe that names one of these that is not data cannot run)."""
    stored: set[str] = set()
    loaded: dict[str, None] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            if isinstance(node.ctx, ast.Load):
                loaded.setdefault(node.id, None)
            else:
                stored.add(node.id)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            stored.update((a.asname or a.name).split(".")[0] for a in node.names)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            stored.add(node.name)
        elif isinstance(node, ast.arg):
            stored.add(node.arg)
        elif isinstance(node, ast.ExceptHandler) and node.name:
            stored.add(node.name)
    names = [n for n in loaded if not hasattr(builtins, n) and n not in PREDEFINED]
    return names, [n for n in names if n not in stored]


def _bound(tree: ast.Module) -> set[str] | None:
    """Every name the probe binds (assignments, deletions, arguments, definitions, ``except``/``match`` names), or
    None when the probe could reach variables without naming them (then nothing is projected)."""
    bound: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Import, ast.ImportFrom, ast.Global, ast.Nonlocal)):
            return None
        if isinstance(node, ast.Attribute) and (node.attr.startswith("_") or node.attr in INTROSPECTION_ATTRIBUTES):
            return None
        if isinstance(node, ast.Name):
            if node.id in DYNAMIC_NAMES:
                return None
            if not isinstance(node.ctx, ast.Load):
                bound.add(node.id)
        for field in ("name", "arg", "rest"):  # defs, classes, except, match patterns, type parameters, arguments
            value = getattr(node, field, None)
            if isinstance(value, str) and not isinstance(node, ast.alias):
                bound.add(value)
    return bound


def _labels_of_use(node: ast.Name, parent: ast.AST | None, len_is_builtin: bool) -> list[str] | None:
    """The column labels one use of a name reads (``[]`` for ``len(NAME)``), or None when the use is not one that
    projection allows."""
    if isinstance(parent, ast.Subscript) and parent.value is node and isinstance(parent.ctx, ast.Load):
        key = parent.slice
        if isinstance(key, ast.Constant) and type(key.value) is str:
            return [key.value]
        if (
            isinstance(key, ast.List)
            and key.elts
            and all(isinstance(e, ast.Constant) and type(e.value) is str for e in key.elts)
        ):
            return [e.value for e in key.elts]  # type: ignore[attr-defined]
        return None
    if isinstance(parent, ast.Attribute) and parent.value is node and isinstance(parent.ctx, ast.Load):
        attr = parent.attr
        return [attr] if not attr.startswith("_") and attr not in FRAME_ATTRIBUTES else None
    if (
        len_is_builtin
        and isinstance(parent, ast.Call)
        and isinstance(parent.func, ast.Name)
        and parent.func.id == "len"
        and len(parent.args) == 1
        and parent.args[0] is node
        and not parent.keywords
    ):
        return []
    return None


def projections(tree: ast.Module, names: list[str]) -> dict[str, list[str]]:
    """For each of ``names`` whose every use in ``tree`` is a projectable one (module docstring), the column labels
    it reads, sorted; names absent from the result are exported whole."""
    bound = _bound(tree)
    if bound is None:
        return {}
    parents: dict[ast.AST, ast.AST] = {}
    uses: dict[str, list[ast.Name]] = {}
    for node in ast.walk(tree):
        for child in ast.iter_child_nodes(node):
            parents[child] = node
        if isinstance(node, ast.Name):
            uses.setdefault(node.id, []).append(node)
    len_is_builtin = "len" not in bound
    out: dict[str, list[str]] = {}
    for name in names:
        if name in bound or name not in uses:
            continue
        labels: set[str] = set()
        for node in uses[name]:
            used = _labels_of_use(node, parents.get(node), len_is_builtin)
            if used is None:
                break
            labels.update(used)
        else:
            out[name] = sorted(labels)
    return out
