"""Operators: atomic, async capabilities with declared inputs and outputs, the building blocks of every workflow.

``await op(ctx, **inputs)`` checks that the declared ``inputs`` are given, runs the operator and checks that it
returned exactly its declared ``outputs`` (a dict), so a controller or the DAG runtime can bind one operator's outputs
to another's inputs by name. The operators:

=================== ================================== ===================== ======================================
operator            inputs                             outputs               does
=================== ================================== ===================== ======================================
``InspectData``     —                                  profile               the data report of the task contract
``Analyze``         profile                            analysis              LLM, JSON ``{findings, answer_form}``
``Plan``            analysis                           plan                  LLM, JSON ``{steps}``
``GenerateCode``    plan                               code, reply           LLM, one program
``Execute``         code                               result                sandbox (kernel or fresh process)
``ValidateArtifact`` result                            validation            checks the submission contract
``Debug``           code, error                        code, reply           LLM, a fixed program
``Review``          code, result, validation           score, issues         LLM, JSON ``{score, issues}``
``Improve``         code, issues                       code, reply           LLM, an improved program
``Submit``          validation                         answer                sets the question's answer
``SummarizeMemory`` code, answer                       memory                LLM, a note for later questions
=================== ================================== ===================== ======================================

Structured replies are parsed (the first JSON object in the reply, fenced or not) and validated against the
operator's JSON schema (:func:`harness.manager.actions.validate`) before use; a reply that fails is re-asked with the
error up to ``max_format_retries`` times, then :class:`StructuredOutputError` is raised. Code is the first fenced
``python`` block of a reply (:data:`harness.worker.react` conventions); a reply without one gives ``code=None``.
"""

from __future__ import annotations

import json
import re
from typing import Any, ClassVar

from harness.jsonl import json_depth_error
from harness.manager.actions import validate
from harness.sandbox import ExecutionResult
from harness.workflow import artifacts
from harness.workflow.artifacts import Validation
from harness.workflow.context import Context

_CODE = re.compile(r"```(?:python|py)?[ \t]*\n(.*?)```", re.DOTALL)
OUTPUT_CHARS = 2000


class OperatorError(ValueError):
    """An operator called without a declared input, or returning other keys than it declares."""


class StructuredOutputError(RuntimeError):
    """The model's reply did not match the operator's JSON schema, even after the allowed re-asks."""


def extract_code(text: str) -> str | None:
    """The first fenced Python block of ``text`` (``<think>`` blocks dropped), or None."""
    match = _CODE.search(re.sub(r"<think>.*?</think>", "", text or "", flags=re.DOTALL))
    return match.group(1).strip() or None if match else None


def extract_json(text: str) -> Any:
    """The first JSON value that parses, from a fenced ``json`` block or the first ``{`` of ``text``; raises
    ``ValueError`` when there is none (JSON nested deeper than :data:`harness.jsonl.MAX_JSON_DEPTH` is none)."""
    text = re.sub(r"<think>.*?</think>", "", text or "", flags=re.DOTALL)
    fenced = re.search(r"```(?:json)?[ \t]*\n(.*?)```", text, re.DOTALL)
    candidates = [fenced.group(1)] if fenced else []
    start = text.find("{")
    if start >= 0:
        candidates.append(text[start:])
    decoder = json.JSONDecoder()
    for candidate in candidates:
        candidate = candidate.strip()
        if json_depth_error(candidate) is not None:
            continue  # nested too deep to decode safely (json recurses once per level)
        try:
            return decoder.raw_decode(candidate)[0]
        except ValueError:  # bad JSON, or an integer of more than 4300 digits
            continue
    raise ValueError("the reply holds no JSON object")


def result_text(result: ExecutionResult) -> str:
    """An execution's output as the model sees it: stdout tail, value, error."""
    parts = [f"execution {'succeeded' if result.ok else 'failed'}"]
    if result.stdout:
        parts.append("stdout:\n" + result.stdout[-OUTPUT_CHARS:])
    if result.display:
        parts.append("value:\n" + result.display[-OUTPUT_CHARS:])
    if not result.ok:
        parts.append(f"error: {result.error_type}: {result.error_message}")
        if result.traceback:
            parts.append(result.traceback[-OUTPUT_CHARS:])
    return "\n".join(parts)


class Operator:
    """Base class: subclasses set ``name``, ``inputs``, ``outputs`` and implement :meth:`run`."""

    name: ClassVar[str]
    inputs: ClassVar[tuple[str, ...]] = ()
    outputs: ClassVar[tuple[str, ...]] = ()

    async def __call__(self, ctx: Context, **inputs: Any) -> dict[str, Any]:
        missing = [key for key in self.inputs if key not in inputs]
        if missing:
            raise OperatorError(
                f"operator {self.name} needs the input(s) {missing}; got {sorted(inputs)}. Bind them from an "
                "upstream output (DAG edge) or pass them."
            )
        outputs = await self.run(ctx, **{key: inputs[key] for key in self.inputs})
        if not isinstance(outputs, dict) or set(outputs) != set(self.outputs):
            got = sorted(outputs) if isinstance(outputs, dict) else type(outputs).__name__
            raise OperatorError(f"operator {self.name} must return the keys {list(self.outputs)}; it returned {got}.")
        return outputs

    async def run(self, ctx: Context, **inputs: Any) -> dict[str, Any]:
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


class StructuredOperator(Operator):
    """An LLM operator whose reply is a JSON object validated against ``schema``."""

    schema: ClassVar[dict[str, Any]]

    async def structured(self, ctx: Context, prompt: str) -> dict[str, Any]:
        asked = prompt
        for _ in range(ctx.config.max_format_retries + 1):
            reply = await ctx.ask(asked)
            try:
                value = extract_json(reply.text)
                problem = validate(value, self.schema, "reply")
            except ValueError as exc:
                problem = str(exc)
            if problem is None:
                return value
            asked = f"{prompt}\n\nYour previous reply was rejected: {problem}. Reply with a JSON object that fits."
        raise StructuredOutputError(
            f"operator {self.name}: no reply matched its schema in {ctx.config.max_format_retries + 1} attempt(s); "
            f"last problem: {problem}. Fix: a model that follows the format, or raise max_format_retries."
        )


class InspectData(Operator):
    name, outputs = "inspect_data", ("profile",)

    async def run(self, ctx: Context) -> dict[str, Any]:
        return {"profile": ctx.contract}


class Analyze(StructuredOperator):
    name, inputs, outputs = "analyze", ("profile",), ("analysis",)
    schema = {
        "type": "object",
        "required": ["findings"],
        "properties": {"findings": {"type": "array", "items": {"type": "string"}}, "answer_form": {"type": "string"}},
    }

    async def run(self, ctx: Context, profile: str) -> dict[str, Any]:
        return {"analysis": await self.structured(ctx, ctx.render("analyze", contract=profile))}


class Plan(StructuredOperator):
    name, inputs, outputs = "plan", ("analysis",), ("plan",)
    schema = {
        "type": "object",
        "required": ["steps"],
        "properties": {"steps": {"type": "array", "minItems": 1, "items": {"type": "string", "minLength": 1}}},
    }

    async def run(self, ctx: Context, analysis: Any) -> dict[str, Any]:
        value = await self.structured(ctx, ctx.render("plan", analysis=json.dumps(analysis, indent=1)))
        return {"plan": value["steps"]}


class _CodeWriter(Operator):
    outputs = ("code", "reply")

    async def write(self, ctx: Context, prompt: str) -> dict[str, Any]:
        reply = await ctx.ask(prompt)
        return {"code": extract_code(reply.text), "reply": reply.text}


class GenerateCode(_CodeWriter):
    """One program from the plan (``prompt``: the template name, e.g. ``direct`` or ``draft`` for fresh-process
    programs; ``fields``: extra template fields)."""

    name, inputs = "generate_code", ("plan",)

    def __init__(self, prompt: str = "generate", **fields: Any):
        self.prompt, self.fields = prompt, fields

    async def run(self, ctx: Context, plan: Any) -> dict[str, Any]:
        steps = "\n".join(f"{i}. {s}" for i, s in enumerate(plan, 1)) if isinstance(plan, list) else str(plan or "")
        fields = {"plan": steps, **self.fields} if "$plan" in ctx.config.prompt(self.prompt) else self.fields
        return await self.write(ctx, ctx.render(self.prompt, **fields))


class Debug(_CodeWriter):
    name, inputs = "debug", ("code", "error")

    async def run(self, ctx: Context, code: str, error: str) -> dict[str, Any]:
        return await self.write(ctx, ctx.render("debug", code=code, error=error))


class Improve(_CodeWriter):
    name, inputs = "improve", ("code", "issues")

    async def run(self, ctx: Context, code: str, issues: list[str]) -> dict[str, Any]:
        return await self.write(ctx, ctx.render("improve", code=code, issues="\n".join(f"- {i}" for i in issues)))


class Execute(Operator):
    """Runs ``code`` in the episode's kernel, or (``fresh=True``) in a fresh sandbox process sharing WORK_DIR."""

    name, inputs, outputs = "execute", ("code",), ("result",)

    def __init__(self, fresh: bool = False, thought: str = ""):
        self.fresh, self.thought = fresh, thought

    async def run(self, ctx: Context, code: str) -> dict[str, Any]:
        return {"result": await ctx.execute(code, fresh=self.fresh, thought=self.thought)}


class ValidateArtifact(Operator):
    """Checks the submission in WORK_DIR (or the execution's ``print_result`` value) against the task's contract."""

    name, inputs, outputs = "validate_artifact", ("result",), ("validation",)

    async def run(self, ctx: Context, result: ExecutionResult | None) -> dict[str, Any]:
        reported = result.results[-1] if result is not None and result.results else artifacts.NO_RESULT
        return {"validation": artifacts.check(ctx.task, ctx.env.workdir, reported)}


class Review(StructuredOperator):
    name, inputs, outputs = "review", ("code", "result", "validation"), ("score", "issues")
    schema = {
        "type": "object",
        "required": ["score"],
        "properties": {
            "score": {"type": "number", "minimum": 0},
            "issues": {"type": "array", "items": {"type": "string"}},
        },
    }

    async def run(self, ctx: Context, code: str, result: ExecutionResult, validation: Validation) -> dict[str, Any]:
        prompt = ctx.render("review", code=code, output=result_text(result), validation=validation.describe())
        value = await self.structured(ctx, prompt)
        return {"score": min(float(value["score"]), 1.0), "issues": list(value.get("issues", []))}


class Submit(Operator):
    """Makes a valid submission the question's answer (records it in ``ctx.artifacts["submission"]``)."""

    name, inputs, outputs = "submit", ("validation",), ("answer",)

    async def run(self, ctx: Context, validation: Validation) -> dict[str, Any]:
        if validation.valid:
            ctx.answer = validation.answer
            ctx.artifacts["submission"] = validation.answer
        return {"answer": ctx.answer}


class SummarizeMemory(Operator):
    """Adds a short summary of the solved question to ``ctx.memory`` (prompts of later questions show it)."""

    name, inputs, outputs = "summarize_memory", ("code", "answer"), ("memory",)

    async def run(self, ctx: Context, code: str, answer: Any) -> dict[str, Any]:
        reply = await ctx.ask(
            ctx.render("summarize", question=ctx.question, code=code, answer=json.dumps(answer, default=str))
        )
        summary = reply.text.strip()[:600]
        if summary:
            ctx.memory.append(summary)
        return {"memory": summary}
