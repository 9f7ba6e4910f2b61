"""Execution layer: a fast, isolated, stateful Python kernel per episode.

Usage::

    from harness.sandbox import Sandbox, SandboxConfig

    with Sandbox(SandboxConfig(isolation="bwrap", memory_mb=2048, cell_timeout_s=30)) as sandbox:
        k = sandbox.new_kernel(public_dir=task / "public")          # workspace=None: temp dir, removed on close
        r = k.execute("import pandas as pd\ndf = pd.read_csv(f'{DATA_DIR}/data/x.csv')\ndf.shape")
        r.ok, r.display, r.variables, r.files                       # never raises for user errors
        cp = k.checkpoint(); k.execute("df = None"); k.restore(cp)   # fork snapshot, restorable many times
        k.probe("df.describe()")                                     # throwaway fork; namespace untouched
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
     one; probes are forks that run one cell and exit. Channels are unix socketpairs handed over with SCM_RIGHTS;
     frames are length-prefixed JSON with size caps; the host gets real pids from SCM_CREDENTIALS.
Host side: ``sandbox.py`` (:class:`Sandbox`, the zygote), ``client.py`` (:class:`Kernel`, one kernel's handle),
``channels.py`` (socketpairs, greetings, forks), ``replies.py`` (validating what a kernel reports). Inside the sandbox:
``runtime/`` (mounted read-only as ``sg_runtime``; ``runtime/kernel.py`` is the kernel process itself).
Typical costs here (``scripts/bench_sandbox.py``), with a 1,000,000-row DataFrame in the namespace: trivial cell
~0.3 ms, new kernel ~50 ms, probe ~6 ms; checkpoint ~4 ms and restore ~7 ms, each measured as the extra time of the
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
Probes run with a Landlock layer that forbids all file writes, TCP and signals outside the probe, so they
cannot change the kernel's namespace, its workspace or ``/tmp``. Before the probe's code runs, every shared memory
mapping of the fork (``mmap.mmap(-1, n)``, an ``mmap``/``np.memmap`` of a file, SysV/POSIX shared memory; read-only
ones too, as ``mprotect`` could make them writable) is replaced by a private one with the same content
(``runtime/mappings.py``), so writes through it stay in the probe; a probe whose mappings cannot be replaced (no
memory for a copy) does not run (``ProbeFailed``). Probes *can* still write through file descriptors the kernel
already had open for writing (``write``, or a new ``mmap`` of such a descriptor), and without Landlock (old Linux)
they can write files.
With ``inline_probes`` (off by default; synthesis turns it on) a probe whose syntax proves it read-only
(``runtime/inline.py``: assertions, reads of plain values, recomputations into fresh local frames; never an
``mmap`` object or module, nor a store into an array it did not create) runs in the kernel itself, in a shallow copy
of the namespace — <1 ms of overhead instead of a fork; such a probe stuck in one long C call past its deadline
restarts the kernel instead of losing only itself.
Checkpoints snapshot the process (the namespace) as it is at the ``checkpoint()`` call, not the workspace files. The
fork is deferred to the next request that runs anything in the kernel process (cell, probe, digest, restore); as
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
