"""Controllers: how operators are composed into a program, over a shared ``state`` dict.

Each controller has ``await controller.run(ctx, state) -> state``. A *step* is an :class:`Operator` (its declared
inputs are read from ``state`` by name, its outputs written back), another controller, or an ``async fn(ctx, state)``.

- :class:`Sequence`: fixed steps by index.
- :class:`Iterate`: conditional / iterative: run ``first``, then ``retry`` while ``until(state)`` is false, at most
  ``max_iterations`` times (retry code generation after an error, refine after a weak validation score).
- :class:`Search`: a policy chooses the next step by name from the state until it returns None or ``budget`` steps
  ran.
- :class:`DAG`: a small dataflow runtime: a node (an operator) runs once all its inputs exist; an :class:`Edge`
  binds an upstream node's output key to a downstream node's input key; inputs no edge binds come from ``state``.
  Ready nodes run concurrently (their LLM calls and executions meet the scheduler's limits). Construction checks
  node names, declared keys and cycles.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol, Union

from harness.workflow.context import Context
from harness.workflow.operators import Operator


class Controller(Protocol):
    async def run(self, ctx: Context, state: dict[str, Any]) -> dict[str, Any]: ...


Step = Union[Operator, Controller, Callable[[Context, dict[str, Any]], Awaitable[Any]]]  # noqa: UP007


async def run_step(step: Step, ctx: Context, state: dict[str, Any]) -> dict[str, Any]:
    """Run one step on ``state`` (see the module docstring) and return the state."""
    if isinstance(step, Operator):
        state.update(await step(ctx, **{key: state[key] for key in step.inputs if key in state}))
    elif hasattr(step, "run"):
        await step.run(ctx, state)
    else:
        await step(ctx, state)
    return state


@dataclass
class Sequence:
    steps: list[Step]

    async def run(self, ctx: Context, state: dict[str, Any]) -> dict[str, Any]:
        for index, step in enumerate(self.steps):
            state["step_index"] = index
            await run_step(step, ctx, state)
        return state


@dataclass
class Iterate:
    first: Step
    retry: Step
    until: Callable[[dict[str, Any]], bool]
    max_iterations: int

    async def run(self, ctx: Context, state: dict[str, Any]) -> dict[str, Any]:
        state["iteration"] = 0
        await run_step(self.first, ctx, state)
        while not self.until(state) and state["iteration"] < self.max_iterations:
            state["iteration"] += 1
            await run_step(self.retry, ctx, state)
        return state


@dataclass
class Search:
    steps: Mapping[str, Step]
    policy: Callable[[dict[str, Any]], str | None]
    budget: int

    async def run(self, ctx: Context, state: dict[str, Any]) -> dict[str, Any]:
        state.setdefault("choices", [])
        while len(state["choices"]) < self.budget:
            choice = self.policy(state)
            if choice is None:
                break
            if choice not in self.steps:
                raise ValueError(f"search policy chose {choice!r}; the steps are {sorted(self.steps)}.")
            state["choices"].append(choice)
            await run_step(self.steps[choice], ctx, state)
        return state


@dataclass(frozen=True)
class Edge:
    """Bind ``source``'s output ``output`` to ``target``'s input ``input`` (default: the same key)."""

    source: str
    output: str
    target: str
    input: str | None = None

    @property
    def key(self) -> str:
        return self.input or self.output


class DAG:
    """A dataflow graph of operators (see the module docstring); ``run`` stores each node's outputs in
    ``state["nodes"][name]`` and also merges them into ``state``."""

    def __init__(self, nodes: Mapping[str, Operator], edges: list[Edge]):
        self.nodes, self.edges = dict(nodes), list(edges)
        for edge in self.edges:
            for name in (edge.source, edge.target):
                if name not in self.nodes:
                    raise ValueError(f"edge {edge}: no node {name!r}; the nodes are {sorted(self.nodes)}.")
            if edge.output not in self.nodes[edge.source].outputs:
                raise ValueError(
                    f"edge {edge}: {edge.source} declares the outputs {list(self.nodes[edge.source].outputs)}."
                )
            if edge.key not in self.nodes[edge.target].inputs:
                raise ValueError(
                    f"edge {edge}: {edge.target} declares the inputs {list(self.nodes[edge.target].inputs)}."
                )
        bound = [(e.target, e.key) for e in self.edges]
        twice = sorted({b for b in bound if bound.count(b) > 1})
        if twice:
            raise ValueError(f"inputs bound by more than one edge: {twice}; bind each input once.")
        self.order = self._topological_order()

    def _topological_order(self) -> list[str]:
        upstream = {name: {e.source for e in self.edges if e.target == name} for name in self.nodes}
        order: list[str] = []
        while len(order) < len(self.nodes):
            ready = [n for n in self.nodes if n not in order and upstream[n] <= set(order)]
            if not ready:
                cycle = sorted(set(self.nodes) - set(order))
                raise ValueError(f"the graph has a cycle among {cycle}; a DAG runs each node once.")
            order += ready
        return order

    def _inputs(self, name: str, done: dict[str, dict[str, Any]], state: dict[str, Any]) -> dict[str, Any] | None:
        """The inputs of node ``name`` when all exist (from upstream outputs, else from ``state``), else None."""
        inputs = {}
        for key in self.nodes[name].inputs:
            edge = next((e for e in self.edges if e.target == name and e.key == key), None)
            if edge is not None:
                if edge.source not in done:
                    return None
                inputs[key] = done[edge.source][edge.output]
            elif key in state:
                inputs[key] = state[key]
            else:
                return None
        return inputs

    async def run(self, ctx: Context, state: dict[str, Any]) -> dict[str, Any]:
        done: dict[str, dict[str, Any]] = {}
        running: dict[asyncio.Task, str] = {}
        while True:
            for name in self.order:
                if name in done or name in running.values():
                    continue
                inputs = self._inputs(name, done, state)
                if inputs is not None:
                    running[asyncio.ensure_future(self.nodes[name](ctx, **inputs))] = name
            if not running:
                break
            finished, _ = await asyncio.wait(running, return_when=asyncio.FIRST_COMPLETED)
            for task in finished:
                name = running.pop(task)
                if task.exception() is not None:
                    for other in running:
                        other.cancel()
                    raise task.exception()
                done[name] = task.result()
        stuck = [n for n in self.order if n not in done]
        if stuck:
            bound = {(e.target, e.key) for e in self.edges}
            missing = {n: [k for k in self.nodes[n].inputs if (n, k) not in bound and k not in state] for n in stuck}
            raise ValueError(
                f"DAG nodes {stuck} never got all their inputs (unbound: {missing}); add edges or put them in state."
            )
        state.setdefault("nodes", {}).update(done)
        for name in self.order:
            state.update(done[name])
        return state
