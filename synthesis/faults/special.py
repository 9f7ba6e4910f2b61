"""Fault types that change more than one expression: ``stale_variable``, ``execution_error``,
``claimed_without_execution`` — and the benign ``benign_rewrite``.

**stale_variable** (invalidate turns and the turns that depend on them). At an ``invalidate`` turn the faulty code
skips re-deriving the affected variables (``slots["recompute"]``, else every earlier variable the turn re-assigns,
``result`` aside), so the answer is built from the values from before the revision. At a turn that depends on an
invalidate turn whose revision is a ``param`` (``{"var", "old", "new"}``) or a ``correction`` slot, the faulty code
first puts the old value back (the worker "remembered" the superseded figure) and then runs the turn as usual.

**execution_error**: the step raises — a misspelt column (``KeyError``), a misspelt variable (``NameError``) or an
unclosed parenthesis (``SyntaxError``, the one transform whose code is not valid Python). Evidence:
``check_execution`` (verdict ``failed``); no probe.

**claimed_without_execution** (how the scripted worker plays it with the ordinary ``Fault`` format): the faulty code
computes nothing — it assigns a hard-coded ``result`` literal (the clean answer with its numbers perturbed, or a
categorical value swapped for another value of the same column) and prints it. The step *runs fine*, so
``check_execution`` alone reports ``verified``; what it shows is that the step's code contains no computation (a
single literal assignment: the answer is not derived from the data). The decisive evidence is a ``run_probe``
recomputation of ``result`` from the data, which fails on the claimed numbers. It needs the clean answer
(``answers[turn_id]``) and is skipped without it.

**benign_rewrite**: an equivalent computation written differently — ``x.mean()`` as ``x.agg('mean')``, or the
operands of a product swapped (``a * b`` -> ``b * a``, exact in IEEE arithmetic). Same values; the gold manager
must not repair. Its probe is the same recomputation, which passes on both runs.
"""

from __future__ import annotations

import ast
import math
import random
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from harness.pyast import parse_python
from synthesis.faults.code import (
    code_inputs,
    expr_text,
    is_print,
    names_of,
    replace_node,
    sites,
    statements,
    stmt_writes,
)
from synthesis.faults.model import Edit, earlier_names
from synthesis.faults.transforms import column_of, method_call, root_name, slot_get

if TYPE_CHECKING:
    from synthesis.domains.base import TaskSpec, TurnSpec

BENIGN_AGGS = ("sum", "mean", "median", "max", "min", "count", "std")


# ---- stale_variable ---------------------------------------------------------------------------------------------
def _stale_at_invalidate(task: TaskSpec, turn: TurnSpec) -> list[Edit]:
    declared = slot_get(turn, "recompute")
    earlier = earlier_names(task, turn)
    targets = set(declared) if declared else earlier - {"result"}
    body = statements(turn.code)
    dropped = [s for s in body if set(stmt_writes(s)) & targets and "result" not in stmt_writes(s)]
    if not dropped or len(dropped) == len(body):
        return []
    code = turn.code
    for stmt in reversed(dropped):
        code = replace_node(code, stmt, "", check=False)
    code = "\n".join(line for line in code.splitlines() if line.strip())
    parse_python(code)
    stale = [w for s in dropped for w in stmt_writes(s)]
    read_by_rest = set().union(*(names_of(s)[0] for s in body if s not in dropped))
    roots = tuple(dict.fromkeys([w for w in stale if w in read_by_rest] + stale))
    if not set(roots) & earlier:
        return []  # nothing old is reused: the skipped lines defined fresh names only
    var = root_name(roots)
    return [
        Edit(
            code=code,
            roots=roots,
            violated="the revised assumption stated in the context must be applied",
            check=f"`{var}` must reflect the revision stated in the context: {turn.context}",
            reasoning=f"`{var}` still holds its value from before the revision in the context; it was not "
            "recomputed after the change",
        )
    ]


def _stale_after_invalidate(task: TaskSpec, turn: TurnSpec) -> list[Edit]:
    edits = []
    inputs = code_inputs(turn.code)
    by_id = {t.turn_id: t for t in task.turns}
    for dep in turn.depends_on:
        source = by_id.get(dep)
        if source is None or source.relation != "invalidate":
            continue
        param, fix = slot_get(source, "param"), slot_get(source, "correction")
        revert = None
        if isinstance(param, Mapping) and param.get("var") in inputs:
            var, old, new = param["var"], param["old"], param["new"]
            revert = f"{var} = {old!r}\n"
            what = f"the value {old!r} from before the revision (now {new!r})"
        elif isinstance(fix, Mapping) and fix.get("var") in inputs:
            var, col, key_col = fix["var"], fix["column"], fix.get("key_column")
            rows = f"{var}[{key_col!r}] == {fix['key']!r}" if key_col else repr(fix["key"])
            revert = f"{var}.loc[{rows}, {col!r}] = {fix['old']!r}\n"
            what = f"the uncorrected {col} {fix['old']!r} (corrected to {fix['new']!r})"
        rederive = _superseded_rederivation(source, param if isinstance(param, Mapping) else fix)
        reused = [name for name in stmt_names_written(source) if name in inputs and name != "result"]
        if rederive is not None and reused:
            var = (param or fix)["var"]
            roots = tuple(dict.fromkeys([*reused, var]))
            edits.append(
                Edit(
                    code=rederive + "\n" + turn.code,
                    roots=roots,
                    violated=f"turn {dep} revised `{var}`; later turns must use values derived after the revision",
                    check=f"`{roots[0]}` must carry the revision of turn {dep} ({source.context})",
                    reasoning=f"it was re-derived with the superseded `{var}` from before the revision of turn {dep}, "
                    "so it is stale",
                )
            )
        if revert is None:
            continue
        edits.append(
            Edit(
                code=revert + turn.code,
                roots=(var,),
                violated=f"turn {dep} revised `{var}`; later turns must use the revised value",
                check=f"`{var}` must carry the revision of turn {dep}",
                reasoning=f"it still uses {what}, which turn {dep} superseded",
                compare=(var, "result"),
            )
        )
    return edits


def stmt_names_written(turn: TurnSpec) -> list[str]:
    return [name for stmt in statements(turn.code) for name in stmt_writes(stmt)]


def _superseded_rederivation(source: TurnSpec, revision: Mapping[str, Any] | None) -> str | None:
    """The invalidate turn's code with its revised value put back to the old one (``result`` and prints dropped):
    re-running it re-derives the affected variables from the superseded assumption."""
    if not revision or not {"var", "old", "new"} <= set(revision):
        return None
    var, old, new = revision["var"], revision["old"], revision["new"]
    pieces, swapped = [], False
    for stmt in statements(source.code):
        if is_print(stmt) or "result" in stmt_writes(stmt):
            continue
        text = ast.get_source_segment(source.code, stmt) or ast.unparse(stmt)
        if var in stmt_writes(stmt):
            hits = [n for n in ast.walk(parse_python(text)) if isinstance(n, ast.Constant) and n.value == new]
            for node in reversed(hits):
                text = replace_node(text, node, repr(old))
                swapped = True
        pieces.append(text)
    return "\n".join(pieces) if swapped else None


def propose_stale_variable(task: TaskSpec, turn: TurnSpec, answers: Any, rng: random.Random) -> list[Edit]:
    if turn.relation == "invalidate":
        return _stale_at_invalidate(task, turn)
    return _stale_after_invalidate(task, turn)


# ---- execution_error --------------------------------------------------------------------------------------------
def _misspelt(name: str) -> str:
    return name.title() if name.title() != name else name + "s"


def propose_execution_error(task: TaskSpec, turn: TurnSpec, answers: Any, rng: random.Random) -> list[Edit]:
    edits = []
    columns = sites(turn.code, lambda n: isinstance(n, ast.Subscript) and isinstance(n.ctx, ast.Load))
    for site in columns:
        column = column_of(site.node)
        if column is None or not isinstance(site.node.slice, ast.Constant):  # type: ignore[attr-defined]
            continue
        roots = tuple(stmt_writes(site.stmt))
        wrong = _misspelt(column)
        edits.append(
            Edit(
                code=replace_node(turn.code, site.node.slice, repr(wrong)),  # type: ignore[attr-defined]
                roots=roots,
                violated=f"the step must run; the column is '{column}'",
                check="the step must run without error",
                reasoning=f"the step failed with a KeyError: it asks for a column '{wrong}' that does not exist, "
                f"so `{root_name(roots)}` was never computed",
                executes=False,
            )
        )
        break
    inputs = code_inputs(turn.code) & earlier_names(task, turn)
    names = sites(turn.code, lambda n: isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load) and n.id in inputs)
    for site in names[:1]:
        roots = tuple(stmt_writes(site.stmt))
        wrong = site.node.id + "s"  # type: ignore[attr-defined]
        edits.append(
            Edit(
                code=replace_node(turn.code, site.node, wrong),
                roots=roots,
                violated="the step must run; it reads a variable that does not exist",
                check="the step must run without error",
                reasoning=f"the step failed with a NameError on `{wrong}`, a misspelt variable, so "
                f"`{root_name(roots)}` was never computed",
                executes=False,
            )
        )
    body = statements(turn.code)
    calls = [s for s in body if any(isinstance(n, ast.Call) for n in ast.walk(s)) and stmt_writes(s)]
    if calls:
        stmt = calls[0]
        text = ast.get_source_segment(turn.code, stmt) or ast.unparse(stmt)
        if text.endswith(")"):
            roots = tuple(w for s in body for w in stmt_writes(s))
            edits.append(
                Edit(
                    code=replace_node(turn.code, stmt, text[:-1], check=False),
                    roots=tuple(dict.fromkeys((*stmt_writes(stmt), *roots))),
                    violated="the step must be valid Python",
                    check="the step must run without error",
                    reasoning=f"the cell has a syntax error (an unclosed parenthesis), so nothing in it ran and "
                    f"`{stmt_writes(stmt)[0]}` was never computed",
                    executes=False,
                )
            )
    return edits


# ---- claimed_without_execution ----------------------------------------------------------------------------------
def _other_category(task: TaskSpec, value: str, rng: random.Random) -> str | None:
    for df in getattr(task, "tables", {}).values():
        for column in df.columns:
            if df[column].dtype == object or str(df[column].dtype).startswith("str"):
                values = sorted({v for v in df[column].dropna().tolist() if isinstance(v, str)})
                if value in values and len(values) > 1:
                    return rng.choice([v for v in values if v != value])
    return None


def perturb(value: Any, rng: random.Random, precision: int | None, task: TaskSpec) -> Any:
    """A made-up claim near ``value``: numbers scaled by 1.05-1.25 (ints shifted), strings swapped for another
    value of the same column; containers element-wise."""
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, int):
        return value + rng.randint(1, 9)
    if isinstance(value, float):
        if math.isnan(value) or math.isinf(value):
            return value
        claimed = value * rng.uniform(1.05, 1.25) + (0.0 if value else 1.0)
        return round(claimed, precision if precision is not None else 2)
    if isinstance(value, str):
        return _other_category(task, value, rng) or value
    if isinstance(value, dict):
        return {k: perturb(v, rng, precision, task) for k, v in value.items()}
    if isinstance(value, list):
        return [perturb(v, rng, precision, task) for v in value]
    return value


def propose_claimed(task: TaskSpec, turn: TurnSpec, answers: Mapping[str, Any] | None, rng: random.Random) -> list:
    if not answers or answers.get(turn.turn_id) is None:
        return []
    answer = answers[turn.turn_id]
    claimed = perturb(answer, rng, getattr(turn, "precision", None), task)
    if claimed == answer:
        return []
    writes = tuple(w for w in (getattr(turn, "writes", ()) or ()) if w != "result")
    return [
        Edit(
            code=f"result = {claimed!r}\nprint_result(result)",
            roots=("result", *writes),
            violated="a reported result must come from code that computed it",
            check="the reported result must be what the data gives; this step's code computes nothing",
            reasoning="the reported numbers were stated without running code that computes them; they do not "
            "match the data",
            compare=("result",),
        )
    ]


# ---- benign_rewrite ---------------------------------------------------------------------------------------------
def propose_benign(task: TaskSpec, turn: TurnSpec, answers: Any, rng: random.Random) -> list[Edit]:
    rewrites = []  # (site, rewritten code, how it was rewritten)
    aggs = sites(turn.code, lambda n: method_call(n, BENIGN_AGGS) and not n.args and not n.keywords)
    for site in aggs:
        node: ast.Call = site.node  # type: ignore[assignment]
        rewritten = f"{expr_text(node.func.value)}.agg({node.func.attr!r})"  # type: ignore[attr-defined]
        how = f"`.agg('{node.func.attr}')`"  # type: ignore[attr-defined]
        rewrites.append((site, replace_node(turn.code, node, rewritten), how))

    def product(n: ast.AST) -> bool:
        if not (isinstance(n, ast.BinOp) and isinstance(n.op, ast.Mult)):
            return False
        return not any(isinstance(o, ast.Constant) and isinstance(o.value, str) for o in (n.left, n.right))

    for site in sites(turn.code, product):
        node = site.node  # type: ignore[assignment]
        swapped = f"{expr_text(node.right)} * {expr_text(node.left)}"  # type: ignore[attr-defined]
        rewrites.append((site, replace_node(turn.code, node, f"({swapped})"), "a product with its operands swapped"))
    out = []
    for site, code, how in rewrites:
        roots = tuple(stmt_writes(site.stmt))
        out.append(
            Edit(
                code=code,
                roots=roots,
                violated="nothing: an equivalent computation written differently",
                check=f"`{root_name(roots)}` must equal an independent recomputation from the data",
                reasoning=f"no error: `{root_name(roots)}` is computed in an equivalent way ({how})",
            )
        )
    return out


SPECIAL_PROPOSALS = {
    "stale_variable": (propose_stale_variable, "an invalidated value reused after its revision"),
    "execution_error": (propose_execution_error, "the step raises (KeyError, NameError or SyntaxError)"),
    "claimed_without_execution": (propose_claimed, "a hard-coded result printed without computing it"),
}
BENIGN_PROPOSALS = {"benign_rewrite": (propose_benign, "an equivalent rewrite: .agg('name') or swapped product")}
