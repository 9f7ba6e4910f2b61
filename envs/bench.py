"""The ManagerEnv throughput benchmark (run by ``scripts/bench_envs.py``).

The replay worker inside :class:`~envs.manager.ManagerEnv`, the synthesis gold policy (:class:`synthesis.gold.
GoldPolicy`) as the agent, driven through ``info["policy_input"]``, so probes and checks run at the gold policy's
natural rate. Timed: every ``env.reset`` and ``env.step`` call (the gold policy's own time, the stand-in for model
time, is excluded). Sandbox time: wall time inside the kernel and sandbox calls (``Kernel.execute``, ``probe``,
``checkpoint``, ``restore``, ``release``, ``variables``, ``close`` and ``Sandbox.new_kernel``), measured by wrapping
those methods for the duration of the run.

Figures: ``steps_per_s`` (manager steps over the env time, resets included), ``step_ms_p50`` / ``step_ms_p95`` (per
``step`` call), ``sandbox_share`` (sandbox time over env time), plus ``reset_ms_p50`` and the episode count.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from functools import wraps
from typing import Any

import numpy as np

from envs.manager import ManagerEnv
from envs.pool import ReplayPool
from harness.sandbox import Kernel, Sandbox

TIMED_KERNEL_METHODS = ("execute", "probe", "checkpoint", "restore", "release", "variables", "close")


@contextmanager
def sandbox_timer() -> Iterator[list[float]]:
    """Wrap the kernel and sandbox methods; yields a one-item list holding the seconds spent inside them."""
    spent = [0.0]
    originals: list[tuple[type, str, Any]] = []

    def timed(fn: Any) -> Any:
        @wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            t0 = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                spent[0] += time.perf_counter() - t0

        return wrapper

    targets = [(Kernel, name) for name in TIMED_KERNEL_METHODS] + [(Sandbox, "new_kernel")]
    for owner, name in targets:
        original = owner.__dict__[name]
        originals.append((owner, name, original))
        setattr(owner, name, timed(original))
    try:
        yield spent
    finally:
        for owner, name, original in originals:
            setattr(owner, name, original)


def run_benchmark(pool: ReplayPool, episodes: int, isolation: str | None = None) -> dict[str, Any]:
    """Play ``episodes`` episodes (cycling through the pool's ids) with the gold policy; the figures."""
    env = ManagerEnv(pool=pool, isolation=isolation)
    env.reset(options={"episode_id": pool.ids[0]})  # start the sandbox outside the timed run
    step_s: list[float] = []
    reset_s: list[float] = []
    with sandbox_timer() as sandbox_s:
        for n in range(episodes):
            entry = pool.entry(pool.ids[n % len(pool)])
            policy = entry.gold_policy()
            t0 = time.perf_counter()
            _, info = env.reset(options={"episode_id": entry.id})
            reset_s.append(time.perf_counter() - t0)
            done = False
            while not done:
                action = policy.respond(info["policy_input"])
                t0 = time.perf_counter()
                _, _, terminated, truncated, info = env.step(action)
                step_s.append(time.perf_counter() - t0)
                done = terminated or truncated
    env.close()
    env_s = sum(step_s) + sum(reset_s)
    return {
        "episodes": episodes,
        "steps": len(step_s),
        "steps_per_s": round(len(step_s) / env_s, 1),
        "step_ms_p50": round(1000 * float(np.percentile(step_s, 50)), 3),
        "step_ms_p95": round(1000 * float(np.percentile(step_s, 95)), 3),
        "reset_ms_p50": round(1000 * float(np.percentile(reset_s, 50)), 3),
        "sandbox_share": round(sandbox_s[0] / env_s, 3),
    }
