"""Executors: the same work units run in this process, in a local process pool, or as Ray tasks.

A :class:`Work` is a module-level unit function plus the per-process ``setup`` it needs (a sandbox, a tokenizer,
the config) and its ``teardown``. :func:`open_executor` gives an :class:`Executor` whose :meth:`~Executor.imap` runs
the unit on every item and yields the results **in submission order** (like ``multiprocessing.Pool.imap``), so the
caller — the parent process — writes the outputs in the same order whatever ran them. The unit's code is the same for
every executor; only the transport differs:

- ``local`` with one worker: ``setup``, the units one after another, ``teardown``, all in this process;
- ``local`` with N workers: a ``fork`` pool of N processes, each running ``setup`` once (a setup that raises is kept
  and raised by the process's first unit, so the parent sees it instead of a pool that restarts the worker forever);
- ``local`` with N threads (:class:`ThreadExecutor`, for units that mostly wait on an HTTP endpoint): N threads of
  this process, each running ``setup`` once before its first unit and ``teardown`` after its last; the setup keeps
  its state per thread (a ``threading.local``), so units on different threads share nothing they did not share
  before. A setup that raises is raised by each of that thread's units;
- ``ray``: one Ray task per item (``num_cpus`` 1 each, ``max_retries``: a unit whose worker process dies — killed,
  out of memory, its node lost — is run again, on any node; an exception raised by the unit itself is not retried and
  is re-raised in the parent as its own type). A Ray worker process runs ``setup`` before its first unit of a run and
  keeps the result for later units of the same run; ``teardown`` runs when the process moves to another run or exits.
  ``address`` null starts a local Ray for the run (``ray_num_cpus`` CPUs) and stops it afterwards; an address
  connects to a running cluster (``ray start --head`` on the head node, ``ray start --address HEAD:6379`` on the
  others) and disconnects afterwards; a driver already connected (``ray.init`` called before) is used as it is.

Every node of a Ray cluster must have this package installed in the same environment, and the inputs a unit reads
(task folders, tables, the evaluation suite) at the same paths; outputs travel back to the parent as return values.

:func:`check_executor` is the check before any work starts: ``executor: ray`` without Ray installed raises
:class:`RayUnavailableError` (one line naming the install command), and an ``address`` where nothing answers within
``ray_connect_timeout_s``, or where the server does not answer the HTTP/2 preface that every gRPC server (Ray's GCS,
the Ray Client server) answers, raises :class:`ExecutorError` naming the address and the fix (``ray.init`` would retry
such a server for many minutes). The probe is skipped with ``RAY_USE_TLS`` set (the HTTP/2 then runs inside TLS); a
gRPC server that is not Ray passes it.
"""

from __future__ import annotations

import atexit
import contextlib
import itertools
import logging
import multiprocessing
import os
import socket
import threading
import uuid
from abc import ABC, abstractmethod
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any, Literal

from harness.import_utils import is_available

logger = logging.getLogger(__name__)

EXECUTORS = ("local", "ray")
INSTALL_RAY = "pip install -c constraints.txt -e '.[ray]'"
DEFAULT_RAY_PORT = 6379

EXECUTION_FIELDS = ("executor", "address", "ray_num_cpus", "ray_max_retries", "ray_connect_timeout_s")
"""The config fields that choose where units run and never change what they compute (kept out of fingerprints and
of the configs written beside results, so that ``local`` and ``ray`` outputs are byte-identical)."""

EXECUTOR_HELP = {
    "executor": "Where the work units run: local (this machine: in process, a process pool or threads) | ray (Ray "
    "tasks on a local Ray started for the run, or on the cluster at `address`); outputs are identical.",
    "address": "executor ray: the cluster to run on (HOST:PORT of a head started with `ray start --head`, "
    "ray://HOST:10001 for Ray Client, or auto); null: start a local Ray for the run.",
    "ray_num_cpus": "executor ray, address null: CPUs of the local Ray started for the run (null: {default}).",
    "ray_max_retries": "executor ray: times a unit whose worker process died is run again before the run fails.",
    "ray_connect_timeout_s": "executor ray: seconds to wait for `address` to answer before failing.",
}


def executor_field() -> Any:
    return field(default="local", metadata={"help": EXECUTOR_HELP["executor"]})


def address_field() -> Any:
    return field(default=None, metadata={"help": EXECUTOR_HELP["address"]})


def ray_num_cpus_field(default_help: str) -> Any:
    return field(default=None, metadata={"help": EXECUTOR_HELP["ray_num_cpus"].format(default=default_help)})


def ray_max_retries_field() -> Any:
    return field(default=3, metadata={"help": EXECUTOR_HELP["ray_max_retries"]})


def ray_connect_timeout_field() -> Any:
    return field(default=5.0, metadata={"help": EXECUTOR_HELP["ray_connect_timeout_s"]})


class ExecutorError(ValueError):
    """Bad executor input (an unreachable address, a malformed one, a Ray option without Ray); the message names the
    value and the fix."""


class RayUnavailableError(ExecutorError, ImportError):
    """``executor: ray`` on a machine without Ray; the message names the install command."""


@dataclass(frozen=True)
class ExecutorOptions:
    """Where units run: the :data:`EXECUTION_FIELDS` of a command's config (:meth:`of`)."""

    executor: Literal["local", "ray"] = "local"
    address: str | None = None
    ray_num_cpus: int | None = None
    ray_max_retries: int = 3
    ray_connect_timeout_s: float = 5.0

    def __post_init__(self) -> None:
        check_options(self)

    @classmethod
    def of(cls, config: Any) -> ExecutorOptions:
        return cls(**{name: getattr(config, name) for name in EXECUTION_FIELDS})


def check_options(config: Any) -> None:
    """The value checks of the :data:`EXECUTION_FIELDS` of ``config`` (a config's ``__post_init__`` calls this);
    raises :class:`ExecutorError` naming the field, the value and the fix."""
    if config.executor not in EXECUTORS:
        raise ExecutorError(f"executor={config.executor!r}: use one of {list(EXECUTORS)}.")
    if config.address is not None:
        if config.ray_num_cpus is not None:
            raise ExecutorError(
                f"ray_num_cpus={config.ray_num_cpus} sets the CPUs of a local Ray, but address={config.address!r} "
                "joins a running cluster whose nodes set their own (`ray start --num-cpus N`); drop one of the two."
            )
        parse_address(config.address)
    if config.ray_num_cpus is not None and config.ray_num_cpus < 1:
        raise ExecutorError(f"ray_num_cpus={config.ray_num_cpus}: use 1 or more, or null.")
    if config.ray_max_retries < 0:
        raise ExecutorError(f"ray_max_retries={config.ray_max_retries}: use 0 or more (3 is Ray's default).")
    if not config.ray_connect_timeout_s > 0:
        raise ExecutorError(f"ray_connect_timeout_s={config.ray_connect_timeout_s}: use a positive number of seconds.")


def parse_address(address: str) -> tuple[str, int] | None:
    """``(host, port)`` of a cluster address (``HOST:PORT`` or ``ray://HOST:PORT``); None for ``auto`` (Ray finds
    the cluster started on this machine). A malformed address raises :class:`ExecutorError`."""
    if address == "auto":
        return None
    rest = address.removeprefix("ray://")
    host, colon, port = rest.rpartition(":")
    if not colon or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ExecutorError(
            f"address={address!r}: give HOST:PORT of the head (port {DEFAULT_RAY_PORT} after `ray start --head`), "
            "ray://HOST:10001 for Ray Client, auto for the cluster started on this machine, or null to start a "
            "local Ray for the run."
        )
    return host.strip("[]"), int(port)


def check_executor(options: ExecutorOptions) -> None:
    """Fail before any work starts: Ray missing (:class:`RayUnavailableError`), or nothing answering at ``address``
    within ``ray_connect_timeout_s`` (:class:`ExecutorError`). ``local`` always passes."""
    if options.executor != "ray":
        return
    if not is_available("ray"):
        raise RayUnavailableError(
            f"executor ray needs Ray, which is not installed; install it with: {INSTALL_RAY} (or use executor: local)."
        )
    if options.address is None:
        return
    endpoint = parse_address(options.address)
    if endpoint is None:
        return
    try:
        sock = socket.create_connection(endpoint, timeout=options.ray_connect_timeout_s)
    except OSError as error:
        raise ExecutorError(
            f"executor ray: nothing answers at address {options.address} ({type(error).__name__}: {error}; waited "
            f"up to {options.ray_connect_timeout_s:g} s). Start the cluster there (`ray start --head "
            f"--port={endpoint[1]}` on {endpoint[0]}), fix address, or set address: null to start a local Ray for "
            "the run."
        ) from None
    with sock:
        problem = None if os.environ.get("RAY_USE_TLS", "0") not in ("0", "") else _http2_problem(sock)
    if problem is not None:
        raise ExecutorError(
            f"executor ray: the server at address {options.address} is not Ray: it {problem} (Ray's GCS and Ray "
            "Client speak gRPC over HTTP/2). Fix address (the head's GCS port, 6379 after `ray start --head`; "
            "ray://HOST:10001 for Ray Client), or set address: null to start a local Ray for the run."
        )


HTTP2_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + bytes([0, 0, 0, 4, 0, 0, 0, 0, 0])
"""The HTTP/2 client connection preface followed by an empty SETTINGS frame (9-byte frame header, type 4)."""


def _http2_problem(sock: socket.socket) -> str | None:
    """None when the server on ``sock`` answers the HTTP/2 preface with a SETTINGS frame, as every gRPC server (Ray's
    GCS, the Ray Client server) does; else what it did instead. Waits at most the socket's timeout, so that
    ``ray.init`` never waits on a server that is not Ray (it retries such a connection for many minutes)."""
    head = b""
    try:
        sock.sendall(HTTP2_PREFACE)
        while len(head) < 9:
            chunk = sock.recv(9 - len(head))
            if not chunk:
                return "closed the connection without an HTTP/2 answer"
            head += chunk
    except TimeoutError:
        return f"sent no HTTP/2 answer within {sock.gettimeout():g} s" if not head else f"sent only {head!r}"
    except OSError as error:
        return f"failed the HTTP/2 handshake ({type(error).__name__}: {error})"
    return None if head[3] == 4 else f"answered {head!r}, not an HTTP/2 SETTINGS frame"


# ---------------------------------------------------------------------------------------------------- work units
@dataclass(frozen=True)
class Work:
    """A unit function and what each process needs before running it.

    ``run(item) -> result`` and ``setup(*args)`` / ``teardown()`` are module-level functions (they are sent to other
    processes by reference); ``args`` travel once per process (pool) or once per run (Ray's object store)."""

    run: Callable[[Any], Any]
    setup: Callable[..., Any] | None = None
    args: tuple[Any, ...] = ()
    teardown: Callable[[], Any] | None = None


class SetupState:
    """What a :class:`Work`'s ``setup`` keeps for its units: :meth:`new` (called by ``setup``) makes this thread's
    dict, which is also this process's; :meth:`get` gives this thread's, else this process's (a runtime that runs a
    unit on another thread than the setup's, as Ray may, still finds it). Under :class:`ThreadExecutor` every thread
    sets up, so each has its own."""

    def __init__(self) -> None:
        self._local = threading.local()
        self._process: dict[str, Any] = {}

    def new(self) -> dict[str, Any]:
        state: dict[str, Any] = {}
        self._local.state = self._process = state
        return state

    def get(self) -> dict[str, Any]:
        return getattr(self._local, "state", None) or self._process

    def drop(self) -> dict[str, Any]:
        """This thread's (else this process's) state, forgotten here; the caller tears it down."""
        state = self.get()
        self._local.__dict__.pop("state", None)
        if self._process is state:
            self._process = {}
        return state


_PROCESS: dict[str, Any] = {}
"""This process's current setup: ``key`` (the run it belongs to), ``work``, ``error`` (a setup that raised)."""


def _enter(key: str, work: Work, keep_error: bool = False) -> None:
    """Make ``work``'s setup this process's current one (tearing down another run's first)."""
    if _PROCESS.get("key") == key:
        return
    _leave()
    _PROCESS.update(key=key, work=work, error=None)
    if work.setup is None:
        return
    try:
        work.setup(*work.args)
    except Exception as error:  # noqa: BLE001 - kept; the process's first unit raises it in the parent
        if not keep_error:
            _PROCESS.clear()
            raise
        _PROCESS["error"] = error


def _leave() -> None:
    work = _PROCESS.get("work")
    _PROCESS.clear()
    if work is not None and work.teardown is not None:
        work.teardown()


def _unit(item: Any) -> Any:
    if (error := _PROCESS.get("error")) is not None:
        raise error
    return _PROCESS["work"].run(item)


def _run_unit(key: str, work: Work, item: Any) -> Any:
    """One Ray task: this process's setup for the run ``key`` (once), then the unit."""
    if not _ATEXIT:
        atexit.register(_leave)
        _ATEXIT.append(True)
    _enter(key, work)
    return _unit(item)


_ATEXIT: list[bool] = []


class Executor(ABC):
    """Runs :class:`Work` over items; :meth:`imap` yields results in submission order."""

    name = "local"

    @abstractmethod
    def imap(self, work: Work, items: Iterable[Any]) -> Iterator[Any]: ...


class InProcessExecutor(Executor):
    """``local`` with one worker: everything in this process."""

    def imap(self, work: Work, items: Iterable[Any]) -> Iterator[Any]:
        _enter(uuid.uuid4().hex, work)
        try:
            for item in items:
                yield _unit(item)
        finally:
            _leave()


class PoolExecutor(Executor):
    """``local`` with N workers: a ``fork`` process pool."""

    def __init__(self, workers: int) -> None:
        self.workers = workers

    def imap(self, work: Work, items: Iterable[Any]) -> Iterator[Any]:
        context = multiprocessing.get_context("fork")
        key = uuid.uuid4().hex
        with context.Pool(self.workers, initializer=_enter, initargs=(key, work, True)) as pool:
            yield from pool.imap(_unit, items)


class ThreadExecutor(Executor):
    """``local`` with N threads in this process (see the module docstring); results in submission order. When the
    caller stops early (an error, an interrupt, ``close()``), no new unit starts and the running ones are waited
    for, so that every thread's teardown runs."""

    def __init__(self, threads: int) -> None:
        self.threads = threads

    def imap(self, work: Work, items: Iterable[Any]) -> Iterator[Any]:
        source = enumerate(items)
        done: dict[int, tuple[bool, Any]] = {}  # index -> (ok, result or exception)
        ready = threading.Condition()
        stop = threading.Event()
        ended = [0]  # threads that have run out of items (and torn down)

        def take() -> tuple[int, Any] | None:
            with ready:
                return None if stop.is_set() else next(source, None)

        def loop() -> None:
            failure: BaseException | None = None
            try:
                if work.setup is not None:
                    work.setup(*work.args)
            except Exception as error:  # noqa: BLE001 - raised by this thread's units, in the caller
                failure = error
            try:
                while (entry := take()) is not None:
                    index, item = entry
                    try:
                        outcome = (False, failure) if failure is not None else (True, work.run(item))
                    except BaseException as error:  # noqa: BLE001 - re-raised in the caller, in order
                        outcome = (False, error)
                    with ready:
                        done[index] = outcome
                        ready.notify_all()
            finally:
                if failure is None and work.teardown is not None:
                    work.teardown()
                with ready:
                    ended[0] += 1
                    ready.notify_all()

        threads = [threading.Thread(target=loop, name=f"unit-{n}", daemon=True) for n in range(self.threads)]
        for thread in threads:
            thread.start()
        try:
            for index in itertools.count():
                with ready:
                    ready.wait_for(lambda i=index: i in done or ended[0] == len(threads))
                    if index not in done:
                        return
                    ok, value = done.pop(index)
                if not ok:
                    raise value
                yield value
        finally:
            stop.set()
            for thread in threads:
                thread.join()


class RayExecutor(Executor):
    """``ray``: one Ray task per item, retried when its worker process dies."""

    name = "ray"

    def __init__(self, options: ExecutorOptions) -> None:
        self.options = options

    def imap(self, work: Work, items: Iterable[Any]) -> Iterator[Any]:
        import ray

        remote = ray.remote(_run_unit).options(
            num_cpus=1, max_retries=self.options.ray_max_retries, retry_exceptions=False
        )
        work_ref = ray.put(work)
        key = uuid.uuid4().hex
        pending = deque(remote.remote(key, work_ref, item) for item in items)
        try:
            while pending:
                yield _ray_result(pending[0], self.options)
                pending.popleft()
        finally:
            for ref in pending:  # the caller stopped early (an error, an interrupt): drop the rest
                with contextlib.suppress(Exception):
                    ray.cancel(ref)


def _ray_result(ref: Any, options: ExecutorOptions) -> Any:
    import ray

    try:
        return ray.get(ref)
    except ray.exceptions.RayTaskError as error:  # the unit raised: the parent sees the unit's own exception
        logger.debug("a work unit raised on a Ray worker:\n%s", error)
        cause = error.cause if isinstance(error.cause, Exception) else error.as_instanceof_cause()
        raise cause from None
    except (ray.exceptions.WorkerCrashedError, ray.exceptions.NodeDiedError, ray.exceptions.ObjectLostError) as error:
        raise ExecutorError(
            f"executor ray: a work unit's worker died {options.ray_max_retries + 1} time(s) "
            f"({type(error).__name__}); raise ray_max_retries or read the worker logs "
            "(/tmp/ray/session_latest/logs on its node)."
        ) from error


@contextlib.contextmanager
def open_executor(
    options: ExecutorOptions, *, workers: int = 1, threads: int = 1, ray_num_cpus: int | None = None
) -> Iterator[Executor]:
    """The executor of ``options``: ``local`` (``workers`` processes, or ``threads`` threads of this process; both 1:
    this process alone) or ``ray`` (connected, or a local Ray started with ``options.ray_num_cpus`` or else
    ``ray_num_cpus`` CPUs, stopped on exit). Runs :func:`check_executor` first."""
    check_executor(options)
    if workers > 1 and threads > 1:
        raise ExecutorError(f"workers={workers} processes and threads={threads}: choose one of the two.")
    if options.executor == "local":
        if threads > 1:
            yield ThreadExecutor(threads)
        else:
            yield InProcessExecutor() if workers <= 1 else PoolExecutor(workers)
        return
    import ray

    owned = not ray.is_initialized()
    if owned:
        _start_ray(options, ray_num_cpus)
    try:
        yield RayExecutor(options)
    finally:
        if owned:
            ray.shutdown()


def _start_ray(options: ExecutorOptions, ray_num_cpus: int | None) -> None:
    import ray

    settings: dict[str, Any] = {"include_dashboard": False, "namespace": "stateguard"}
    if options.address is None:
        cpus = options.ray_num_cpus or ray_num_cpus
        for attempt in (1, 2):  # Ray gives a new raylet a fixed 30 s to register, which a busy machine can miss
            try:
                ray.init(address="local", **({"num_cpus": cpus} if cpus else {}), **settings)
                break
            except Exception as error:
                if attempt == 2:
                    raise
                first_line = str(error).splitlines()[0] if str(error) else type(error).__name__
                logger.warning("the local Ray did not start (%s); starting it once more", first_line)
                ray.shutdown()
        logger.info("started a local Ray for the run (%s CPUs)", int(ray.cluster_resources().get("CPU", 0)))
        return
    settings.pop("include_dashboard")
    try:
        ray.init(address=options.address, **settings)
    except (ConnectionError, RuntimeError, TimeoutError) as error:
        raise ExecutorError(
            f"executor ray: cannot join the Ray cluster at address {options.address} ({type(error).__name__}: "
            f"{str(error).splitlines()[0] if str(error) else ''}). Start it (`ray start --head`), fix address, or "
            "set address: null to start a local Ray for the run."
        ) from None
    logger.info("joined the Ray cluster at %s (%s CPUs)", options.address, int(ray.cluster_resources().get("CPU", 0)))
