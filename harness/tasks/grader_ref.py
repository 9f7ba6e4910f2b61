"""Grader references: ``file:grade.py:grade`` (a function in a file of the task folder) or ``package.module:function``.

:meth:`GraderRef.problem` checks that a reference resolves *without running task code*: a file reference is checked
by parsing the file (it must define, assign or import the name at top level); a module reference is imported (it is
installed code, e.g. ``harness.evaluation.graders``) and the attribute must be callable. :meth:`GraderRef.load`
returns the function; files are executed with the ``mlebench`` shim active (see :mod:`harness.tasks.mlebench_compat`)
and cached per (path, modification time).
"""

from __future__ import annotations

import ast
import hashlib
import importlib
import importlib.util
import sys
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from harness.pyast import parse_python
from harness.tasks.mlebench_compat import mlebench_shim

FILE_PREFIX = "file:"


@dataclass(frozen=True)
class GraderRef:
    """A parsed grader reference. Exactly one of ``file`` (relative to the task folder) and ``module`` is set."""

    function: str
    file: str | None = None
    module: str | None = None

    @classmethod
    def parse(cls, ref: str) -> GraderRef:
        """Parse a reference string; ``ValueError`` says what is malformed."""
        if ref.startswith(FILE_PREFIX):
            path, sep, function = ref[len(FILE_PREFIX) :].rpartition(":")
            if not sep or not path.strip() or not function.isidentifier():
                raise ValueError(f"{ref!r} is not a file reference of the form 'file:PATH.py:FUNCTION'.")
            if not path.endswith(".py"):
                raise ValueError(f"{ref!r} names {path!r}, which is not a .py file.")
            return cls(function=function, file=path)
        module, sep, function = ref.partition(":")
        if not sep or not function.isidentifier() or not all(p.isidentifier() for p in module.split(".")):
            raise ValueError(
                f"{ref!r} is not a reference of the form 'package.module:function' or 'file:PATH:FUNCTION'."
            )
        return cls(function=function, module=module)

    def __str__(self) -> str:
        return f"{FILE_PREFIX}{self.file}:{self.function}" if self.file else f"{self.module}:{self.function}"

    def file_path(self, root: Path) -> Path:
        """Absolute path of a file reference's file (meaningless for module references)."""
        return (root / (self.file or "")).resolve()

    def problem(self, root: Path) -> str | None:
        """Why the reference does not resolve for the task folder ``root`` (None when it does)."""
        if self.file is not None:
            return self._file_problem(root)
        try:
            module = importlib.import_module(self.module or "")
        except Exception as exc:  # noqa: BLE001 - any failure to import means the reference does not resolve
            return f"module {self.module!r} cannot be imported ({type(exc).__name__}: {exc})."
        target = getattr(module, self.function, None)
        if target is None:
            return f"module {self.module!r} has no attribute {self.function!r}."
        if not callable(target):
            return f"{self} is not callable (it is a {type(target).__name__})."
        return None

    def _file_problem(self, root: Path) -> str | None:
        path = self.file_path(root)
        if Path(self.file or "").is_absolute() or not path.is_relative_to(root.resolve()):
            return f"{self.file!r} lies outside the task folder; grader files must be inside it."
        if not path.is_file():
            return f"grader file {self.file!r} does not exist in the task folder."
        try:
            tree = parse_python(path.read_text(encoding="utf-8"), filename=str(path))
        except (SyntaxError, UnicodeDecodeError) as exc:
            return f"grader file {self.file!r} does not parse ({exc})."
        if self.function not in top_level_names(tree):
            return f"grader file {self.file!r} defines no top-level {self.function!r}."
        return None

    def load(self, root: Path) -> Callable[..., Any]:
        """Import the grader and return the function (raises ``ImportError``/``AttributeError`` if it is missing)."""
        if self.file is None:
            return getattr(importlib.import_module(self.module or ""), self.function)
        path = self.file_path(root)
        return load_function_from_file(path, self.function)


def top_level_names(tree: ast.Module) -> set[str]:
    """Names a module binds at top level: functions, classes, assignments and imports."""
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names.update(t.id for t in node.targets if isinstance(t, ast.Name))
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
        elif isinstance(node, ast.Import | ast.ImportFrom):
            names.update((alias.asname or alias.name).split(".")[0] for alias in node.names)
    return names


def load_function_from_file(path: Path, function: str) -> Callable[..., Any]:
    """Execute ``path`` as a module (with the mlebench shim active) and return its ``function``; cached per mtime."""
    return _load_cached(str(path), path.stat().st_mtime_ns, function)


@lru_cache(maxsize=256)
def _load_cached(path: str, mtime_ns: int, function: str) -> Callable[..., Any]:
    del mtime_ns  # part of the cache key only: an edited file is loaded again
    name = "_stateguard_task_code_" + hashlib.sha1(path.encode()).hexdigest()[:16]
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load {path} as a Python module.")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses and pickling look the module up while it executes
    try:
        with mlebench_shim():
            spec.loader.exec_module(module)
    finally:
        sys.modules.pop(name, None)
    target = getattr(module, function, None)
    if not callable(target):
        raise AttributeError(f"{path} defines no callable {function!r}.")
    return target
