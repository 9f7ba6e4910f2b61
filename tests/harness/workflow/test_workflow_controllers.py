"""Controllers (sequence, iterate, search, DAG) and the scheduler's global limits under 50 concurrent tasks."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest

from harness.llm import ChatReply
from harness.workflow import DAG, Edge, Iterate, Scheduler, SchedulerConfig, Search, Sequence
from harness.workflow.operators import Operator
from tests.harness.workflow.conftest import FakeKernel, make_ctx, run


class Emit(Operator):
    """Outputs ``value`` under ``key`` after waiting for ``wait_for`` (an asyncio.Event), logging its name."""

    def __init__(self, name, inputs=(), outputs=("out",), value=None, log=None, wait_for=None, started=None):
        self.name, self.inputs, self.outputs = name, tuple(inputs), tuple(outputs)
        self.value, self.log, self.wait_for, self.started = value, log, wait_for, started

    async def run(self, ctx, **inputs):
        if self.started is not None:
            self.started.set()
        if self.wait_for is not None:
            await asyncio.wait_for(self.wait_for.wait(), timeout=5)
        if self.log is not None:
            self.log.append((self.name, inputs))
        return {key: self.value for key in self.outputs}


@pytest.fixture
def ctx(small_tasks, tmp_path):
    from harness.workflow import FakeChatBackend

    return make_ctx(small_tasks["closed_form"], tmp_path, FakeChatBackend(default="x"))


def test_sequence_runs_steps_in_order_and_binds_by_name(ctx):
    log = []
    steps = [Emit("a", outputs=("x",), value=1, log=log), Emit("b", inputs=("x",), outputs=("y",), value=2, log=log)]
    state = run(Sequence(steps).run(ctx, {}))
    assert log == [("a", {}), ("b", {"x": 1})]
    assert (state["x"], state["y"], state["step_index"]) == (1, 2, 1)


def test_iterate_retries_until_success_within_the_bound(ctx):
    attempts = []

    async def attempt(ctx, state):
        attempts.append(state["iteration"])
        state["ok"] = len(attempts) == 3

    state = run(Iterate(first=attempt, retry=attempt, until=lambda s: s["ok"], max_iterations=5).run(ctx, {}))
    assert attempts == [0, 1, 2] and state["ok"]
    attempts.clear()
    state = run(Iterate(attempt, attempt, until=lambda s: False, max_iterations=2).run(ctx, {}))
    assert attempts == [0, 1, 2] and state["iteration"] == 2  # first try + 2 retries, then it stops


def test_search_policy_chooses_steps_within_the_budget(ctx):
    async def grow(ctx, state):
        state["n"] = state.get("n", 0) + 1

    def policy(state):
        return "grow" if state.get("n", 0) < 10 else None

    assert run(Search({"grow": grow}, policy, budget=4).run(ctx, {}))["choices"] == ["grow"] * 4
    assert run(Search({"grow": grow}, policy, budget=40).run(ctx, {}))["n"] == 10
    with pytest.raises(ValueError, match=r"chose 'jump'; the steps are \['grow'\]"):
        run(Search({"grow": grow}, lambda s: "jump", budget=1).run(ctx, {}))


def test_dag_binds_edges_and_runs_ready_nodes_concurrently(ctx):
    log = []

    async def go():
        b_started = asyncio.Event()
        nodes = {
            # a waits until b has started: only possible when both ready nodes run at once
            "a": Emit("a", outputs=("table",), value="T", log=log, wait_for=b_started),
            "b": Emit("b", outputs=("rules",), value="R", log=log, started=b_started),
            "c": Emit("c", inputs=("data", "rules", "extra"), outputs=("report",), value="done", log=log),
        }
        edges = [Edge("a", "table", "c", "data"), Edge("b", "rules", "c")]
        return await DAG(nodes, edges).run(ctx, {"extra": 1})

    state = run(go())
    assert [name for name, _ in log] == ["b", "a", "c"]
    assert log[-1] == ("c", {"data": "T", "rules": "R", "extra": 1})
    assert state["nodes"]["c"] == {"report": "done"} and state["report"] == "done"


def test_dag_construction_and_missing_inputs_are_errors(ctx):
    a, b = Emit("a", inputs=("y",), outputs=("x",)), Emit("b", inputs=("x",), outputs=("y",))
    with pytest.raises(ValueError, match=r"cycle among \['a', 'b'\]"):
        DAG({"a": a, "b": b}, [Edge("a", "x", "b"), Edge("b", "y", "a")])
    with pytest.raises(ValueError, match=r"declares the outputs \['x'\]"):
        DAG({"a": a, "b": b}, [Edge("a", "nope", "b", "x")])
    with pytest.raises(ValueError, match="no node 'z'"):
        DAG({"a": a}, [Edge("a", "x", "z")])
    with pytest.raises(ValueError, match=r"never got all their inputs \(unbound: \{'b': \['x'\]\}\)"):
        run(DAG({"b": b}, []).run(ctx, {}))


class CountingBackend:
    """A chat backend that sleeps and records how many calls run at once (counted in the calling threads)."""

    def __init__(self):
        self.lock, self.now, self.max = threading.Lock(), 0, 0

    def chat(self, messages, tools=None):
        with self.lock:
            self.now += 1
            self.max = max(self.max, self.now)
        time.sleep(0.005)
        with self.lock:
            self.now -= 1
        return ChatReply("ok", 1, 1)


class CountingKernel(FakeKernel):
    def __init__(self, workspace, counter):
        super().__init__(workspace)
        self.counter = counter

    def execute(self, code, timeout=None):
        return self.counter.chat([]) and super().execute(code)


def test_scheduler_limits_hold_under_50_concurrent_tasks(small_tasks, tmp_path):
    limits = SchedulerConfig(max_tasks=12, max_llm_calls=4, max_sandbox_processes=3)
    llm, sandbox = CountingBackend(), CountingBackend()

    async def main():
        scheduler = Scheduler(limits)

        def task(i):
            async def solve():
                ctx = make_ctx(small_tasks["closed_form"], tmp_path, llm)
                ctx.scheduler, ctx.env.kernel = scheduler, CountingKernel(tmp_path, sandbox)
                for _ in range(3):
                    await asyncio.gather(ctx.ask("q"), ctx.ask("q"), ctx.execute("x = 1"), ctx.execute("y = 2"))
                return ctx.cost

            return solve

        try:
            costs = await scheduler.run_tasks(task(i) for i in range(50))
        finally:
            scheduler.close()
        return scheduler, costs

    scheduler, costs = run(main())
    assert scheduler.peak == {"task": 12, "llm": 4, "sandbox": 3}  # counted with asyncio primitives, in the loop
    assert (llm.max, sandbox.max) == (4, 3)  # what actually ran at once, counted in the worker threads
    assert scheduler.active == {"task": 0, "llm": 0, "sandbox": 0}
    assert [(c.llm_calls, c.executions) for c in costs] == [(6, 6)] * 50


def test_bridge_pauses_after_each_execution_and_aclose_ends_a_paused_workflow(small_tasks, tmp_path):
    from harness.workflow import Environment, FakeChatBackend, Workflow, WorkflowWorker

    class Three(Workflow):
        async def solve(self, ctx):
            for i in range(3):
                await ctx.execute(f"x = {i}")

    async def main():
        loop = asyncio.get_running_loop()
        kernel = FakeKernel(tmp_path)
        with Scheduler() as scheduler:
            backend = FakeChatBackend(default="x")
            worker = WorkflowWorker(Three(), small_tasks["closed_form"], Environment(kernel), backend, scheduler, loop)
            worker.begin("main", "the question")
            first = await loop.run_in_executor(None, worker.step)
            await asyncio.sleep(0.05)
            paused = list(kernel.codes)  # nothing runs while the runtime holds the step
            await worker.aclose()
        return worker, kernel, first, paused

    worker, kernel, first, paused = run(main())
    assert (first.step_id, first.code, first.meta["workflow"]) == (0, "x = 0", "custom")
    assert paused == kernel.codes == ["x = 0"]
    assert worker.artifacts["main"]["stopped"].startswith("EpisodeEnded")
