"""Program structure from the AST, for the manager's ``inspect_python`` tool (nothing is executed).

:class:`Inspector` walks a module and reports the names it reads, takes from the namespace (``inputs``), writes
(including ``df['x'] = ...``, ``obj.a = ...``, ``lst.append(...)`` and ``inplace=True`` as writes of the root name),
deletes, the modules it imports, the dotted callees it calls, the constants it uses (with line and context: evidence
for thresholds and rounding) and the literal file paths it reads or writes. Lists are capped.
"""

from __future__ import annotations

import ast
import builtins
import math
from typing import Any

CONTEXT_CAP = 100  # chars of source shown around a constant
MAX_CONSTANTS = 40
MAX_NAMES = 100  # entries per list of inspect_python (reads, calls, ...)

# Callee suffixes that read or write a file whose path is their first argument (or a path keyword).
_READERS = (
    "read_csv read_table read_excel read_parquet read_json read_feather read_pickle read_fwf read_orc read_stata "
    "read_sas read_spss read_xml read_hdf load loadtxt genfromtxt fromfile read_text read_bytes imread"
).split()
_WRITERS = (
    "to_csv to_excel to_parquet to_json to_feather to_pickle to_hdf to_orc to_stata to_xml savefig save savetxt "
    "savez savez_compressed write_text write_bytes imwrite"
).split()
_PATH_KEYWORDS = ("path", "path_or_buf", "filepath_or_buffer", "fname", "file", "io", "filename")
# Methods that change their receiver in place (``lst.append(x)`` writes ``lst``); ``inplace=True`` does too.
_MUTATORS = frozenset("append extend insert pop remove clear sort reverse update setdefault popitem discard".split())
_BUILTINS = frozenset(dir(builtins))  # not reported as reads unless the code rebinds them


def cap_text(text: str | None, limit: int, *, tail: bool = False) -> str | None:
    if text is None or len(text) <= limit:
        return text
    omitted = len(text) - limit
    if tail:
        return f"[... {omitted} chars omitted ...]\n" + text[-limit:]
    return text[:limit] + f"\n[... {omitted} chars omitted ...]"


def dotted_name(node: ast.AST) -> str:
    """``pd.read_csv`` for an attribute chain; calls and subscripts in the chain show as ``()`` and ``[]``
    (``df.groupby('a').sum`` -> ``df.groupby().sum``)."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return f"{dotted_name(node.value)}.{node.attr}"
    if isinstance(node, ast.Call):
        return f"{dotted_name(node.func)}()"
    if isinstance(node, ast.Subscript):
        return f"{dotted_name(node.value)}[]"
    return f"<{type(node).__name__.lower()}>"


def _root_name(node: ast.AST) -> str | None:
    """The variable at the root of ``df.loc[m, 'a']`` / ``obj.attr.x`` (``df`` / ``obj``), if any."""
    while isinstance(node, (ast.Attribute, ast.Subscript, ast.Call, ast.Starred)):
        node = node.func if isinstance(node, ast.Call) else node.value
    return node.id if isinstance(node, ast.Name) else None


def _literal_path(node: ast.AST) -> str | None:
    """A path given as a string literal or an f-string (placeholders kept as ``{expr}``)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        parts = []
        for value in node.values:
            if isinstance(value, ast.Constant):
                parts.append(str(value.value))
            elif isinstance(value, ast.FormattedValue):
                parts.append("{" + ast.unparse(value.value) + "}")
        return "".join(parts)
    return None


class Inspector(ast.NodeVisitor):
    """Collects module-level reads/writes (names local to functions, lambdas and comprehensions are not
    module-level writes), imports, calls, constants and literal file paths."""

    def __init__(self, source: str) -> None:
        self._lines = source.splitlines(keepends=True)
        self.reads: dict[str, None] = {}
        self.inputs: dict[str, None] = {}  # read before this code writes them: they come from the namespace
        self.writes: dict[str, None] = {}
        self.deletes: dict[str, None] = {}
        self.imports: dict[str, None] = {}
        self.calls: dict[str, None] = {}
        self.files_read: dict[str, None] = {}
        self.files_written: dict[str, None] = {}
        self.constants: list[dict[str, Any]] = []
        self.constants_omitted = 0
        self._scopes: list[set[str]] = []  # locals of the enclosing functions/comprehensions
        self._globals: set[str] = set()
        self._parents: dict[ast.AST, ast.AST] = {}

    def run(self, tree: ast.Module) -> dict[str, Any]:
        for parent in ast.walk(tree):
            for child in ast.iter_child_nodes(parent):
                self._parents[child] = parent
        self.visit(tree)
        out = {
            "reads": [n for n in self.reads if n not in _BUILTINS or n in self.writes],  # not print/len/round
            "inputs": [n for n in self.inputs if n not in _BUILTINS or n in self.writes],
            "writes": list(self.writes),
            "deletes": list(self.deletes),
            "imports": list(self.imports),
            "calls": list(self.calls),
            "constants": self.constants,
            "files_read": list(self.files_read),
            "files_written": list(self.files_written),
        }
        for key in [k for k, v in out.items() if len(v) > MAX_NAMES]:  # a long program: keep the answer short
            out[f"{key}_omitted"] = len(out[key]) - MAX_NAMES
            out[key] = out[key][:MAX_NAMES]
        if self.constants_omitted:
            out["constants_omitted"] = self.constants_omitted
        return out

    # -- names
    def _is_local(self, name: str) -> bool:
        return any(name in scope for scope in self._scopes) and name not in self._globals

    def _bind(self, name: str) -> None:
        if self._scopes and name not in self._globals:
            self._scopes[-1].add(name)
        else:
            self.writes[name] = None

    def visit_Name(self, node: ast.Name) -> None:
        if isinstance(node.ctx, ast.Load):
            if not self._is_local(node.id):
                self.reads[node.id] = None
                if node.id not in self.writes:
                    self.inputs[node.id] = None
        elif isinstance(node.ctx, ast.Store):
            self._bind(node.id)
        elif not self._is_local(node.id):
            self.deletes[node.id] = None

    def visit_Global(self, node: ast.Global) -> None:
        self._globals.update(node.names)

    def visit_AugAssign(self, node: ast.AugAssign) -> None:
        root = _root_name(node.target)
        if root is not None and not self._is_local(root):
            self.reads[root] = None  # ``x += 1`` reads x before writing it
            if root not in self.writes:
                self.inputs[root] = None
        self._store_target(node.target)
        self.visit(node.value)

    def visit_Assign(self, node: ast.Assign) -> None:
        self.visit(node.value)
        for target in node.targets:
            self._store_target(target)

    def visit_AnnAssign(self, node: ast.AnnAssign) -> None:
        if node.value is not None:
            self.visit(node.value)
        self._store_target(node.target)

    def _store_target(self, target: ast.AST) -> None:
        """Visit an assignment target; ``df['x'] = ...`` and ``obj.a = ...`` write their root variable."""
        if isinstance(target, (ast.Subscript, ast.Attribute)):
            self.visit(target.value)  # the object must exist already: a read (an input) first
            if isinstance(target, ast.Subscript):
                self.visit(target.slice)
            root = _root_name(target)
            if root is not None and not self._scopes:  # inside a function body it runs only when called
                self.writes[root] = None
        elif isinstance(target, (ast.Tuple, ast.List)):
            for elt in target.elts:
                self._store_target(elt)
        elif isinstance(target, ast.Starred):
            self._store_target(target.value)
        else:
            self.visit(target)

    def visit_For(self, node: ast.For | ast.AsyncFor) -> None:
        self.visit(node.iter)
        self._store_target(node.target)
        for stmt in [*node.body, *node.orelse]:
            self.visit(stmt)

    visit_AsyncFor = visit_For

    def visit_withitem(self, node: ast.withitem) -> None:
        self.visit(node.context_expr)
        if node.optional_vars is not None:
            self._store_target(node.optional_vars)

    def visit_ExceptHandler(self, node: ast.ExceptHandler) -> None:
        if node.name:
            self._bind(node.name)
        self.generic_visit(node)

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            self.imports[alias.name] = None
            self._bind(alias.asname or alias.name.split(".")[0])

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        self.imports["." * node.level + (node.module or "")] = None
        for alias in node.names:
            if alias.name != "*":
                self._bind(alias.asname or alias.name)

    # -- scopes
    def _visit_function(self, node: ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda) -> None:
        for default in [*node.args.defaults, *(d for d in node.args.kw_defaults if d is not None)]:
            self.visit(default)
        if not isinstance(node, ast.Lambda):
            for decorator in node.decorator_list:
                self.visit(decorator)
            self._bind(node.name)
        args = node.args
        params = {a.arg for a in [*args.posonlyargs, *args.args, *args.kwonlyargs]}
        params |= {a.arg for a in (args.vararg, args.kwarg) if a is not None}
        self._scopes.append(params)
        for stmt in node.body if isinstance(node.body, list) else [node.body]:
            self.visit(stmt)
        self._scopes.pop()

    visit_FunctionDef = visit_AsyncFunctionDef = visit_Lambda = _visit_function

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        for expr in [*node.decorator_list, *node.bases, *(k.value for k in node.keywords)]:
            self.visit(expr)
        self._bind(node.name)
        self._scopes.append(set())
        for stmt in node.body:
            self.visit(stmt)
        self._scopes.pop()

    def _visit_comprehension(self, node: ast.ListComp | ast.SetComp | ast.GeneratorExp | ast.DictComp) -> None:
        self._scopes.append(set())
        for gen in node.generators:
            self.visit(gen.iter)
            self._store_target(gen.target)
            for cond in gen.ifs:
                self.visit(cond)
        for part in (node.key, node.value) if isinstance(node, ast.DictComp) else (node.elt,):
            self.visit(part)
        self._scopes.pop()

    visit_ListComp = visit_SetComp = visit_GeneratorExp = visit_DictComp = _visit_comprehension

    # -- calls, files, constants
    def visit_Call(self, node: ast.Call) -> None:
        callee = dotted_name(node.func)
        self.calls[callee] = None
        method = callee.rsplit(".", 1)[-1]
        self._record_file(node, method)
        self.generic_visit(node)  # the receiver is read (an input) before the call changes it
        if isinstance(node.func, ast.Attribute):
            inplace = any(
                k.arg == "inplace" and isinstance(k.value, ast.Constant) and k.value.value is True
                for k in node.keywords
            )
            root = _root_name(node.func.value)
            if root is not None and not self._scopes and (inplace or method in _MUTATORS):
                self.writes[root] = None

    def _record_file(self, node: ast.Call, method: str) -> None:
        candidates = [*node.args[:1], *(k.value for k in node.keywords if k.arg in _PATH_KEYWORDS)]
        if method in ("read_text", "read_bytes", "write_text", "write_bytes") and isinstance(node.func, ast.Attribute):
            receiver = node.func.value  # Path('x.csv').read_text()
            if isinstance(receiver, ast.Call) and receiver.args:
                candidates = [receiver.args[0]]
        paths = [p for p in (_literal_path(c) for c in candidates[:1]) if p]
        if not paths:
            return
        if method == "open":
            mode_node = (
                node.args[1] if len(node.args) > 1 else next((k.value for k in node.keywords if k.arg == "mode"), None)
            )
            mode = mode_node.value if isinstance(mode_node, ast.Constant) and isinstance(mode_node.value, str) else "r"
            target = self.files_written if set(mode) & set("wax+") else self.files_read
        elif method in _READERS:
            target = self.files_read
        elif method in _WRITERS:
            target = self.files_written
        else:
            return
        target[paths[0]] = None

    def visit_JoinedStr(self, node: ast.JoinedStr) -> None:
        for value in node.values:  # the literal parts of an f-string are not constants worth reporting
            if isinstance(value, ast.FormattedValue):
                self.visit(value)

    def visit_Constant(self, node: ast.Constant) -> None:
        value = node.value
        if isinstance(value, bool) or value is None or value is Ellipsis or isinstance(value, (bytes, complex)):
            return
        parent = self._parents.get(node)
        if isinstance(parent, ast.UnaryOp) and isinstance(parent.op, ast.USub) and not isinstance(value, str):
            value = -value  # ``x > -5`` is the threshold -5
        if isinstance(value, float) and not math.isfinite(value):
            value = repr(value)
        if isinstance(parent, ast.Expr):
            return  # a bare string statement (docstring)
        if len(self.constants) >= MAX_CONSTANTS:
            self.constants_omitted += 1  # not deduplicated: finding contexts costs time, and they are not shown
            return
        entry = {"value": value, "line": node.lineno, "context": self._context(node)}
        if entry not in self.constants:
            self.constants.append(entry)

    def _context(self, node: ast.AST) -> str:
        """Source of the nearest enclosing comparison, call, operation or statement (``df.x > 100``)."""
        current = self._parents.get(node)
        while current is not None and not isinstance(
            current, (ast.Compare, ast.Call, ast.BinOp, ast.BoolOp, ast.Subscript, ast.stmt)
        ):
            current = self._parents.get(current)
        target = current if current is not None else node
        return cap_text(" ".join(self._segment(target).split()), CONTEXT_CAP) or ""

    def _segment(self, node: ast.AST) -> str:
        """The source text of ``node`` (like ``ast.get_source_segment``, which re-splits the source on every call);
        for a def/for/with/if only its first line. Column offsets are UTF-8 byte offsets."""
        start, end = node.lineno - 1, node.end_lineno or node.lineno
        lines = [line.encode() for line in self._lines[start:end]]
        if not lines or hasattr(node, "body"):
            return self._lines[start] if start < len(self._lines) else ast.unparse(node)
        if len(lines) == 1:
            return lines[0][node.col_offset : node.end_col_offset].decode(errors="replace")
        lines[0], lines[-1] = lines[0][node.col_offset :], lines[-1][: node.end_col_offset]
        return b"".join(lines).decode(errors="replace")
