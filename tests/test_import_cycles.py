"""No import cycles: two modules that need each other share a third (the data types) or a registry.

:func:`import_graph` parses every ``.py`` file of the five packages with ``ast`` and draws an edge for every import
anywhere in the file, the imports :func:`tests.test_layers.imports_of` checks (module level, inside a function, under
``TYPE_CHECKING``, ``importlib.import_module("...")``; relative ones resolved with its helpers). ``from P import name``
points at the module ``P.name`` when there is one (``from harness.manager import tools``), else at ``P`` (its
``__init__``). A package's ``__init__`` running before its submodules is not an edge; an explicit import of a
package's ``__init__`` is. :func:`cycles` lists the strongly connected components of more than one module.
"""

from __future__ import annotations

import ast
from collections.abc import Collection, Sequence
from pathlib import Path

from tests.test_layers import LAYERS, ROOT, _dynamic_name, _package_of, _resolve


def module_names(root: Path, packages: Sequence[str]) -> dict[str, Path]:
    """Dotted module name -> file, for every ``.py`` file of ``packages`` under ``root`` (``__init__`` as the
    package)."""
    found: dict[str, Path] = {}
    for package in packages:
        for path in sorted((root / package).rglob("*.py")):
            parts = list(path.relative_to(root).with_suffix("").parts)
            found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


def _targets(node: ast.AST, package: list[str], modules: Collection[str]) -> set[str]:
    """The modules one import node points at: ``import a.b`` at ``a.b``; ``from P import x, y`` at ``P.x`` and
    ``P.y`` when they are modules, and at ``P`` when one of the names is not (an attribute of ``P``'s
    ``__init__``)."""
    if isinstance(node, ast.Import):
        return {alias.name for alias in node.names}
    if isinstance(node, ast.ImportFrom):
        base = _resolve(node, package) or ""
        subs = {f"{base}.{alias.name}" for alias in node.names} & set(modules)
        return subs if len(subs) == len(node.names) else {base, *subs}
    if isinstance(node, ast.Call) and (name := _dynamic_name(node)) is not None:
        return {name}
    return set()


def import_graph(root: Path, packages: Sequence[str] = LAYERS) -> dict[str, set[str]]:
    """Module -> the modules of ``packages`` it imports (see the module docstring)."""
    modules = module_names(root, packages)
    graph: dict[str, set[str]] = {name: set() for name in modules}
    for name, path in modules.items():
        package = _package_of(path, root)
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
            graph[name] |= {t for t in _targets(node, package, modules) if t in modules and t != name}
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan, iterative), each sorted, sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, edges = work[-1]
            child = next(edges, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return sorted(found)


def _describe(component: list[str], graph: dict[str, set[str]]) -> str:
    inside = set(component)
    edges = [f"{a} -> {b}" for a in component for b in sorted(graph[a] & inside)]
    return f"{' <-> '.join(component)} ({'; '.join(edges)})"


def test_no_import_cycles() -> None:
    graph = import_graph(ROOT)
    assert "harness.manager.runtime" in graph and graph["harness.manager.runtime"], "the graph is empty"
    found = cycles(graph)
    assert not found, "import cycles:\n" + "\n".join(_describe(c, graph) for c in found)


def test_a_function_level_import_closes_a_cycle(tmp_path: Path) -> None:
    files = {
        "harness/__init__.py": "",
        "harness/pkg/__init__.py": "from harness.pkg import a\n",  # a package importing its child: no cycle
        "harness/pkg/a.py": "from harness.pkg import b\n",  # -> harness.pkg.b (a module), not the package
        "harness/pkg/b.py": "def later():\n    from .a import thing  # imported here: a imports this module\n",
        "harness/pkg/c.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from harness.pkg.d import D\n",
        "harness/pkg/d.py": "import harness.pkg.c\n",
        "harness/pkg/e.py": "from harness.pkg import a, VALUE\n",  # a name of the package: the package too
        "harness/free.py": "import os\nfrom harness.pkg import a\n",
    }
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    graph = import_graph(tmp_path, ["harness"])
    assert graph["harness.pkg.a"] == {"harness.pkg.b"} and graph["harness.pkg.b"] == {"harness.pkg.a"}
    assert graph["harness.pkg.e"] == {"harness.pkg", "harness.pkg.a"}
    assert graph["harness.pkg"] == {"harness.pkg.a"} and graph["harness.free"] == {"harness.pkg.a"}
    assert cycles(graph) == [["harness.pkg.a", "harness.pkg.b"], ["harness.pkg.c", "harness.pkg.d"]]
    (tmp_path / "harness/pkg/a.py").write_text("from harness.pkg import VALUE\n")  # the package, which imports a
    assert cycles(import_graph(tmp_path, ["harness"])) == [
        ["harness.pkg", "harness.pkg.a"],
        ["harness.pkg.c", "harness.pkg.d"],
    ]
