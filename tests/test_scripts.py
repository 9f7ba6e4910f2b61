"""Scripts import the installed package: none puts the checkout on ``sys.path``, and the package holds every module."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPTS = sorted((ROOT / "scripts").glob("*.py"))


def _path_edits(path: Path) -> list[int]:
    """Lines of ``path`` that change ``sys.path`` (``sys.path.insert/append/extend``) or set ``PYTHONPATH``."""
    lines = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Attribute) and node.attr in ("insert", "append", "extend"):
            target = node.value
            if isinstance(target, ast.Attribute) and target.attr == "path" and ast.unparse(target.value) == "sys":
                lines.append(node.lineno)
        if isinstance(node, ast.Constant) and node.value == "PYTHONPATH":
            lines.append(node.lineno)
    return lines


def test_no_script_puts_the_checkout_on_the_path():
    assert SCRIPTS
    edits = {p.name: lines for p in SCRIPTS if (lines := _path_edits(p))}
    assert not edits, f"scripts change sys.path (install the package: make, or pip install -e .): {edits}"


def test_the_path_check_sees_an_insert(tmp_path):
    script = tmp_path / "s.py"
    script.write_text("import os, sys\nsys.path.insert(0, '.')\nos.environ['PYTHONPATH'] = '.'\n")
    assert _path_edits(script) == [2, 3]


def test_the_installed_package_holds_every_module_folder():
    """``pip install -e .`` installs the packages setuptools finds: every folder of Python modules is one."""
    tomllib = pytest.importorskip("tomllib")  # Python >= 3.11
    from setuptools import find_packages

    include = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]["find"]["include"]
    found = set(find_packages(str(ROOT), include=include))
    tops = {pattern.rstrip("*") for pattern in include}
    folders = {".".join(p.parent.relative_to(ROOT).parts) for top in tops for p in (ROOT / top).rglob("*.py")}
    assert folders <= found, sorted(folders - found)
