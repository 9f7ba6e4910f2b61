"""Soak: many ManagerEnv episodes in one env keep the process count and memory flat (kernels are recycled).

The default run is short (``test_soak_short``). ``test_soak`` is marked ``slow``; its episode count comes from
``STATEGUARD_SOAK_EPISODES`` (default 300), e.g. ``STATEGUARD_SOAK_EPISODES=10000 pytest -m slow
tests/envs/test_soak.py``. Counted: this process and every process it started (the sandbox's bwrap, zygote, episode
inits, kernels and checkpoints), measured between episodes; memory is the summed RSS of all of them.
"""

from __future__ import annotations

import os
import time

import psutil
import pytest

from envs import ManagerEnv
from harness.manager.actions import make_action
from harness.manager.wire import render_action
from tests.envs.conftest import ISOLATION

ABSTAIN = render_action(make_action("ABSTAIN", {}))
WARMUP = 5
RSS_SLACK_MB = 40  # allocator and import-cache noise; a leaked kernel alone costs more (a forked pandas process)


def footprint() -> tuple[int, float]:
    """(processes, summed RSS in MB) of this process and its descendants."""
    me = psutil.Process()
    processes = [me, *me.children(recursive=True)]
    rss = 0
    for p in processes:
        try:
            rss += p.memory_info().rss
        except psutil.NoSuchProcess:
            continue
    return len(processes), rss / 2**20


def settled(baseline: int | None) -> tuple[int, float]:
    """The footprint once a closed kernel's processes have been reaped (killing them is asynchronous): polled until
    the count is back to ``baseline`` or 2 s have passed (the first sample waits 0.5 s)."""
    if baseline is None:
        time.sleep(0.5)
    deadline = time.monotonic() + 2.0
    while True:
        processes, rss = footprint()
        if baseline is None or processes <= baseline or time.monotonic() > deadline:
            return processes, rss
        time.sleep(0.02)


def soak(pool, episodes: int) -> None:
    env = ManagerEnv(pool=pool, isolation=ISOLATION)
    ids = pool.ids
    samples = []
    for n in range(WARMUP + episodes):
        _, info = env.reset(options={"episode_id": ids[n % len(ids)]})
        # alternate a full episode and one cut short by the next reset (the thread must be stopped, the kernel closed)
        while n % 2 == 0:
            _, _, terminated, truncated, info = env.step(ABSTAIN)
            if terminated or truncated:
                break
        if n >= WARMUP - 1:  # the kernel is live here (recycled by the next reset on the same task, else replaced)
            samples.append(settled(samples[0][0] if samples else None))
    env.close()
    processes = [p for p, _ in samples]
    rss = [m for _, m in samples]
    holder = env.sandboxes
    assert holder.kernels_started + holder.kernels_recycled == WARMUP + episodes
    assert holder.kernels_recycled > 0
    # Flat up to one process: whether the live episode's last checkpoint is already forked or still deferred (the
    # sandbox forks it only before the namespace changes) depends on where the episode stopped. A leak grows.
    # On a loaded machine a killed kernel can take longer than settled() waits to exit: allow rare transients (1 %,
    # and at least one: a CI run of the short soak once saw [7, 6, 7, 6, 8, 6, 7, ...]); a leak would keep every
    # later sample above the band, the last one included.
    above = [p for p in processes if p > min(processes) + 1]
    assert len(above) <= max(1, len(processes) // 100) and processes[-1] <= min(processes) + 1, (
        f"process count drifted: {processes}"
    )
    assert rss[-1] - rss[0] < RSS_SLACK_MB, f"RSS grew from {rss[0]:.0f} MB to {rss[-1]:.0f} MB"


def test_soak_short(pool):
    soak(pool, 30)


@pytest.mark.slow
def test_soak(pool):
    soak(pool, int(os.environ.get("STATEGUARD_SOAK_EPISODES", "300")))
