"""Execution layer: a fast, isolated, stateful Python kernel per episode.

Usage::

    from harness.sandbox import Sandbox, SandboxConfig

    with Sandbox(SandboxConfig(isolation="bwrap", memory_mb=2048, cell_timeout_s=30)) as sandbox:
        k = sandbox.new_kernel(public_dir=task / "public")          # workspace=None: temp dir, removed on close
        r = k.execute("import pandas as pd\ndf = pd.read_csv(f'{DATA_DIR}/data/x.csv')\ndf.shape")
        r.ok, r.display, r.variables, r.files                       # never raises for user errors
        cp = k.checkpoint(); k.execute("df = None"); k.restore(cp)   # fork snapshot, restorable many times
        k.probe("df.describe()")        # verdict from the clean verifier over df exported as data; kernel untouched
        k.digest()          # hash of the state later cells observe (equal digests: same replies to the same cells)

``Kernel.tap`` (a ``ReplyTap``) sees every execute/probe reply and may answer one from a record instead of the
kernel process, with the host's bookkeeping applied as to a real reply: synthesis lets a run whose state digest
equals a recorded run's take that run's replies (``synthesis/replay.py``).

Architecture
------------
host process ──socket──► **zygote** (numpy/pandas imported; inside one bubblewrap container per Sandbox)
  └─ per kernel (episode): zygote forks → ``unshare(PID|mount|IPC|net)`` → **episode init** (PID 1 of a fresh PID
     namespace; binds ``public_dir`` read-only at ``/public``, the workspace read-write at ``/workspace``, a fresh
     tmpfs ``/tmp`` and ``/proc``, detaches the host view ``/.host``, makes ``/`` read-only, drops all
     capabilities) → forks the **kernel** (rlimits, no_new_privs, Landlock, then user code).
     Checkpoints are forks of the kernel parked on their own channel; ``restore`` double-forks a new kernel from
     one. The episode init also forks one clean **verifier** (``runtime/verifier.py``) that computes every probe.
     Channels are unix socketpairs handed over with SCM_RIGHTS;
     frames are length-prefixed JSON with size caps; the host gets real pids from SCM_CREDENTIALS.
Host side: ``sandbox.py`` (:class:`Sandbox`, the zygote), ``client.py`` (:class:`Kernel`, one kernel's handle),
``probe_host.py`` (a probe's exports and its verifier), ``channels.py`` (socketpairs, greetings, forks, an episode's
processes), ``replies.py`` (validating what a kernel reports). Inside the sandbox:
``runtime/`` (mounted read-only as ``sg_runtime``; ``runtime/kernel.py`` is the kernel process itself).
Typical costs here (``scripts/bench_sandbox.py``), with a 1,000,000-row DataFrame in the namespace: trivial cell
~0.3 ms, new kernel ~50 ms, a check on the frame ~11 ms (~24 ms for the first probe after a cell, which exports it);
checkpoint ~4 ms and restore ~7 ms, each measured as the extra time of the
cell that follows it (a checkpoint's fork is deferred to that cell; a restored kernel's first cell pays its
copy-on-write faults).

Threat model (``isolation: bwrap``)
-----------------------------------
Contained — user code in a kernel cannot:
- read anything but ``public_dir`` (read-only), its workspace, its own ``/tmp``, the Python installation/venv
  (read-only), ``/usr`` and a few ``/etc`` files (ld.so cache, localtime, passwd, group). Not visible: the task's
  ``private/`` answers, the repository source (only ``harness/sandbox/runtime`` is mounted, read-only), ``/root``
  and the rest of the host, other episodes' workspaces and ``/tmp``. An installed (wheel) copy of the project inside
  a mounted folder (the venv's ``site-packages``, with the built-in tasks' ``private/`` answers) is covered by an
  empty read-only tmpfs (``sandbox.hidden_dirs``);
- write anywhere except its workspace and ``/tmp`` (mounts are read-only; Landlock enforces the same);
- use the network: each kernel has its own empty network namespace (no interfaces but a down-by-default
  loopback), and Landlock denies TCP bind/connect; kernels cannot reach each other (no shared loopback or
  abstract unix sockets);
- see or signal processes outside its episode: own PID namespace whose PID 1 (the episode init) ignores signals
  from inside; ``os.kill(os.getppid(), 9)`` fails; the zygote and host are not visible; Landlock also scopes
  signals and abstract sockets to the kernel's own domain;
- regain privileges: every capability is dropped (bounding set emptied, securebits locked), no_new_privs is
  set, and nested user namespaces are disabled (``user.max_user_namespaces = 0`` in the sandbox).
Limits and how they are enforced:
- memory: ``RLIMIT_AS`` per process = preloaded baseline + ``memory_mb`` (a ``MemoryError`` sets
  ``memory_exceeded``; the kernel survives); plus a memory cgroup per episode (``episode_memory_mb``) as a
  backstop (an OOM kill restarts the kernel, reported with ``memory_exceeded`` and the reason);
- wall clock: ``SIGALRM`` raises ``CellTimeout`` in user code (re-fired every 0.5 s if swallowed); a cell that
  ignores it is killed by the host after ``grace_s`` and the kernel restarted (``restarted=True`` with reason);
- CPU time: ``RLIMIT_CPU`` soft limit per cell, ``SIGXCPU`` raises ``CellCpuExceeded`` (the hard limit is left
  open, so user code can lift the soft one; the wall clock still applies);
- processes: a pids cgroup per episode (``max_processes`` + room for checkpoints); processes a cell starts are
  killed when the cell ends;
- output: stdout/stderr capped at ``max_output_bytes`` each with a ``[... output truncated: N bytes omitted ...]``
  marker (Python-level writes beyond the cap are dropped as they are written; fd-level writes go to a memfd that
  ``RLIMIT_FSIZE`` bounds); files: ``RLIMIT_FSIZE`` (``max_file_mb``), ``/tmp`` size ``tmp_mb``. Text the kernel
  sends is always valid UTF-8: lone surrogates (``surrogateescape``) in output, exception messages, tracebacks,
  ``print_result`` values, displays, variable summaries and probe replies arrive as their ``backslashreplace``
  escape (``\\udce9``), and invalid bytes written to fds 1/2 as U+FFFD; no output can kill the kernel;
- threads: a cell ends with no other Python thread running in the kernel (``runtime/threads.py``). Threads it left
  are stopped (``SystemExit`` raised in them; idle ``concurrent.futures`` workers asked to exit) and named in the
  cell's stderr; one that cannot be stopped within a fraction of ``grace_s`` (a long ``time.sleep``, a blocking
  read, a loop in C code) restarts the kernel (``restarted=True``, ``error_type="ThreadNotStopped"``, the reason
  names it). So nothing of the user's runs between requests: no late writes to variables, files or a later cell's
  output. Native threads without a Python thread state (BLAS/OpenMP pools) are not Python threads and are kept.
- Anything the kernel sends is untrusted: oversized/garbled/late replies are treated as a crash (kernel killed
  and restarted), never parsed into the host's control flow.
Host side — nothing the kernel writes is trusted by the host:
- workspace files are read and written only through :mod:`harness.sandbox.files` (submission checks, grading,
  workflows, the episode runtime): no link is followed on any path component (``O_NOFOLLOW`` from the workspace
  root's descriptor), only regular files with one link are read (FIFOs, sockets, devices, directories and hard
  links are refused, with ``O_NONBLOCK`` so no open can block), reads are capped in size and time, writes replace
  the file by ``rename`` (a planted link is replaced, not written through), and refusals name the reason, never
  the target's content; graders read a host-owned copy, so the file cannot change between check and grade;
- a sandbox's temporary folder records its owner (pid and start time); a later sandbox removes folders whose owner
  is gone (a ``kill -9`` leaves them), never a live one's.
Not contained (accepted risks):
- kernel exploits: user code reaches the full Linux syscall surface (no seccomp filter); the sandboxed processes
  run as host uid 0 when the host is root (inside a user namespace, without capabilities);
- CPU/cache side channels, timing, and resource contention with other episodes (CPU, disk bandwidth, page cache);
- reading the Python installation, the venv and ``/usr`` (needed to run); reading ``/proc`` of its own episode;
- disk usage of the workspace (only single files are capped, by ``RLIMIT_FSIZE``);
- self-harm within an episode: a cell can kill its own checkpoints (they share its PID namespace; ``restore``
  then raises ``SandboxError``) or corrupt its own kernel (then it is restarted);
- without root (no writable cgroups) the process and episode-memory limits are not enforced (logged warning);
  RLIMIT_NPROC is set instead where it applies (non-root uids).
Probes and checks (``Kernel.probe``, the manager's ``run_probe``/``check_constraint``): the verdict is computed
where no worker code ever ran. The host parses the probe (``ast``) for the names it reads; the kernel exports those
variables as data only (``runtime/export.py``: DataFrames/Series of numpy-backed numeric columns as raw column
buffers, other DataFrames/Series as Arrow IPC, numpy arrays as raw buffers, plain scalars and small containers as
JSON, modules by name; never pickle, never an object with methods), each in a memfd sealed against writes, passed
with SCM_RIGHTS; the episode's verifier (forked from the episode init, itself forked from the zygote) checks the
seals, rebuilds raw-buffer frames zero-copy once per export (a later check of the same export reuses them), forks
per probe, rebuilds the other variables in the fork's fresh namespace and runs the code there, with no writable
path (Landlock), no TCP, the kernel's rlimits and a deadline; its reply is what the host returns. The export is
cached until the kernel next runs anything (a cell, restore, digest, restart). A variable
that is not data (a function, a model, a worker-defined object, an object column holding anything but plain values,
a custom extension array) is reported in ``ExecutionResult.unavailable`` and a probe that reads it fails with a
NameError naming it; a subclass of a DataFrame/Series/int/float/str crosses as its base data (said in ``stderr``).
So a patched ``KernelRuntime.run_cell``, ``pandas.DataFrame.sum``, ``builtins.round``, a class whose ``__eq__``
lies, ``__reduce__``, a DataFrame subclass: none changes a verdict, and no probe can change the kernel (it never runs
there). The kernel reads its variables with references bound before any worker code ran (the request loop's
``export``/``checkpoint`` dispatch, exact-type checks by identity, ``type``'s own descriptors, no ``isinstance`` or
``==`` on worker objects), and first checks the identity of every function, class and descriptor (and every
function's ``__code__``) in this runtime, builtins and the standard modules it calls against a snapshot the zygote
took before any worker code ran: if one differs, no variable is exported and the probe says which attribute the
worker modified. A numeric numpy-backed frame or Series (``runtime/fastexport.py``) is then read without running
any Python-level code of pandas, numpy or pyarrow — its block manager, blocks, values, placements, index and labels
only through C-level references taken in the zygote (Cython getsets of ``pandas._libs.internals``, ``__dict__``
getsets, ``ndarray``/``dtype`` getsets and methods, pyarrow's ``ChunkedArray.to_pylist`` on a plain string
array), types compared by identity — so a patched ``DataFrame.__len__``, a ``blocks`` property shadowing the Cython
one, ``numpy.arange`` or ``pyarrow.array`` is never called and needs no check. Any other variable is exported only
once the same snapshot check also passes for every module and class of numpy, pandas and pyarrow (else that
variable is unavailable, naming the attribute). The verifier is ``PR_SET_DUMPABLE`` 0 (no ptrace, no
``/proc/PID/mem`` from the kernel) and imports nothing from the workspace.
What stays possible inside the worker's own process (its data is its own): rewriting the runtime's own objects in
place — a captured function's ``__code__``/``__defaults__``/closure cells, the integrity snapshot's attributes, the
``KernelRuntime`` instance reached through ``gc`` or frame introspection — or its memory through ``ctypes``, so that
the kernel exports other data than its variables hold; the verifier then computes an honest verdict over dishonest
data. The kernel cannot run without ``ctypes``: the runtime itself calls libc through it (``fflush``, Landlock,
``mount``/``unshare``/``prctl`` syscalls), and numpy and pandas import it at load time, so it is in ``sys.modules``
before any worker code runs; removing it would need those calls moved to a C extension and the libraries patched.
The worker can also kill the verifier where Landlock cannot scope signals (ABI < 6): its probes then fail
(``ProbeFailed``) and the next probe starts a fresh verifier; it can never answer for it.
Checkpoints snapshot the process (the namespace) as it is at the ``checkpoint()`` call, not the workspace files. The
fork is deferred to the next request that runs anything in the kernel process (cell, digest, restore); as
the kernel runs nothing between requests (no threads, see above; the wall-clock timer is disarmed), that fork gets
the state of the call. ``checkpoint(restorable=False)`` takes an id without a snapshot (nothing forked; ``restore``
refuses it).

Fallback
--------
``isolation: bwrap`` without a working ``bwrap`` raises :class:`SandboxUnavailableError` (with the fix).
``isolation: none`` runs the same zygote/fork machinery without namespaces and logs a loud ``logging.warning``;
where Landlock is available (Linux >= 5.13; ABI >= 4 for TCP, >= 6 for signal scoping) it still confines reads
to the public dir, the workspace, the Python installation and system libraries, writes to the workspace and a
private tmp dir, denies TCP and signals out of the kernel — but that is defence in depth, not isolation: Landlock
only allows folders, so an installed (wheel) copy of the project in the venv, built-in tasks' answers included, stays
readable.
"""

from .client import Kernel, ReplyTap, SandboxError
from .config import SandboxConfig
from .result import ExecutionResult, FileChange, VariableChange, VariableInfo
from .sandbox import Sandbox, SandboxUnavailableError

__all__ = [
    "ExecutionResult",
    "FileChange",
    "Kernel",
    "ReplyTap",
    "Sandbox",
    "SandboxConfig",
    "SandboxError",
    "SandboxUnavailableError",
    "VariableChange",
    "VariableInfo",
]
