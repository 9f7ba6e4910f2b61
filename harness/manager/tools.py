"""The manager's read-only tools: ``inspect_python``, ``compile_python``, ``check_execution``, ``run_probe`` (and
``check_constraint``), ``run_check`` and ``load_state``.

Every tool takes plain arguments and returns a :class:`ToolResult`; none of them raises for bad arguments (a wrong
type, an unknown step or state id, a closed kernel): the result has ``ok=False`` and an ``error`` that names the
argument and the fix. ``content`` is JSON-serialisable and compact (long texts are capped); ``render()`` is the text
handed back to the manager model. None of the tools can change the worker's state: the AST tools never execute code,
``check_execution``/``load_state`` read records, and probes run in the episode's clean verifier over the worker's
variables exported as data (:meth:`harness.sandbox.Kernel.probe`); ``run_check`` runs a typed check spec
(:mod:`harness.checks`) there, compiled by the harness, so its verdict is the harness's, never the worker's.

Usage::

    inspect_python("df = df[df.x > 100]\\nround(df.y.mean(), 2)").content
    # {'reads': ['df'], 'inputs': ['df'], 'writes': ['df'], ..., 'calls': ['round', 'df.y.mean'],
    #  'constants': [{'value': 100, 'line': 1, 'context': 'df.x > 100'}, {'value': 2, ...}], ...}
    check_execution(3, claimed_code, {s.step_id: s for s in steps})      # steps: ExecutedStep.from_result(...)
    run_probe(kernel, "len(df[df.x > 100])").content["display"]
    check_constraint(kernel, "assert round(share, 2) == share").content["passed"]
    run_check(kernel, {"kind": "rounded", "variable": "share", "decimals": 2}).content["passed"]
    load_state("S2", committed_states)
"""

from __future__ import annotations

import ast
import difflib
import json
import re
import textwrap
import warnings
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, fields
from typing import Any

from harness.checks import CheckSpecError, compile_check, parse_spec, requirement
from harness.manager.ast_inspect import Inspector, cap_text
from harness.pyast import parse_python
from harness.sandbox import ExecutionResult, Kernel, SandboxError

STDOUT_CAP = 2_000  # chars of probe stdout / display returned to the manager
TAIL_CAP = 1_000  # chars of an executed step's stdout kept in the log
RESULTS_CAP = 2_000  # chars of JSON results returned
SUMMARY_CAP = 200  # chars of one variable summary
MAX_LISTED_IDS = 20
MAX_DIFF_LINES = 20
MAX_VARIABLES = 30  # variable changes of one step shown by check_execution
MAX_CODE_CHARS = 2_000  # the executed code shown by check_execution (its head; a marker says how much was cut)
MAX_PROBE_TIMEOUT_S = 60.0

_BOOL_REPRS = {"True": True, "False": False, "np.True_": True, "np.False_": False}


@dataclass
class ToolResult:
    """What a tool returns. ``ok=False`` means the call itself was wrong (``error`` says why and how to fix it);
    a probe that raised or a constraint that failed is a successful call whose ``content`` reports the failure."""

    ok: bool
    content: dict[str, Any] = field(default_factory=dict)
    error: str | None = None

    def render(self) -> str:
        """The text returned to the manager: one compact JSON object."""
        body: dict[str, Any] = {"ok": self.ok}
        if self.error is not None:
            body["error"] = self.error
        body.update((k, v) for k, v in self.content.items() if k not in body)
        return json.dumps(body, ensure_ascii=False, default=repr)

    def to_dict(self) -> dict[str, Any]:
        return {"ok": self.ok, "content": self.content, "error": self.error}


def _fail(error: str, **content: Any) -> ToolResult:
    return ToolResult(ok=False, content=content, error=error)


def _cap_results(results: list[Any]) -> list[Any]:
    """Keep the leading results whose JSON fits in ``RESULTS_CAP`` chars; mark what was dropped."""
    kept: list[Any] = []
    used = 0
    for i, value in enumerate(results):
        size = len(json.dumps(value, ensure_ascii=False, default=repr))
        if used + size > RESULTS_CAP:
            kept.append({"truncated": True, "omitted_results": len(results) - i})
            break
        kept.append(value)
        used += size
    return kept


def _check_code(code: Any, arg: str = "code") -> str | None:
    """An error message if ``code`` is not a non-empty string, else None."""
    if not isinstance(code, str):
        return f"argument {arg!r} must be a string of Python source, got {type(code).__name__}; pass the code as text."
    if not code.strip():
        return f"argument {arg!r} is empty; pass the Python source to check."
    return None


# ---- compile_python -------------------------------------------------------------------------------------------------
def compile_python(code: str) -> ToolResult:
    """Syntax validity of ``code``: ``{"valid": True, "lines": n, "warnings": [...]}`` (compiler warnings such as
    ``"is" with a literal``) or ``{"valid": False, "line", "column", "message", "text"}`` (the offending line).
    Invalid code is a successful call (``ok=True``)."""
    if err := _check_code(code):
        return _fail(err)
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            compile(code, "<code>", "exec", dont_inherit=True)  # not just parse: 'return' outside function...
    except (RecursionError, MemoryError) as exc:
        return _fail(f"the code is too deeply nested or too large to compile ({type(exc).__name__}); split it up.")
    except SyntaxError as exc:
        return ToolResult(True, {"valid": False, **_syntax_error_location(exc, code)})
    except ValueError as exc:  # e.g. null bytes in the source
        return ToolResult(True, {"valid": False, "line": None, "column": None, "message": str(exc), "text": None})
    found = [{"line": w.lineno, "message": cap_text(str(w.message), 200)} for w in caught[:10]]
    return ToolResult(True, {"valid": True, "lines": len(code.splitlines()), "warnings": found})


def _syntax_error_location(exc: SyntaxError, code: str) -> dict[str, Any]:
    lines = code.splitlines()
    text = exc.text if exc.text is not None else lines[exc.lineno - 1] if 0 < (exc.lineno or 0) <= len(lines) else ""
    return {"line": exc.lineno, "column": exc.offset, "message": exc.msg, "text": cap_text(text.rstrip("\n"), 200)}


# ---- inspect_python -------------------------------------------------------------------------------------------------


def inspect_python(code: str) -> ToolResult:
    """Program structure of ``code`` from its AST (nothing is executed).

    ``content``: ``reads``/``writes`` (module-level names, in first-seen order; ``inputs`` are the reads that
    happen before the code writes the name, i.e. what it takes from the namespace; ``df['x'] = ...``,
    ``df.a = ...``, ``lst.append(...)`` and ``inplace=True`` write their root variable), ``deletes`` (``del x``),
    ``imports`` (modules), ``calls`` (dotted callees), ``constants`` (numbers and strings with their line and
    context, e.g. ``{"value": 100, "line": 2, "context": "df.x > 100"}``), ``files_read``/``files_written``
    (literal paths; f-string placeholders kept as ``{expr}``). A syntax error gives ``ok=False`` with its location.
    """
    if err := _check_code(code):
        return _fail(err)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # compile_python reports them
            tree = parse_python(code)
        return ToolResult(True, Inspector(code).run(tree))
    except SyntaxError as exc:
        loc = _syntax_error_location(exc, code)
        return _fail(f"syntax error at line {loc['line']}, column {loc['column']}: {loc['message']}", **loc)
    except (ValueError, RecursionError, MemoryError) as exc:
        return _fail(f"the code cannot be analysed ({type(exc).__name__}: {exc}); split it into smaller cells.")


# ---- check_execution ------------------------------------------------------------------------------------------------
@dataclass
class ExecutedStep:
    """What the executor recorded for one worker step (the harness builds these; the manager never can)."""

    step_id: int
    code: str
    ok: bool
    error_type: str | None = None
    stdout_tail: str = ""
    results: list[Any] = field(default_factory=list)
    variables: list[dict[str, Any]] = field(default_factory=list)
    error_message: str | None = None
    timed_out: bool = False

    @classmethod
    def from_result(cls, step_id: int, code: str, result: ExecutionResult) -> ExecutedStep:
        """Compact record of a cell run: the stdout tail, capped results and the variable changes."""
        return cls(
            step_id=step_id,
            code=code,
            ok=result.ok,
            error_type=result.error_type,
            stdout_tail=cap_text(result.stdout, TAIL_CAP, tail=True) or "",
            results=_cap_results(list(result.results)),
            variables=[{**v.to_dict(), "summary": cap_text(v.summary, SUMMARY_CAP)} for v in result.variables],
            error_message=cap_text(result.error_message, 500),
            timed_out=result.timed_out,
        )

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form (stored with replayable episodes); :meth:`from_dict` reads it back."""
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ExecutedStep:
        """Rebuild a step from :meth:`to_dict` output; raises ``ValueError`` naming a missing or unknown field."""
        where = "ExecutedStep.from_dict"
        if not isinstance(data, Mapping):
            raise ValueError(f"{where}: expected a mapping, got {type(data).__name__}; write it with to_dict().")
        names = [f.name for f in fields(cls)]
        missing = sorted({"step_id", "code", "ok"} - data.keys())
        unknown = sorted(data.keys() - set(names))
        if missing or unknown:
            raise ValueError(f"{where}: missing fields {missing}, unknown fields {unknown}; valid fields: {names}.")
        if isinstance(data["step_id"], bool) or not isinstance(data["step_id"], int):
            raise ValueError(f"{where}: step_id must be an int, got {data['step_id']!r}.")
        return cls(**data)


def normalise_code(code: str) -> list[str]:
    """Lines without trailing whitespace, blank lines or a common indent (the comparison key of two cells)."""
    text = textwrap.dedent(code.replace("\r\n", "\n").replace("\r", "\n").expandtabs(4))
    return [line.rstrip() for line in text.split("\n") if line.strip()]


def _as_step_id(step_id: Any) -> int | None:
    if isinstance(step_id, bool):
        return None
    if isinstance(step_id, int):
        return step_id
    if isinstance(step_id, str) and re.fullmatch(r"\s*-?\d+\s*", step_id):
        return int(step_id)
    return None


def _listed(ids: list[Any], *, newest: bool = False) -> str:
    """At most ``MAX_LISTED_IDS`` ids for an error message: the first ones, or the last ones if ``newest``."""
    extra = len(ids) - MAX_LISTED_IDS
    shown = ", ".join(str(i) for i in (ids[-MAX_LISTED_IDS:] if newest else ids[:MAX_LISTED_IDS])) or "none"
    if extra <= 0:
        return shown
    return f"{shown} (the newest {MAX_LISTED_IDS} of {len(ids)})" if newest else f"{shown} (and {extra} more)"


def check_execution(step_id: int, claimed_code: str | None, executor_log: Mapping[int, ExecutedStep]) -> ToolResult:
    """Did the worker's claimed step run, with the claimed code, successfully?

    ``claimed_code=None`` skips the code comparison. ``content``: ``step_id``, ``code_matches`` (None when not
    compared) and a ``diff`` when it does not match, ``code`` (the code that ran, capped at :data:`MAX_CODE_CHARS`:
    the manager sees the worker's code as it sees its outputs), ``ran_ok``,
    ``error_type``/``error_message``/``timed_out``, ``stdout_tail``, ``results``, ``variables`` and a one-word
    ``verdict``: ``verified`` (ran ok, code matches), ``code_mismatch`` or ``failed``. An unknown step id gives
    ``ok=False`` listing the executed ids.
    """
    sid = _as_step_id(step_id)
    if sid is None:
        return _fail(f"argument 'step_id' must be an integer step number, got {step_id!r}.")
    if claimed_code is not None and not isinstance(claimed_code, str):
        return _fail(f"claimed_code must be the claimed source text or None, got {type(claimed_code).__name__}.")
    if not isinstance(executor_log, Mapping):
        return _fail(f"executor_log must map step ids to ExecutedStep records, got {type(executor_log).__name__}.")
    step = executor_log.get(sid)
    if step is None:
        ids = sorted(executor_log, key=lambda k: (not isinstance(k, int), str(k) if not isinstance(k, int) else k))
        return _fail(
            f"no executed step with id {sid}; executed step ids: {_listed(ids, newest=True)}.",
            known_step_ids=ids[-MAX_LISTED_IDS:],
        )
    if not isinstance(step, ExecutedStep):
        return _fail(
            f"executor_log[{sid}] is a {type(step).__name__}, not an ExecutedStep; "
            "build it with ExecutedStep.from_result."
        )
    content: dict[str, Any] = {"step_id": sid, "code_matches": None}
    if claimed_code is not None:
        claimed, executed = normalise_code(claimed_code), normalise_code(step.code)
        content["code_matches"] = claimed == executed
        if claimed != executed:
            diff = list(difflib.unified_diff(executed, claimed, "executed", "claimed", n=0, lineterm=""))[2:]
            if len(diff) > MAX_DIFF_LINES:
                diff = diff[:MAX_DIFF_LINES] + [f"[... {len(diff) - MAX_DIFF_LINES} more diff lines ...]"]
            content["diff"] = [cap_text(line, 200) for line in diff]
    ran_ok = step.ok and not step.timed_out and step.error_type is None
    verdict = "failed" if not ran_ok else "code_mismatch" if content["code_matches"] is False else "verified"
    content.update(
        code=cap_text(step.code, MAX_CODE_CHARS),
        verdict=verdict,
        ran_ok=ran_ok,
        error_type=step.error_type,
        error_message=step.error_message,
        timed_out=step.timed_out,
        stdout_tail=step.stdout_tail,
        results=step.results,
        variables=step.variables[:MAX_VARIABLES],
    )
    if len(step.variables) > MAX_VARIABLES:
        content["variables_omitted"] = len(step.variables) - MAX_VARIABLES
    return ToolResult(True, content)


# ---- run_probe / check_constraint -----------------------------------------------------------------------------------
def _check_timeout(timeout_s: Any) -> str | None:
    if isinstance(timeout_s, bool) or not isinstance(timeout_s, (int, float)):
        return f"timeout_s must be a number of seconds, got {timeout_s!r}."
    if not (0 < timeout_s <= MAX_PROBE_TIMEOUT_S):
        return f"timeout_s={timeout_s} is out of range; use a value in (0, {MAX_PROBE_TIMEOUT_S:g}] seconds."
    return None


def _probe(kernel: Kernel, code: str, timeout_s: float) -> ExecutionResult | str:
    """Run a probe; a harness failure (closed kernel, sandbox error) is returned as an error message."""
    if not isinstance(kernel, Kernel):
        return f"kernel must be a harness.sandbox.Kernel, got {type(kernel).__name__}."
    try:
        return kernel.probe(code, timeout=float(timeout_s))
    except (SandboxError, OSError) as exc:
        return f"the probe could not run: {exc}"


def _probe_content(result: ExecutionResult, code: str) -> dict[str, Any]:
    content = {
        "succeeded": result.ok,
        "stdout": cap_text(result.stdout, STDOUT_CAP) or "",
        "stderr": cap_text(result.stderr, 500, tail=True) or "",
        "display": cap_text(result.display, STDOUT_CAP),
        "results": _cap_results(list(result.results)),
        "error_type": result.error_type,
        "error_message": cap_text(result.error_message, 500),
        "error_line": _failing_line(result, code),
        "timed_out": result.timed_out,
    }
    if result.unavailable:
        content["unavailable"] = {name: cap_text(why, 300) for name, why in list(result.unavailable.items())[:10]}
    if result.restarted:
        content["kernel_restarted"] = result.restart_reason
    return content


def run_probe(kernel: Kernel, code: str, *, timeout_s: float = 5.0) -> ToolResult:
    """Run ``code`` in the clean verifier over the worker's variables it names, exported as data (it cannot change
    them or write files; ``unavailable`` lists named variables that are not data), with a short time limit.
    ``content``: ``succeeded``, ``stdout`` and ``display`` (capped), ``results``
    (from ``print_result``), ``error_type``/``error_message``, ``timed_out``. A probe error is a successful call."""
    if err := _check_code(code) or _check_timeout(timeout_s):
        return _fail(err)
    result = _probe(kernel, code, timeout_s)
    if isinstance(result, str):
        return _fail(result)
    return ToolResult(True, _probe_content(result, code))


def _bool_value(result: ExecutionResult) -> bool | None:
    """The bool a constraint evaluated to (its last expression) or printed last, if any."""
    if result.display is not None:
        return _BOOL_REPRS.get(result.display.strip())
    lines = [line.strip() for line in result.stdout.splitlines() if line.strip()]
    return _BOOL_REPRS.get(lines[-1]) if lines else None


def _failing_line(result: ExecutionResult, code: str) -> int | None:
    """The line of ``code`` where the error surfaced: the innermost traceback frame of the probe's own cell (the
    first cell frame; later ``<cell-N>`` frames are functions the worker defined in earlier cells)."""
    frames = re.findall(r'File "<cell-(\d+)>", line (\d+)', result.traceback or "")
    if not frames:
        return None
    number = int([line for cell, line in frames if cell == frames[0][0]][-1])
    return number if 1 <= number <= len(code.splitlines()) else None


def _operands(test: ast.expr) -> list[ast.expr]:
    """The parts of an assert's test worth showing: both sides of ``a == b``, the arguments of
    ``np.isclose(a, b)``, the terms of ``a and b``, the operand of ``not a``, else the test itself."""
    if isinstance(test, ast.Compare):
        parts = [test.left, *test.comparators]
    elif isinstance(test, ast.Call):
        parts = [*test.args, *(k.value for k in test.keywords)] or [test]
    elif isinstance(test, ast.BoolOp):
        parts = list(test.values)
    elif isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        parts = [test.operand]
    else:
        parts = [test]
    return [p for p in parts if not isinstance(p, ast.Constant)]


def _operand_values(kernel: Kernel, code: str, line: int, timeout_s: float) -> dict[str, Any] | None:
    """For a failed top-level ``assert``: the values (reprs) of its operands, from a second probe that reruns the
    statements before it."""
    tree = parse_python(code)
    for i, stmt in enumerate(tree.body):
        if isinstance(stmt, ast.Assert) and stmt.lineno == line and (operands := _operands(stmt.test)):
            prefix = ast.unparse(ast.Module(body=tree.body[:i], type_ignores=[]))
            pairs = ", ".join(f"{ast.unparse(o)!r}: repr({ast.unparse(o)})[:{SUMMARY_CAP}]" for o in operands)
            result = _probe(kernel, f"{prefix}\nprint_result({{{pairs}}})", timeout_s)
            if isinstance(result, ExecutionResult) and result.ok and result.results:
                return result.results[-1] if isinstance(result.results[-1], dict) else None
    return None


def check_constraint(kernel: Kernel, constraint_code: str, *, timeout_s: float = 5.0) -> ToolResult:
    """Check an executable constraint in a probe: it passes when it runs without error and, if it evaluates to or
    prints a bool last, that bool is True. ``content``: ``passed``, ``reason``, the probe's output fields and, for a
    failed ``assert x == y``, ``failed_line`` and the operands' ``values`` as evidence."""
    if err := _check_code(constraint_code, "constraint_code") or _check_timeout(timeout_s):
        return _fail(err)
    result = _probe(kernel, constraint_code, timeout_s)
    if isinstance(result, str):
        return _fail(result)
    content = _probe_content(result, constraint_code)
    value = _bool_value(result) if result.ok else None
    if result.ok:
        passed = value is not False
        reason = {None: "ran without error", True: "evaluated to True", False: "evaluated to False"}[value]
    elif result.timed_out:
        passed, reason = False, "timed out before finishing"
    else:
        passed, reason = False, f"raised {result.error_type}: {result.error_message or '(no message)'}"
    content = {"passed": passed, "reason": cap_text(reason, 500), **content}
    line = content["error_line"]
    if result.error_type == "AssertionError" and line is not None:
        content["failed_line"] = constraint_code.splitlines()[line - 1].strip()
        values = _operand_values(kernel, constraint_code, line, timeout_s)
        if values:
            content["values"] = values
    return ToolResult(True, content)


# ---- run_check ------------------------------------------------------------------------------------------------------
def run_check(kernel: Kernel, spec: Any, *, timeout_s: float = 5.0, constraint: str | None = None) -> ToolResult:
    """Run a typed check spec (a JSON object or a :class:`~harness.checks.CheckSpec`) in the clean verifier: the
    harness compiles it (:func:`harness.checks.compile.compile_check`) and runs the code like a probe.

    ``content``: ``passed`` (True; False when the check's assertion failed; None when it could not run: a variable
    that does not exist or is not data, another error, a timeout), ``kind``, ``variable``, ``requirement`` (in
    words), ``reason`` (the assertion message: what was found against what is required; None unless failed),
    ``error_type``/``error_message`` (why it could not run), ``unavailable`` (named variables that are not data), and
    ``constraint`` (the stated constraint's text) when the spec is a stated constraint's check. A malformed spec gives
    ``ok=False`` with the one-line :class:`~harness.checks.CheckSpecError`."""
    try:
        parsed = parse_spec(spec)
    except CheckSpecError as exc:
        return _fail(str(exc))
    if err := _check_timeout(timeout_s):
        return _fail(err)
    result = _probe(kernel, compile_check(parsed), timeout_s)
    if isinstance(result, str):
        return _fail(result)
    content = {**check_outcome(result), "kind": parsed.kind, "variable": parsed.variable}
    content["requirement"] = cap_text(requirement(parsed), 300)
    if constraint is not None:
        content["constraint"] = cap_text(constraint, 300)
    order = ("passed", "kind", "variable", "requirement", "constraint", "reason", "error_type", "error_message")
    return ToolResult(True, {k: content[k] for k in (*order, "unavailable") if k in content})


def check_outcome(result: ExecutionResult) -> dict[str, Any]:
    """A compiled check's verdict from its probe result: ``passed`` (None when it could not run), ``reason`` (the
    assertion message of a failed check), ``error_type``/``error_message`` and ``unavailable``."""
    failed = result.error_type == "AssertionError" and not result.timed_out
    if result.ok:
        passed, reason = True, None
    elif failed:
        passed, reason = False, cap_text(result.error_message, 500) or "the check's assertion failed (no message)"
    else:
        passed, reason = None, None
    error_type = "TimeoutError" if result.timed_out else None if result.ok or failed else result.error_type
    error_message = None
    if error_type is not None:
        error_message = "timed out before finishing" if result.timed_out else cap_text(result.error_message, 300)
    unavailable = {name: cap_text(why, 300) for name, why in list(result.unavailable.items())[:10]}
    return {
        "passed": passed,
        "reason": reason,
        "error_type": error_type,
        "error_message": error_message,
        "unavailable": unavailable,
    }


def spec_dict(spec: Any) -> dict[str, Any] | None:
    """The canonical dict of a spec (:meth:`CheckSpec.to_dict`), or None when it is malformed: two specs that mean the
    same compare equal as dicts (defaults filled in)."""
    try:
        return parse_spec(spec).to_dict()
    except CheckSpecError:
        return None


# ---- load_state -----------------------------------------------------------------------------------------------------
def load_state(state_id: str, committed: Mapping[str, dict[str, Any]]) -> ToolResult:
    """A committed state (already serialised) for a one-hop dependency check: ``{"state_id", "state"}``.
    An unknown id gives ``ok=False`` listing at most 20 known ids."""
    if isinstance(state_id, int) and not isinstance(state_id, bool):
        state_id = str(state_id)
    if not isinstance(state_id, str) or not state_id.strip():
        return _fail(f"argument 'state_id' must be a committed state id (a string), got {state_id!r}.")
    if not isinstance(committed, Mapping):
        return _fail(f"committed must map state ids to serialised states, got {type(committed).__name__}.")
    state = committed.get(state_id.strip())
    if state is None:
        known = list(committed)
        return _fail(
            f"no committed state with id {state_id!r}; committed state ids: {_listed(known)}.",
            known_state_ids=known[:MAX_LISTED_IDS],
        )
    return ToolResult(True, {"state_id": state_id.strip(), "state": state})
