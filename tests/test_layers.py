"""The layers are checked, not hoped for: harness < rewards < synthesis < envs < training.

A module may import its own layer and the layers below it, never one above: not at module level, not inside a
function, not under ``TYPE_CHECKING``. :func:`layer_violations` parses every ``.py`` file of the five packages with
``ast`` and looks at every ``import`` and ``from ... import`` node anywhere in the tree (relative imports resolved
against the file's package), and at ``importlib.import_module("...")`` / ``__import__("...")`` calls with a constant
name. There are no exceptions: data a higher layer needs travels in the record, not through an upward import.

The small-model study is a leaf (:func:`leaf_violations`): nothing in the five packages outside ``training/study/``
imports ``training.study``; only ``scripts/`` and ``tests/`` may.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator, Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LAYERS = ("harness", "rewards", "synthesis", "envs", "training")
RULE = "layers: " + " < ".join(LAYERS)
LEAVES = ("training.study",)
"""Packages that are clients of the library: only their own modules, ``scripts/`` and ``tests/`` import them."""


def _package_of(path: Path, root: Path) -> list[str]:
    """The dotted package a file's relative imports start from: ``harness/viewer/cli.py`` -> ``[harness, viewer]``
    (an ``__init__.py`` is its own package: ``harness/viewer/__init__.py`` -> the same)."""
    return list(path.relative_to(root).parent.parts)


def _resolve(node: ast.ImportFrom, package: list[str]) -> str | None:
    """The absolute module of a ``from`` import (None: a relative import that climbs past the top-level package)."""
    if node.level == 0:
        return node.module or ""
    if node.level > len(package):
        return None
    base = package[: len(package) - node.level + 1]
    return ".".join([*base, *([node.module] if node.module else [])])


def _dynamic_name(node: ast.Call) -> str | None:
    """The module of ``importlib.import_module("name")`` or ``__import__("name")`` with a constant name."""
    func = node.func
    called = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else None
    if called not in ("import_module", "__import__") or not node.args:
        return None
    first = node.args[0]
    return first.value if isinstance(first, ast.Constant) and isinstance(first.value, str) else None


def imports_of(path: Path, root: Path, *, names: bool = False) -> Iterator[tuple[int, str | None]]:
    """``(line, absolute module)`` of every import anywhere in the file (None: an unresolvable relative import).
    With ``names``, ``from M import N`` also yields ``M.N`` (N may be a submodule: ``from training import study``)."""
    package = _package_of(path, root)
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
        if isinstance(node, ast.Import):
            yield from ((node.lineno, alias.name) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            module = _resolve(node, package)
            yield node.lineno, module
            if names and module:
                yield from ((node.lineno, f"{module}.{alias.name}") for alias in node.names)
        elif isinstance(node, ast.Call) and (name := _dynamic_name(node)) is not None:
            yield node.lineno, name


def layer_violations(root: Path, layers: Sequence[str] = LAYERS) -> list[str]:
    """``"FILE:LINE: LAYER may not import MODULE (layers: ...)"`` for every upward import under ``root``."""
    rank = {name: i for i, name in enumerate(layers)}
    rule = "layers: " + " < ".join(layers)
    found: list[str] = []
    for layer in layers:
        for path in sorted((root / layer).rglob("*.py")):
            where = path.relative_to(root).as_posix()
            for line, module in sorted(imports_of(path, root), key=lambda found_import: found_import[0]):
                if module is None:
                    found.append(f"{where}:{line}: relative import climbs past the top-level package {layer}")
                    continue
                top = module.split(".")[0]
                if rank.get(top, -1) > rank[layer]:
                    found.append(f"{where}:{line}: {layer} may not import {module} ({rule})")
    return found


def leaf_violations(root: Path, leaves: Sequence[str] = LEAVES, layers: Sequence[str] = LAYERS) -> list[str]:
    """``"FILE:LINE: MODULE is a leaf; only its own modules, scripts/ and tests/ import it"`` for every import of a
    leaf package (or one of its modules) by a file of ``layers`` outside that package."""
    found: list[str] = []
    for layer in layers:
        for path in sorted((root / layer).rglob("*.py")):
            where = path.relative_to(root).as_posix()
            for leaf in leaves:
                if where.startswith(leaf.replace(".", "/") + "/"):
                    continue
                hits: dict[int, str] = {}
                for line, module in imports_of(path, root, names=True):
                    if module is not None and (module == leaf or module.startswith(leaf + ".")):
                        hits.setdefault(line, module)
                found += [
                    f"{where}:{line}: {leaf} is a leaf; only its own modules, scripts/ and tests/ import it "
                    f"(imports {hits[line]})"
                    for line in sorted(hits)
                ]
    return found


def test_no_layer_imports_a_higher_one() -> None:
    for layer in LAYERS:
        assert (ROOT / layer / "__init__.py").is_file(), f"{layer}/ is not a package under {ROOT}"
    violations = layer_violations(ROOT)
    assert not violations, "upward imports:\n" + "\n".join(violations)


def test_the_checker_catches_planted_violations(tmp_path: Path) -> None:
    files = {
        "harness/__init__.py": "",
        "harness/viewer/__init__.py": "",
        "harness/viewer/cli.py": (
            "from typing import TYPE_CHECKING\n"
            "from harness.jsonl import iter_jsonl\n"  # same layer: fine
            "from . import render\n"  # relative, same package: fine
            "if TYPE_CHECKING:\n"
            "    from synthesis.driver import SHARDS\n"  # line 5
            "def pages():\n"
            "    import training.tokenizer as tok\n"  # line 7: inside a function
            "    return tok\n"
        ),
        "harness/lazy.py": "import importlib\nmod = importlib.import_module('envs.pool')\n",  # line 2
        "rewards/__init__.py": "import os, harness.jsonl, rewards.terms\n",  # downward and own layer: fine
        "rewards/faults.py": "def read():\n    from synthesis.export import read_shards\n",  # line 2
        "rewards/sub/__init__.py": "",
        "rewards/sub/deep.py": "from ...training import x\n",  # line 1: climbs past rewards/
        "synthesis/__init__.py": "",
        "envs/__init__.py": "from synthesis import labels\nfrom rewards.hacks import HACK_POLICIES\n",  # fine
        "training/__init__.py": "from envs import ManagerEnv\nfrom harness import tokenizer\n",  # fine
    }
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    assert layer_violations(tmp_path) == [
        f"harness/lazy.py:2: harness may not import envs.pool ({RULE})",
        f"harness/viewer/cli.py:5: harness may not import synthesis.driver ({RULE})",
        f"harness/viewer/cli.py:7: harness may not import training.tokenizer ({RULE})",
        f"rewards/faults.py:2: rewards may not import synthesis.export ({RULE})",
        "rewards/sub/deep.py:1: relative import climbs past the top-level package rewards",
    ]


def test_relative_imports_resolve_against_the_files_package(tmp_path: Path) -> None:
    path = tmp_path / "synthesis" / "faults" / "model.py"
    path.parent.mkdir(parents=True)
    path.write_text("from . import base\nfrom .. import labels\nfrom ..runs import play\nfrom .x.y import z\n")
    assert list(imports_of(path, tmp_path)) == [
        (1, "synthesis.faults"),
        (2, "synthesis"),
        (3, "synthesis.runs"),
        (4, "synthesis.faults.x.y"),
    ]


def test_the_study_is_a_leaf() -> None:
    assert (ROOT / "training" / "study" / "__init__.py").is_file()
    violations = leaf_violations(ROOT)
    assert not violations, "imports of a leaf package:\n" + "\n".join(violations)


def test_the_leaf_checker_catches_planted_imports(tmp_path: Path) -> None:
    files = {
        "harness/llm.py": "def bias():\n    from training.study.margin import repair_bias\n",  # line 2
        "training/__init__.py": "",
        "training/sft.py": "import os\nfrom training import study\n",  # line 2: the package as a name
        "training/rl/trainer.py": "from ..study import driver\n",  # line 1: relative
        "training/studyish.py": "import training.studyish_helpers\n",  # a name that only starts alike: fine
        "training/study/__init__.py": "",
        "training/study/driver.py": "from training.study import arms\nfrom . import report\n",  # its own: fine
        "envs/lazy.py": "import importlib\nimportlib.import_module('training.study.cli')\n",  # line 2
    }
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    rule = "training.study is a leaf; only its own modules, scripts/ and tests/ import it"
    assert leaf_violations(tmp_path) == [
        f"harness/llm.py:2: {rule} (imports training.study.margin)",
        f"envs/lazy.py:2: {rule} (imports training.study.cli)",
        f"training/rl/trainer.py:1: {rule} (imports training.study)",
        f"training/sft.py:2: {rule} (imports training.study)",
    ]


MAX_MODULE_LINES = 600


def long_modules(root: Path, layers: Sequence[str] = LAYERS, limit: int = MAX_MODULE_LINES) -> list[str]:
    """``"FILE: N lines"`` for every module of the packages longer than ``limit`` lines."""
    found = []
    for layer in layers:
        for path in sorted((root / layer).rglob("*.py")):
            lines = len(path.read_text(encoding="utf-8").splitlines())
            if lines > limit:
                found.append(f"{path.relative_to(root).as_posix()}: {lines} lines (split it by responsibility)")
    return found


def test_no_module_is_over_600_lines(tmp_path: Path) -> None:
    assert long_modules(ROOT) == []
    (tmp_path / "harness").mkdir()
    (tmp_path / "harness" / "big.py").write_text("x = 1\n" * 601, encoding="utf-8")
    (tmp_path / "harness" / "ok.py").write_text("x = 1\n" * 600, encoding="utf-8")
    assert long_modules(tmp_path, ("harness",)) == ["harness/big.py: 601 lines (split it by responsibility)"]
