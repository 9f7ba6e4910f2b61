"""Host side of probes: which kernel variables a probe's code reads (so only those are exported as data)."""

from __future__ import annotations

import ast
import builtins

PREDEFINED = frozenset({"print_result", "DATA_DIR", "BASE_PATH", "WORK_DIR"})
"""Names the verifier defines itself, as the kernel does."""
MAX_EXPORTED = 60
"""Variables one probe may read from the kernel (each crosses as its own sealed memfd)."""


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
