"""The scheduler: admits tasks and runs their blocking work under global concurrency limits.

Everything a workflow does that blocks — an LLM call, a sandbox execution, a kernel start, a whole episode of the
(synchronous) manager runtime — goes through one :class:`Scheduler`, on one asyncio event loop:

- :meth:`Scheduler.run_tasks` admits at most ``max_tasks`` tasks at once (the rest wait, in order) and gathers
  their results;
- :meth:`Scheduler.llm` and :meth:`Scheduler.sandbox` run a blocking call in a worker thread while holding a slot of
  that kind, so at most ``max_llm_calls`` LLM calls and ``max_sandbox_processes`` sandbox executions are in flight
  over all tasks. Ready DAG nodes of one workflow are dispatched in parallel and meet the same limits;
- :meth:`Scheduler.offload` runs long blocking work (an episode of the manager runtime, a ReAct loop) in a thread of
  its own pool, which holds no slot (its LLM calls and executions take slots themselves).

``peak`` records the highest number of slots of each kind held at once (counted in the event loop, so exact).
The manager's own work in an episode (its tool probes, a model-backed policy's calls) runs in the episode's thread
and is not counted against these limits.
Kernel starts are serialized by ``kernel_lock`` (the sandbox's zygote channel is not thread-safe).
"""

from __future__ import annotations

import asyncio
import functools
import threading
from collections.abc import Awaitable, Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager
from typing import Any, TypeVar

from harness.workflow.config import SchedulerConfig

T = TypeVar("T")

SLOT_KINDS = ("task", "llm", "sandbox")


class Scheduler:
    """Global limits for many concurrent tasks (see the module docstring). Use it from one event loop."""

    def __init__(self, config: SchedulerConfig | None = None):
        self.config = config or SchedulerConfig()
        limits = {
            "task": self.config.max_tasks,
            "llm": self.config.max_llm_calls,
            "sandbox": self.config.max_sandbox_processes,
        }
        self.limits = limits
        self._semaphores = {kind: asyncio.Semaphore(n) for kind, n in limits.items()}
        self._pools = {
            "llm": ThreadPoolExecutor(limits["llm"], thread_name_prefix="workflow-llm"),
            "sandbox": ThreadPoolExecutor(limits["sandbox"], thread_name_prefix="workflow-sandbox"),
            # two blocking threads per admitted task at most: its episode and its ReAct loop
            "offload": ThreadPoolExecutor(2 * limits["task"], thread_name_prefix="workflow-offload"),
        }
        self.active = dict.fromkeys(SLOT_KINDS, 0)
        self.peak = dict.fromkeys(SLOT_KINDS, 0)
        self.kernel_lock = threading.Lock()

    @asynccontextmanager
    async def slot(self, kind: str):
        """Hold one slot of ``kind`` (task | llm | sandbox) for the body of the ``async with``."""
        async with self._semaphores[kind]:
            self.active[kind] += 1
            self.peak[kind] = max(self.peak[kind], self.active[kind])
            try:
                yield
            finally:
                self.active[kind] -= 1

    async def _in_thread(self, pool: str, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._pools[pool], functools.partial(fn, *args, **kwargs))

    async def llm(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """``fn(*args, **kwargs)`` (a blocking LLM call) in a thread, holding an ``llm`` slot."""
        async with self.slot("llm"):
            return await self._in_thread("llm", fn, *args, **kwargs)

    async def sandbox(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """``fn(*args, **kwargs)`` (a blocking sandbox call) in a thread, holding a ``sandbox`` slot."""
        async with self.slot("sandbox"):
            return await self._in_thread("sandbox", fn, *args, **kwargs)

    async def offload(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """``fn(*args, **kwargs)`` (long blocking work that takes its own slots) in a thread of its own pool."""
        return await self._in_thread("offload", fn, *args, **kwargs)

    async def run_tasks(self, tasks: Iterable[Callable[[], Awaitable[T]]]) -> list[T]:
        """Run every task factory, at most ``max_tasks`` at once, admitted in order; their results in that order.
        The first exception propagates (``asyncio.gather``): catch per-task errors inside the factory to go on."""

        async def admitted(factory: Callable[[], Awaitable[T]]) -> T:
            async with self.slot("task"):
                return await factory()

        return list(await asyncio.gather(*(admitted(factory) for factory in tasks)))

    def close(self) -> None:
        for pool in self._pools.values():
            pool.shutdown(wait=True)

    def __enter__(self) -> Scheduler:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
