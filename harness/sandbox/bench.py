"""Sandbox micro-benchmark (used by ``scripts/bench_sandbox.py``): round trips, kernel start, checkpoint, restore,
a check's clean verdict on a 1M-row frame beside the old in-fork probe (:func:`_verdicts`), typed check specs
compiled to clean verdicts on the same frame (:func:`_spec_checks`),
and a jupyter_client/ipykernel round trip measured in the same run as the reference.

``Kernel.checkpoint`` defers its fork to the next operation that runs in the kernel, so timing the call alone
measures nothing. A checkpoint is measured as checkpoint + the next cell against a plain cell, interleaved in the same
run (``checkpoint_plus_cell_ms_p50``, ``plain_cell_ms_p50``, their ratio); ``checkpoint_ms_p50`` is the median of the
paired differences: what a checkpoint adds. Restore likewise (the restored kernel's first cell pays its
copy-on-write faults, and the replaced kernel exits while it runs)."""

from __future__ import annotations

import logging
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..checks import compile_check, parse_spec
from ..import_utils import is_available
from .config import SandboxConfig
from .sandbox import Sandbox

logger = logging.getLogger(__name__)
BIG_FRAME = (
    "import numpy as np, pandas as pd\n"
    "df = pd.DataFrame({'a': np.arange(1_000_000), 'b': np.random.default_rng(0).random(1_000_000),"
    " 'c': np.arange(1_000_000) % 7})"
)


def _p50_ms(fn: Callable[[], Any], n: int) -> float:
    times = []
    for _ in range(n):
        start = time.perf_counter()
        fn()
        times.append((time.perf_counter() - start) * 1000)
    return statistics.median(times)


def _paired_ms(
    plain: Callable[[], Any], measured: Callable[[], Any], n: int, after: Callable[[], Any] | None = None
) -> tuple[float, float, float]:
    """Time ``plain`` and ``measured`` alternately ``n`` times, each ``plain`` after an untimed one (so it does not pay
    for what the previous ``measured`` left behind); ``after``: untimed, after each ``measured``.
    Returns (p50 of plain, p50 of measured, p50 of the paired differences), in ms."""
    pairs = []
    for _ in range(n):
        plain()
        times = []
        for fn in (plain, measured):
            start = time.perf_counter()
            fn()
            times.append((time.perf_counter() - start) * 1000)
        if after is not None:
            after()
        pairs.append(times)
    return (
        statistics.median(p[0] for p in pairs),
        statistics.median(p[1] for p in pairs),
        statistics.median(p[1] - p[0] for p in pairs),
    )


def _checkpoint_and_restore(kernel: Any, n: int) -> dict[str, float]:
    """The cost of a checkpoint and of a restore, each with the cell that follows, against a plain cell."""
    cell = "y = 1"
    ids: list[str] = []

    def checkpoint_then_cell() -> None:
        ids.append(kernel.checkpoint())
        kernel.execute(cell)

    plain, both, extra = _paired_ms(
        lambda: kernel.execute(cell), checkpoint_then_cell, n, after=lambda: kernel.release(ids.pop())
    )
    metrics = {
        "plain_cell_ms_p50": plain,
        "checkpoint_plus_cell_ms_p50": both,
        "checkpoint_ms_p50": extra,
        "checkpoint_plus_cell_vs_plain_cell": both / plain,
    }
    snapshot = kernel.checkpoint()
    kernel.execute(cell)  # the snapshot is forked here: the restores below are real ones

    def restore_then_cell() -> None:
        kernel.restore(snapshot)
        kernel.execute(cell)

    plain, both, extra = _paired_ms(lambda: kernel.execute(cell), restore_then_cell, n)
    kernel.release(snapshot)
    metrics.update(restore_plus_cell_ms_p50=both, restore_ms_p50=extra, restore_plus_cell_vs_plain_cell=both / plain)
    return metrics


def _verdicts(kernel: Any, n: int) -> dict[str, float]:
    """A check on the 1M-row frame: its clean verdict (export from the kernel + the verifier), cold (the first probe
    after a cell: the frame is exported) and cached (a later probe before the next cell), beside the old design's
    probe in a fork of the worker's kernel (``Kernel._probe_in_fork``, kept only as this reference), interleaved.
    The check reads one column, so only that column is exported (column projection, ``probes.projections``);
    ``verdict_cold_full_ms_p50`` is the cold verdict of a check that reads the whole frame (all of it exported)."""
    check = "assert len(df) == 1_000_000 and df['c'].max() == 6"
    full = "assert df.shape == (1_000_000, 3) and df.sum().notna().all()"
    cold, cached, forked, cold_full = [], [], [], []
    for _ in range(n):
        for steps in (
            ((cold, kernel.probe, check), (cached, kernel.probe, check), (forked, kernel._probe_in_fork, check)),
            ((cold_full, kernel.probe, full),),
        ):
            kernel.execute("y = 1")  # the kernel ran something: the next probe exports again
            for times, fn, code in steps:
                start = time.perf_counter()
                result = fn(code)
                times.append((time.perf_counter() - start) * 1000)
                if not result.ok:
                    raise RuntimeError(f"benchmark check failed: {result.error_type}: {result.error_message}")
    out = {
        "verdict_cold_ms_p50": statistics.median(cold),
        "verdict_cached_ms_p50": statistics.median(cached),
        "probe_in_fork_ms_p50": statistics.median(forked),
        "verdict_cold_full_ms_p50": statistics.median(cold_full),
    }
    out["verdict_cold_vs_fork"] = out["verdict_cold_ms_p50"] / out["probe_in_fork_ms_p50"]
    out["verdict_cached_vs_fork"] = out["verdict_cached_ms_p50"] / out["probe_in_fork_ms_p50"]
    return out


SPEC_SETUP = "total_b = float(df['b'].sum())\nsub = df[df['c'] == 3]"
SPECS = {
    "aggregate": {"kind": "aggregate", "variable": "total_b", "source": "df", "column": "b", "agg": "sum"},
    "filter": {"kind": "filter", "variable": "sub", "source": "df", "column": "c", "op": "==", "value": 3},
}
"""The spec checks timed on the 1M-row frame: a total (one column exported) and a filter (one column of the frame and
of the ~143k-row result exported)."""


def _spec_checks(kernel: Any, n: int) -> dict[str, float]:
    """Typed check specs (``harness.checks``) compiled and run as clean verdicts on the 1M-row frame, cold (the first
    probe after a cell: the columns they read are exported), interleaved: ``spec_<kind>_cold_ms_p50``."""
    if not (ran := kernel.execute(SPEC_SETUP)).ok:
        raise RuntimeError(f"benchmark setup cell failed: {ran.error_message}")
    codes = {name: compile_check(parse_spec(spec)) for name, spec in SPECS.items()}
    times: dict[str, list[float]] = {name: [] for name in codes}
    for _ in range(n):
        for name, code in codes.items():
            kernel.execute("y = 1")  # the kernel ran something: the next probe exports again
            start = time.perf_counter()
            result = kernel.probe(code)
            times[name].append((time.perf_counter() - start) * 1000)
            if not result.ok:
                raise RuntimeError(f"benchmark spec check failed: {result.error_type}: {result.error_message}")
    kernel.execute("del total_b, sub")
    return {f"spec_{name}_cold_ms_p50": statistics.median(values) for name, values in times.items()}


def ipykernel_cell_ms(n: int) -> float | None:
    """p50 of ``execute('x = 1')`` + wait for idle on a jupyter ipykernel; None when jupyter_client is missing."""
    if not is_available("jupyter_client"):
        logger.warning("jupyter_client is not installed (extra 'dev'); skipping the ipykernel reference")
        return None
    from jupyter_client import KernelManager

    km = KernelManager(kernel_name="python3")
    km.start_kernel()
    client = km.client()
    client.start_channels()
    try:
        client.wait_for_ready(timeout=60)
        client.execute_interactive("x = 0", timeout=30)
        return _p50_ms(lambda: client.execute_interactive("x = 1", timeout=30), n)
    finally:
        client.stop_channels()
        km.shutdown_kernel(now=True)


def run_benchmark(n: int = 50, isolation: str | None = None, with_ipykernel: bool = True) -> dict[str, Any]:
    """Measure the sandbox; returns the metrics (milliseconds) as a flat dict."""
    if isolation is None:
        isolation = "bwrap" if shutil.which("bwrap") else "none"
    public = Path(tempfile.mkdtemp(prefix="bench-public-"))
    (public / "data").mkdir()
    (public / "data" / "x.csv").write_text("a,b\n1,2\n3,4\n")
    metrics: dict[str, Any] = {"isolation": isolation, "n": n}
    try:
        start = time.perf_counter()
        with Sandbox(SandboxConfig(isolation=isolation)) as sandbox:
            metrics["zygote_start_ms"] = (time.perf_counter() - start) * 1000
            kernels = []

            def start_kernel() -> None:
                kernels.append(sandbox.new_kernel(public))

            metrics["kernel_start_ms_p50"] = _p50_ms(start_kernel, max(3, n // 5))
            for extra in kernels[1:]:
                extra.close()
            kernel = kernels[0]
            kernel.execute("x = 0")
            metrics["cell_ms_p50"] = _p50_ms(lambda: kernel.execute("x = 1"), n)
            loaded = kernel.execute(BIG_FRAME)
            if not loaded.ok:
                raise RuntimeError(f"benchmark setup cell failed: {loaded.error_message}")
            metrics["cell_with_1m_rows_ms_p50"] = _p50_ms(lambda: kernel.execute("y = 1"), n)
            metrics["cell_touching_1m_rows_ms_p50"] = _p50_ms(lambda: kernel.execute("s = len(df)"), max(3, n // 5))
            # df handed to a function that might mutate it: its content is hashed before and after the cell
            metrics["cell_hashing_1m_rows_ms_p50"] = _p50_ms(
                lambda: kernel.execute("t = np.asarray(df['b']).sum()"), max(3, n // 5)
            )
            metrics.update(_checkpoint_and_restore(kernel, max(3, min(n, 10))))
            metrics.update(_verdicts(kernel, max(3, min(n, 20))))
            metrics.update(_spec_checks(kernel, max(3, min(n, 20))))
            metrics["probe_ms_p50"] = metrics["verdict_cached_ms_p50"]
            kernel.close()
    finally:
        shutil.rmtree(public, ignore_errors=True)
    ipy = ipykernel_cell_ms(n) if with_ipykernel else None
    metrics["ipykernel_cell_ms_p50"] = ipy
    metrics["speedup_vs_ipykernel"] = (ipy / metrics["cell_ms_p50"]) if ipy else None
    return {k: round(v, 3) if isinstance(v, float) else v for k, v in metrics.items()}


def format_table(metrics: dict[str, Any]) -> str:
    width = max(len(k) for k in metrics)
    return "\n".join(f"{k:<{width}}  {v}" for k, v in metrics.items())
