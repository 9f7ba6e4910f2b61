"""Source-level helpers of the fault library: code sites, span edits, reads/writes and the recomputation probe.

Edits are *span edits*: a transform picks one AST node of the turn's reference code and the text of that node alone
is replaced by the unparsed, changed node (wrapped in parentheses when it is not an atom), so every other line keeps
its original text (and ``# %%`` cell markers survive). :func:`replace_node` re-parses the result.

The **recomputation probe** (:func:`recomputation_probe`) is the generic evidence of a harmful fault: the backward
slice of the task's reference code up to the faulted turn (only the statements the turn needs), with every name the
slice assigns renamed ``chk_<name>`` so it recomputes the turn's quantities from ``public/data`` without touching the
worker's variables, followed by one ``assert`` per compared worker variable whose message says what differs. On the
clean state the recomputation equals the worker's values exactly (same code, same data); on a faulted state the
compared variable differs and the probe fails with an ``AssertionError``.
"""

from __future__ import annotations

import ast
import functools
import textwrap
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from harness.manager.ast_inspect import Inspector
from harness.pyast import parse_python

PRINT_CALLS = ("print_result", "print", "display")
"""Calls dropped from a recomputation probe (it must not print answers of its own)."""
CHECK_PREFIX = "chk_"

ATOMS = (ast.Name, ast.Attribute, ast.Call, ast.Subscript, ast.Constant, ast.List, ast.Tuple, ast.Dict, ast.Set)


# ---- reading code -----------------------------------------------------------------------------------------------
def statements(code: str) -> list[ast.stmt]:
    """Top-level statements of ``code`` (raises ``SyntaxError`` like ``ast.parse``)."""
    return parse_python(code).body


def names_of(stmt: ast.stmt) -> tuple[set[str], set[str], set[str]]:
    """``(reads, inputs, writes)`` of one statement, as ``inspect_python`` reports them (module-level names)."""
    reads, inputs, writes = _inspect_statement(ast.unparse(stmt))
    return set(reads), set(inputs), set(writes)


@functools.lru_cache(maxsize=4096)
def _inspect_statement(source: str) -> tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...]]:
    """``inspect_python``'s reads, inputs and writes of one statement's source (cached: the same reference
    statements are analysed once per fault candidate of a turn)."""
    info = Inspector(source).run(parse_python(source))
    return tuple(info["reads"]), tuple(info["inputs"]), tuple(info["writes"])


@functools.lru_cache(maxsize=1024)
def code_writes(code: str) -> tuple[str, ...]:
    """Names the code assigns (first-seen order; imported modules aside), ``()`` when it does not parse. Cached: the
    fault types ask it of the same reference code again and again."""
    try:
        tree = parse_python(code)
    except SyntaxError:
        return ()
    names: list[str] = []
    for stmt in tree.body:
        names += [n for n in stmt_writes(stmt) if n not in names]
    return tuple(names)


def code_inputs(code: str) -> set[str]:
    """Names the code reads before it assigns them (what it takes from the namespace)."""
    info = Inspector(code).run(parse_python(code))
    return set(info["inputs"])


def is_print(stmt: ast.stmt) -> bool:
    return (
        isinstance(stmt, ast.Expr)
        and isinstance(stmt.value, ast.Call)
        and isinstance(stmt.value.func, ast.Name)
        and stmt.value.func.id in PRINT_CALLS
    )


def dependent_writes(code: str, roots: Iterable[str]) -> list[str]:
    """``roots`` plus the names that top-level statements of ``code`` derive from them (forward, in order)."""
    tainted = list(dict.fromkeys(roots))
    for stmt in statements(code):
        reads, _, writes = names_of(stmt)
        if reads & set(tainted):
            tainted += [w for w in writes if w not in tainted]
    return tainted


# ---- span edits -------------------------------------------------------------------------------------------------
def _offsets(code: str) -> list[int]:
    starts, total = [0], 0
    for line in code.splitlines(keepends=True):
        total += len(line)
        starts.append(total)
    return starts


def node_text(code: str, node: ast.AST) -> str:
    return ast.get_source_segment(code, node) or ast.unparse(node)


def replace_node(code: str, node: ast.AST, new_text: str, *, check: bool = True) -> str:
    """``code`` with the source span of ``node`` replaced by ``new_text``; re-parsed unless ``check`` is False."""
    starts = _offsets(code)
    # ast offsets are UTF-8 byte columns: convert per line
    lines = code.splitlines(keepends=True)

    def char_offset(lineno: int, col: int) -> int:
        line = lines[lineno - 1]
        return starts[lineno - 1] + len(line.encode("utf-8")[:col].decode("utf-8"))

    begin = char_offset(node.lineno, node.col_offset)  # type: ignore[attr-defined]
    end = char_offset(node.end_lineno, node.end_col_offset)  # type: ignore[attr-defined]
    edited = code[:begin] + new_text + code[end:]
    if check:
        parse_python(edited)
    return edited


def expr_text(node: ast.expr) -> str:
    """Unparsed ``node``, parenthesised unless it is an atom (safe to splice into any expression)."""
    text = ast.unparse(node)
    return text if isinstance(node, ATOMS) else f"({text})"


@dataclass(frozen=True)
class Site:
    """One place in a turn's code a transform can change: the node and the top-level statement holding it."""

    node: ast.AST
    stmt: ast.stmt


def sites(code: str, match) -> list[Site]:
    """Every node of ``code`` for which ``match(node)`` is true, in a deterministic (statement, walk) order."""
    found = []
    for stmt in statements(code):
        found += [Site(node, stmt) for node in ast.walk(stmt) if match(node)]
    return found


def stmt_writes(stmt: ast.stmt) -> list[str]:
    """Names one statement assigns or mutates (``[]`` for an import)."""
    if isinstance(stmt, ast.Import | ast.ImportFrom):
        return []
    return list(_inspect_statement(ast.unparse(stmt))[2])


# ---- the recomputation probe ------------------------------------------------------------------------------------
def backward_slice(codes: Sequence[str], *, keep_last: bool = True) -> list[ast.stmt]:
    """The statements of ``codes`` (turn programs in order; the last one is the turn under test) that the last
    program needs: all of its statements (but prints) plus, backwards, every earlier statement that assigns or
    mutates a name still needed. A plain ``name = ...`` that does not read ``name`` ends the need for it."""
    program: list[tuple[int, ast.stmt]] = []
    for index, code in enumerate(codes):
        program += [(index, stmt) for stmt in statements(code) if not is_print(stmt)]
    last = len(codes) - 1
    needed: set[str] = set()
    kept: list[ast.stmt] = []
    for index, stmt in reversed(program):
        reads, _, writes = names_of(stmt)
        if not ((keep_last and index == last) or writes & needed or isinstance(stmt, ast.Import | ast.ImportFrom)):
            continue
        kept.append(stmt)
        defines = {t.id for t in getattr(stmt, "targets", []) if isinstance(t, ast.Name)} - reads
        needed = (needed - defines) | reads
    kept.reverse()
    return kept


class _Renamer(ast.NodeTransformer):
    def __init__(self, names: set[str]) -> None:
        self.names = names

    def visit_Name(self, node: ast.Name) -> ast.Name:
        if node.id in self.names:
            return ast.copy_location(ast.Name(id=CHECK_PREFIX + node.id, ctx=node.ctx), node)
        return node

    def visit_FunctionDef(self, node: ast.FunctionDef) -> ast.FunctionDef:
        if node.name in self.names:
            node.name = CHECK_PREFIX + node.name
        self.generic_visit(node)
        return node


def renamed_slice(codes: Sequence[str]) -> tuple[str, set[str]]:
    """The backward slice as code, with every assigned (non-import) name renamed ``chk_<name>``."""
    text, assigned = _renamed_slice(tuple(codes))
    return text, set(assigned)


@functools.lru_cache(maxsize=256)
def _renamed_slice(codes: tuple[str, ...]) -> tuple[str, frozenset[str]]:
    """:func:`renamed_slice`, cached: it depends on the clean prefix of a turn only, and every fault candidate of
    that turn asks for it (about half of the fault library's CPU time before the cache)."""
    kept = backward_slice(codes)
    assigned: set[str] = set()
    for stmt in kept:
        if not isinstance(stmt, ast.Import | ast.ImportFrom):
            assigned |= names_of(stmt)[2]
    renamer = _Renamer(assigned)
    body = [renamer.visit(parse_python(ast.unparse(stmt)).body[0]) for stmt in kept]
    return "\n".join(ast.unparse(stmt) for stmt in body), frozenset(assigned)


COMPARE_HELPERS = textwrap.dedent(
    """\
    import math as _math
    import numpy as _np
    import pandas as _pd


    def _same(a, b):  # equal values: NaN equals NaN, floats to 1e-9 relative
        if isinstance(a, _pd.DataFrame | _pd.Series):
            check = _pd.testing.assert_frame_equal if isinstance(a, _pd.DataFrame) else _pd.testing.assert_series_equal
            try:
                check(a, b, check_dtype=False, rtol=1e-09)
                return True
            except (AssertionError, TypeError, ValueError):
                return False
        if isinstance(a, dict) and isinstance(b, dict):
            return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
        if isinstance(a, list | tuple | _np.ndarray) and isinstance(b, list | tuple | _np.ndarray):
            return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
        if isinstance(a, int | float | _np.number) and isinstance(b, int | float | _np.number):
            return _math.isclose(a, b, rel_tol=1e-09) or (_math.isnan(a) and _math.isnan(b))
        try:
            return type(a) is type(b) and bool(a == b)
        except (TypeError, ValueError):
            return False


    def _show(value):
        if isinstance(value, _pd.DataFrame):
            return f"a DataFrame of {value.shape[0]} rows x {value.shape[1]} columns {list(value.columns)[:10]}"
        if isinstance(value, _pd.Series):
            return f"a Series {dict(list(value.items())[:8])}" + (" ..." if len(value) > 8 else "")
        return repr(value)[:300]


    def _where(a, b):  # two DataFrames: how their rows or their first differing column differ
        if not (isinstance(a, _pd.DataFrame) and isinstance(b, _pd.DataFrame)):
            return ""
        if len(a) != len(b):
            return f" ({len(a)} rows where the recomputation has {len(b)})"
        for column in b.columns:
            if column not in a.columns:
                return f" (no column {column!r})"
            x, y = a[column].to_numpy(), b[column].to_numpy()
            differ = ~((x == y) | (_pd.isna(x) & _pd.isna(y)))
            if differ.any():
                return f" (column {column!r} differs in {int(differ.sum())} rows)"
        return ""
    """
)


def compare_lines(name: str, what: str) -> str:
    """Assert that the worker's ``name`` exists and equals the probe's ``chk_<name>``; ``what`` ends the message."""
    return (
        f"assert {name!r} in globals(), {f'`{name}` is not defined in the worker namespace: {what}'!r}\n"
        f"assert _same({name}, {CHECK_PREFIX}{name}), (\n"
        f"    f'`{name}` = {{_show({name})}} but recomputing it from the task data gives '\n"
        f"    f'{{_show({CHECK_PREFIX}{name})}}{{_where({name}, {CHECK_PREFIX}{name})}}: ' + {what!r}\n"
        ")"
    )


def recomputation_probe(codes: Sequence[str], compare: Sequence[str], what: str, header: str) -> str | None:
    """A probe that recomputes the last turn of ``codes`` from the data and compares ``compare`` (worker variable
    names the slice assigns) with it; ``None`` when the slice assigns none of them. ``what`` is the public reason
    shown in the assertion message, ``header`` a comment line stating what is checked."""
    recompute, assigned = renamed_slice(codes)
    names = [n for n in dict.fromkeys(compare) if n in assigned]
    if not names:
        return None
    checks = "\n".join(compare_lines(n, what) for n in names)
    comment = "\n".join(f"# {line}" for line in textwrap.wrap(header, 110))
    return f"{comment}\n{COMPARE_HELPERS}\n# independent recomputation from the task data\n{recompute}\n\n{checks}\n"
