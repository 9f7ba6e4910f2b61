"""Threads do not outlive their cell: the kernel stops every other Python thread before it answers the host.

So between two requests the kernel runs nothing: no thread changes the namespace or the workspace after its cell
has been reported, writes into a later cell's output, or runs while the host forks a checkpoint.

Threads are found by their thread states (``sys._current_exceptions`` lists every thread state of the interpreter
on Python 3.11+, including ``_thread.start_new_thread`` threads and threads running C code without a Python frame;
3.10 lists the threads with a Python frame). Native threads that never hold a thread state (BLAS/OpenMP pools of
numpy, ...) are not Python threads and are left alone: they cannot touch Python objects. The runtime itself starts no
thread.

A thread ``_thread.start_new_thread`` has just created has no thread state for a moment: when the process has OS
threads it did not have at the last check, the check waits (up to :data:`SETTLE_S`) for them to show up as Python
threads; those that do not are native and join the baseline.

A found thread is first given a short moment to end by itself (pools shutting down); an idle ``concurrent.futures``
worker is asked to exit (its executor is shut down); then ``SystemExit`` is raised in every thread left
(``PyThreadState_SetAsyncExc``, repeated until it is gone or the budget is spent). A pending exception is only raised
when the thread runs Python bytecode, so a thread blocked in a ``threading.Condition`` wait (``Event.wait``,
``queue.Queue.get``, ...) is woken by releasing its waiter lock. A thread that is still there after the budget
(``time.sleep`` for longer, a blocking read, a loop inside C code) cannot be stopped from inside the process.

tqdm starts a monitor thread with its first progress bar; once one has been stopped, tqdm's ``monitor_interval`` is
set to 0, so later bars do not start it again (it only tunes ``miniters``).
"""

from __future__ import annotations

import ctypes
import os
import sys
import threading
import time
import types

_SET_ASYNC_EXC = ctypes.pythonapi.PyThreadState_SetAsyncExc
_SET_ASYNC_EXC.argtypes = (ctypes.c_ulong, ctypes.py_object)
_SET_ASYNC_EXC.restype = ctypes.c_int
_FUTURES_WORKER = os.path.join("concurrent", "futures", "thread.py")
SETTLE_S = 0.05  # how long threads may take to end by themselves, or new OS threads to show up as Python threads
_known: tuple[int, frozenset[str]] = (0, frozenset())  # (pid, its OS threads at the last check)


# Python 3.11+ lists every thread state; 3.10 has only the threads with a Python frame.
_THREAD_STATES = getattr(sys, "_current_exceptions", sys._current_frames)


def other_threads() -> set[int]:
    """Idents of every Python thread state but the calling thread's."""
    return set(_THREAD_STATES()) - {threading.get_ident()}


def _os_threads() -> frozenset[str]:
    try:
        return frozenset(os.listdir("/proc/self/task"))
    except OSError:
        return frozenset()


def _settled_other_threads(budget_s: float) -> set[int]:
    """:func:`other_threads`, once the OS threads created since the last check had time to get a thread state."""
    global _known
    pid = os.getpid()
    base = _known[1] if _known[0] == pid else frozenset({str(pid)})
    deadline = time.monotonic() + min(SETTLE_S, budget_s)
    while True:
        found = other_threads()
        tids = _os_threads()
        if found or not tids - base or time.monotonic() >= deadline:
            break
        time.sleep(0.001)
    if not found:
        _known = (pid, tids)  # the new ones (if any) are native threads
    return found


def describe(ident: int, frames: dict[int, types.FrameType]) -> str:
    """``'name' at <cell-3>:4 in loop``: the thread's name and where it runs (its innermost cell frame if any)."""
    thread = threading._active.get(ident)  # type: ignore[attr-defined]
    name = repr(thread.name) if thread is not None else f"thread {ident}"
    frame = frames.get(ident)
    if frame is None:
        return f"{name} (no Python frame: running C code)"
    where = frame
    while where is not None and not where.f_code.co_filename.startswith("<cell-"):
        where = where.f_back
    where = where or frame
    return f"{name} at {where.f_code.co_filename}:{where.f_lineno} in {where.f_code.co_name}"


def _ask_to_end(frame: types.FrameType | None) -> bool:
    """Ask an idle ``concurrent.futures`` worker to exit as at a shutdown; False for any other thread."""
    if frame is None or frame.f_code.co_name != "_worker" or not frame.f_code.co_filename.endswith(_FUTURES_WORKER):
        return False
    try:
        executor = frame.f_locals["executor_reference"]()
        if executor is not None:
            executor.shutdown(wait=False, cancel_futures=True)
        else:
            frame.f_locals["work_queue"].put(None)
    except Exception:  # noqa: BLE001 - best effort: it gets SystemExit like any other thread
        return False
    return True


def _wake(frame: types.FrameType | None) -> None:
    """Wake a thread blocked in a ``threading.Condition`` wait, so its pending exception is raised."""
    if frame is None or frame.f_code.co_name != "wait" or frame.f_code.co_filename != threading.__file__:
        return
    try:
        waiter = frame.f_locals.get("waiter")
        if waiter is not None and waiter.locked():
            waiter.release()
    except Exception:  # noqa: BLE001 - best effort: the thread then counts as stuck
        pass


def stop_other_threads(budget_s: float) -> tuple[list[str], list[str]]:
    """Stop every other Python thread; returns (descriptions of the threads found, of those still running)."""
    global _known
    pending = _settled_other_threads(budget_s)
    if not pending:
        return [], []
    tqdm = sys.modules.get("tqdm.std")
    if tqdm is not None:
        tqdm.tqdm.monitor_interval = 0
    seen: dict[int, str] = {}
    start = time.monotonic()
    settle = min(SETTLE_S, budget_s / 4)
    while pending:
        frames = sys._current_frames()
        for ident in pending - seen.keys():
            seen[ident] = describe(ident, frames)
        elapsed = time.monotonic() - start
        if elapsed >= budget_s:
            break
        if elapsed >= settle:
            for ident in pending:
                frame = frames.get(ident)
                if _ask_to_end(frame) and elapsed < budget_s / 2:
                    continue  # it exits by itself
                _SET_ASYNC_EXC(ident, SystemExit)
                _wake(frame)
        del frames
        time.sleep(0.005)
        pending = other_threads()
    _known = (os.getpid(), _os_threads())
    return list(seen.values()), [seen[i] for i in pending if i in seen]
