"""``stateguard serve``: serve a checkpoint behind an OpenAI-compatible endpoint for the ``llm:URL`` manager policy.

    stateguard serve --checkpoint runs/sft/final                 # GPU: vllm serve (needs the vllm extra)
    stateguard serve --checkpoint runs/sft/final --dry-run       # print the exact vllm command only
    stateguard serve --checkpoint runs/tiny --cpu --port 8001    # CPU stand-in: transformers serve
    stateguard serve --config serve.yaml --port 8002             # ServeConfig fields from a YAML file

The flags are the fields of :class:`ServeConfig` (:mod:`harness.config_cli`: defaults, then ``--config FILE``, then
the flags; ``--served-model-name`` and ``--served_model_name`` alike; ``--grace`` is ``--grace_s``), plus
``--dry-run``.

**GPU** (:func:`vllm_command`)::

    vllm serve CKPT --served-model-name NAME --host HOST --port PORT --chat-template CKPT/chat_template.jinja \\
        --enable-auto-tool-choice --tool-call-parser hermes [--max-model-len N]

The chat template is the one saved with the checkpoint (the template the model was trained with), and the hermes
tool-call parser matches the wire format (``<tool_call>{"name", "arguments"}</tool_call>``), so the endpoint returns
structured ``tool_calls`` that :func:`harness.manager.llm_policy.reply_to_text` turns back into the same wire text.

**CPU stand-in** (:func:`cpu_command`): ``transformers serve NAME --device cpu`` (the ``transformers[serving]`` extra:
fastapi, uvicorn), with ``HF_HUB_OFFLINE=1`` so a local path never reaches the Hub. It loads the tokenizer, and so
the same ``chat_template.jinja``, from the checkpoint folder, renders the request's ``tools`` with it and parses Qwen3
``<tool_call>`` blocks into structured ``tool_calls`` like vLLM's hermes parser.

**The model id** both servers list is ``--served-model-name``, else the checkpoint folder's name
(:attr:`ServeConfig.model_name`): the vLLM command passes it as ``--served-model-name`` (vLLM alone would list the
``--model`` string as given), and ``transformers serve``, which lists the path it is given, runs in a temporary folder
where that name links to the checkpoint (:func:`model_link`). The harness's :class:`~harness.llm.OpenAIChatBackend`
uses the first listed id, so ``llm:URL`` works against either server unchanged. The stand-in's environment
(:func:`cpu_env`) silences the multiprocessing resource tracker's "leaked semaphore" warning at exit (the server
terminates its model process, whose queues the tracker then unlinks: nothing is left behind) and, when its output is
not a terminal, the progress bars and colours (a log file gets plain lines).

**How the checkpoint is served** (its ``manager.json``: the manager it is, its prompt view, grammar and reply cap;
:mod:`harness.manager.checkpoint_settings`): vLLM lists the folder it serves as its model's ``root`` (the command
passes it as an absolute path), and an ``llm:URL`` / ``hier:llm:URL`` / ``hier-checks:llm:URL`` client that can read
that folder (the same machine) follows its ``manager.json`` as ``llm-hf:PATH`` does (:mod:`harness.manager.served`).
The CPU stand-in lists the model's name alone, and a client of a server on another machine cannot read the folder:
those clients are served without the file's settings (one logged line); pass the settings as flags there.

:func:`serve_in_background` starts either server as a child process, waits until ``GET /v1/models`` answers and
yields the API root (``http://HOST:PORT/v1``); tests and the checkpoint evaluation use it.

A LoRA adapter-only folder (``adapter_config.json``, no weights: neither server loads it) is refused in one line that
names the fix, ``stateguard merge --adapter DIR --out DIR`` (:mod:`harness.checkpoints`).

``stateguard serve`` forwards SIGTERM, SIGINT and SIGHUP to the server, gives it ``--grace`` seconds to exit, and
exits 0 after a clean shutdown. How the server's processes are owned and stopped: the module docstring of
harness/serving.py.

.. --help ends here

**The server is owned by the process that starts it** (:func:`start_owned`, :func:`stop_owned`), in the foreground
(``stateguard serve``, :func:`run_owned`) and in the background (:func:`serve_in_background`) alike:

- it leads its own process group (a new session), so one ``killpg`` reaches everything it starts (vLLM's engine
  processes, uvicorn workers);
- ``stateguard serve`` forwards SIGTERM, SIGINT and SIGHUP to that group, waits ``--grace`` seconds for the server to
  exit, then SIGKILLs the group, and exits with the server's status (``128 + N`` when signal ``N`` ended it);
- every exit path (normal, exception, signal) ends in :func:`stop_owned`: SIGTERM to the group, the grace period,
  then SIGKILL to the group, so nothing the server started keeps the port;
- on Linux the server is started through a small exec wrapper that sets ``PR_SET_PDEATHSIG`` (SIGKILL) before it
  execs the server, so the kernel kills the server when its owner dies, even by ``kill -9``. The kernel sends it
  when the *thread* that started the server ends, so start it from a thread that outlives it (the main thread).
  It reaches the server alone: after ``kill -9`` of the owner, processes the server started itself are orphaned
  unless the server stops them when it dies. Elsewhere there is no such signal: ``kill -9`` of the owner leaves the
  server running; every other exit path still stops its group.
"""

from __future__ import annotations

import argparse
import errno
import json
import logging
import os
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from harness.checkpoints import refuse_adapter_only
from harness.import_utils import is_available, require
from harness.progress import is_terminal

logger = logging.getLogger(__name__)

CHAT_TEMPLATE_FILE = "chat_template.jinja"
TOOL_CALL_PARSER = "hermes"
GRACE_S = 20.0
FORWARDED_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)

# Run as `python -c _EXEC_WITH_PDEATHSIG OWNER_PID PROGRAM ARGV...`: ask the kernel for SIGKILL when the owner dies,
# exit if it died already (before the request), then become the server. prctl(1, ...) is PR_SET_PDEATHSIG.
_EXEC_WITH_PDEATHSIG = """\
import ctypes, os, signal, sys
ctypes.CDLL(None).prctl(1, signal.SIGKILL, 0, 0, 0)
if os.getppid() != int(sys.argv[1]):
    os._exit(1)
os.execv(sys.argv[2], sys.argv[3:])
"""


@dataclass
class ServeConfig:
    checkpoint: str = field(metadata={"help": "Checkpoint folder (config.json, weights, tokenizer, chat template)."})
    host: str = field(default="127.0.0.1", metadata={"help": "Listen address (0.0.0.0 to serve other machines)."})
    port: int = field(default=8000, metadata={"help": "Listen port."})
    served_model_name: str | None = field(
        default=None,
        metadata={"help": "Model id the endpoint lists (vLLM and --cpu alike; default: the checkpoint folder name)."},
    )
    max_model_len: int | None = field(default=None, metadata={"help": "vLLM context length (default: the model's)."})
    extra_args: list[str] = field(
        default_factory=list,
        metadata={"help": "More arguments for the server, verbatim (on the command line: --extra_args=--flag)."},
    )
    cpu: bool = field(
        default=False, metadata={"help": "Serve with the CPU stand-in (transformers serve) instead of vLLM."}
    )
    grace_s: float = field(
        default=GRACE_S, metadata={"help": "Seconds the server gets to exit when stopped, before it is killed."}
    )

    def __post_init__(self) -> None:
        path = Path(self.checkpoint)
        refuse_adapter_only(path, "--checkpoint")
        if not (path / "config.json").is_file():
            raise ValueError(
                f"--checkpoint {self.checkpoint}: no config.json there; pass a saved checkpoint folder "
                "(e.g. the output of scripts/sft.py, or `stateguard model tiny --out DIR`)."
            )
        if not (path / CHAT_TEMPLATE_FILE).is_file():
            raise ValueError(
                f"--checkpoint {self.checkpoint}: no {CHAT_TEMPLATE_FILE}; the server must use the template the model "
                "was trained with. Save the tokenizer with the checkpoint (tokenizer.save_pretrained(DIR))."
            )
        from harness.manager.checkpoint_settings import read_manager_settings  # registering the command stays light

        read_manager_settings(path)  # a malformed manager.json is refused here, not by each client
        if not 0 < self.port < 65536:
            raise ValueError(f"--port {self.port}: use a TCP port in 1..65535, e.g. 8000.")
        if self.grace_s < 0:
            raise ValueError(f"--grace {self.grace_s}: use 0 or more seconds, e.g. {GRACE_S:g}.")

    @property
    def model_name(self) -> str:
        return self.served_model_name or Path(self.checkpoint).resolve().name

    @property
    def base_url(self) -> str:
        host = "127.0.0.1" if self.host in ("0.0.0.0", "::") else self.host
        return f"http://{host}:{self.port}/v1"


def vllm_command(config: ServeConfig) -> list[str]:
    """The exact ``vllm serve`` command for ``config`` (see the module docstring); the checkpoint as an absolute path,
    which vLLM lists as its model's ``root``."""
    command = [
        "vllm", "serve", str(Path(config.checkpoint).resolve()),
        "--served-model-name", config.model_name,
        "--host", config.host,
        "--port", str(config.port),
        "--chat-template", str(Path(config.checkpoint) / CHAT_TEMPLATE_FILE),
        "--enable-auto-tool-choice",
        "--tool-call-parser", TOOL_CALL_PARSER,
    ]  # fmt: skip
    if config.max_model_len is not None:
        command += ["--max-model-len", str(config.max_model_len)]
    return command + list(config.extra_args)


def cpu_command(config: ServeConfig) -> list[str]:
    """The ``transformers serve`` command of the CPU stand-in: it serves ``config.model_name``, so run it in the
    folder of :func:`model_link` (relative paths in ``extra_args`` resolve there too) with :func:`cpu_env`."""
    local = Path(sys.executable).parent / "transformers"
    program = str(local) if local.is_file() else "transformers"
    command = [program, "serve", config.model_name, "--host", config.host, "--port", str(config.port)]
    return command + ["--device", "cpu", *config.extra_args]


@contextmanager
def model_link(config: ServeConfig) -> Iterator[Path]:
    """A temporary folder in which the relative path ``config.model_name`` links to the checkpoint (removed on exit):
    ``transformers serve NAME`` run there lists the model as ``NAME``. A name that is not a relative path inside the
    folder (absolute, with ``..``, or ending in ``:FILE.gguf``, which the server reads as a GGUF file) raises
    ``ValueError``."""
    name = config.model_name
    parts = Path(name).parts
    if not parts or Path(name).is_absolute() or ".." in parts or name.endswith(".gguf"):
        raise ValueError(
            f"--served-model-name {name!r}: the CPU stand-in serves the checkpoint under a relative name; pass a name "
            "such as my-model or org/my-model."
        )
    with tempfile.TemporaryDirectory(prefix="stateguard-serve-") as folder:
        link = Path(folder, name)
        link.parent.mkdir(parents=True, exist_ok=True)
        link.symlink_to(Path(config.checkpoint).resolve(), target_is_directory=True)
        yield Path(folder)


RESOURCE_TRACKER_WARNING = "ignore:resource_tracker:UserWarning"
"""The ``PYTHONWARNINGS`` filter of the multiprocessing resource tracker's "leaked semaphore" warning."""


def cpu_env(*, terminal: bool = False) -> dict[str, str]:
    """The environment of the stand-in: offline, so a local checkpoint path is never looked up on the Hub; without
    the resource tracker's "leaked semaphore" warning (see the module docstring); and, unless its output goes to a
    ``terminal``, without progress bars or colours."""
    warnings = ",".join(filter(None, (os.environ.get("PYTHONWARNINGS"), RESOURCE_TRACKER_WARNING)))
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "PYTHONWARNINGS": warnings}
    if not terminal:
        env.pop("FORCE_COLOR", None)
        env.update(HF_HUB_DISABLE_PROGRESS_BARS="1", NO_COLOR="1", TERM="dumb")
    return env


def require_cpu_server() -> None:
    """Raise ``ImportError`` naming the extra when ``transformers serve`` cannot run here."""
    for name in ("transformers", "torch", "fastapi", "uvicorn"):
        require(name)


def server_command(
    config: ServeConfig, *, cpu: bool, terminal: bool = False
) -> tuple[list[str], dict[str, str] | None]:
    """The command (and environment, None: inherited) that serves ``config`` on CPU (run it in the folder of
    :func:`model_link`) or with vLLM; ``terminal``: the server's output goes to a terminal (see :func:`cpu_env`)."""
    return (cpu_command(config), cpu_env(terminal=terminal)) if cpu else (vllm_command(config), None)


def start_owned(
    command: Sequence[str],
    env: dict[str, str] | None = None,
    *,
    stdout: object = None,
    stderr: object = None,
    cwd: str | Path | None = None,
) -> subprocess.Popen:
    """Start ``command`` as a child this process owns: the leader of its own process group, and on Linux killed by
    the kernel (SIGKILL) when the thread that called this dies, even by ``kill -9``. Stop it with :func:`stop_owned`.

    ``env`` None inherits this process's environment; ``stdout``, ``stderr`` and ``cwd`` are passed to ``Popen``.
    Raises ``FileNotFoundError`` when the program is not on the ``PATH`` of ``env``."""
    path = (os.environ if env is None else env).get("PATH", os.defpath)
    program = shutil.which(command[0], path=path)
    if program is None:
        raise FileNotFoundError(errno.ENOENT, "no such program on PATH", command[0])
    argv = [program, *command[1:]]
    if sys.platform.startswith("linux"):
        argv = [sys.executable, "-I", "-S", "-c", _EXEC_WITH_PDEATHSIG, str(os.getpid()), program, *command]
    return subprocess.Popen(argv, env=env, stdout=stdout, stderr=stderr, cwd=cwd, start_new_session=True)


def exited(process: subprocess.Popen, timeout_s: float = 0.0) -> int | None:
    """The child's return code (``-N``: killed by signal ``N``) once it has exited, waiting up to ``timeout_s``;
    None while it runs. The child is not reaped, so its pid keeps naming its process group until :func:`stop_owned`
    reaps it (where ``os.waitid`` is missing, macOS before Python 3.13, it is)."""
    deadline = time.monotonic() + timeout_s
    while True:
        if process.returncode is not None:
            return process.returncode
        if hasattr(os, "waitid"):
            try:
                info = os.waitid(os.P_PID, process.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
            except ChildProcessError:  # reaped elsewhere; Popen then records code 0
                return process.poll()
            if info is not None:
                return info.si_status if info.si_code == os.CLD_EXITED else -info.si_status
        elif process.poll() is not None:
            return process.returncode
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return None
        time.sleep(min(0.05, remaining))


def signal_group(process: subprocess.Popen, signum: int) -> None:
    """Send ``signum`` to the child's process group; a group that is gone already is not an error."""
    try:
        os.killpg(process.pid, signum)
    except (ProcessLookupError, PermissionError):
        pass


def stop_owned(process: subprocess.Popen, grace_s: float = GRACE_S, signum: int | None = signal.SIGTERM) -> int:
    """Stop an owned child: send ``signum`` (None: none, it was sent already) to its group, wait up to ``grace_s`` for
    the child to exit, then SIGKILL the group and reap the child. Returns its return code (``-N``: signal ``N``).

    The group is killed even when the child exits in time, so nothing it started outlives it; the child is reaped
    only after that, so its pid cannot have been reused by then."""
    if signum is not None and exited(process) is None:
        signal_group(process, signum)
    if exited(process, grace_s) is None:
        logger.warning(
            "the server (pid %d) is still running %g s after it was asked to stop: killed", process.pid, grace_s
        )
    signal_group(process, signal.SIGKILL)
    return process.wait()


def run_owned(
    command: Sequence[str],
    env: dict[str, str] | None = None,
    *,
    grace_s: float = GRACE_S,
    cwd: str | Path | None = None,
) -> int:
    """Run ``command`` as an owned child (:func:`start_owned`) in the foreground and return its exit status: its
    code, or ``128 + N`` when signal ``N`` ended it; 0 after a clean shutdown on SIGTERM (the server exited within
    the grace period, with code 0 or of the SIGTERM itself), as a service manager expects.

    SIGTERM, SIGINT and SIGHUP sent to this process are forwarded to the child's group; ``grace_s`` after the first
    one the group is killed (:func:`stop_owned`). Every exit path stops the group. Call it from the main thread (the
    only one that can install signal handlers)."""
    process: subprocess.Popen | None = None
    received: list[int] = []

    def forward(signum: int, _frame: object) -> None:
        received.append(signum)
        if process is not None:
            signal_group(process, signum)

    previous = {signum: signal.signal(signum, forward) for signum in FORWARDED_SIGNALS}
    try:
        process = start_owned(command, env, cwd=cwd)
        if received:  # arrived while it was starting
            signal_group(process, received[-1])
        while not received and exited(process, timeout_s=0.5) is None:
            pass
        if received:
            logger.info("received %s: stopping the server", signal.Signals(received[0]).name)
        returncode = stop_owned(process, grace_s, signum=None)
        if received[:1] == [signal.SIGTERM] and returncode in (0, -signal.SIGTERM):
            return 0
        return returncode if returncode >= 0 else 128 - returncode
    finally:
        if process is not None and process.returncode is None:
            stop_owned(process, grace_s)
        for signum, handler in previous.items():
            signal.signal(signum, signal.SIG_DFL if handler is None else handler)


def wait_until_ready(url: str, process: subprocess.Popen, timeout_s: float) -> None:
    """Poll ``GET {url}/models`` until it answers 200; raise when the server exits or ``timeout_s`` passes."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if (returncode := exited(process)) is not None:
            raise RuntimeError(f"the server exited with code {returncode} before it answered {url}/models.")
        try:
            with urllib.request.urlopen(url + "/models", timeout=2) as response:
                if response.status == 200 and json.loads(response.read()).get("data"):
                    return
        except (OSError, urllib.error.URLError, json.JSONDecodeError):
            pass
        time.sleep(0.5)
    raise TimeoutError(f"the server did not answer {url}/models within {timeout_s:g} s; see its log.")


@contextmanager
def serve_in_background(
    config: ServeConfig,
    *,
    cpu: bool = True,
    log_path: str | Path | None = None,
    startup_timeout_s: float = 180.0,
    grace_s: float = GRACE_S,
    command: Sequence[str] | None = None,
) -> Iterator[str]:
    """Start the server as an owned child (:func:`start_owned`), wait until it is ready, yield its API root; on exit,
    normal or by exception, stop its whole process group (:func:`stop_owned` with ``grace_s``). ``cpu`` picks the
    server here (the CPU stand-in by default), whatever ``config.cpu`` says (that field is the command's).

    The server's output goes to ``log_path`` (default: ``serve.log`` in the current folder's ``runs/``).
    ``command`` replaces the server (vLLM or the CPU stand-in) with another program that serves ``GET /v1/models``
    at ``config.base_url``; it runs with this process's environment."""
    if command is not None:
        env = None
    else:
        require_cpu_server() if cpu else require("vllm")
        command, env = server_command(config, cpu=cpu)
    log_path = Path(log_path or Path("runs") / "serve.log")
    log_path.parent.mkdir(parents=True, exist_ok=True)
    logger.info("starting: %s (log %s)", shlex.join(command), log_path)
    with open(log_path, "ab") as log, ExitStack() as stack:
        cwd = stack.enter_context(model_link(config)) if cpu and env is not None else None
        process = start_owned(command, env, stdout=log, stderr=subprocess.STDOUT, cwd=cwd)
        try:
            wait_until_ready(config.base_url, process, startup_timeout_s)
            yield config.base_url
        finally:
            stop_owned(process, grace_s)


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "serve",
        help="serve a checkpoint behind an OpenAI-compatible endpoint (vLLM on GPU, transformers serve on CPU)",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_arguments(parser)
    parser.set_defaults(func=serve_command)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """``--config FILE``, one flag per :class:`ServeConfig` field (``--grace`` for ``grace_s``), and ``--dry-run``."""
    from harness.config_cli import add_config_arguments

    add_config_arguments(parser, ServeConfig, what="serve", example="serve.yaml", aliases={"grace_s": "--grace"})
    parser.add_argument("--dry-run", action="store_true", help="print the command only")


def serve_command(args: argparse.Namespace) -> int:
    from harness.config_cli import parse_config

    try:
        (config,) = parse_config(args)
    except ValueError as exc:
        print(f"stateguard serve: {exc}", file=sys.stderr)
        return 2
    command, env = server_command(config, cpu=config.cpu, terminal=is_terminal(sys.stderr))
    prefix = "HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 " if config.cpu else ""
    print(prefix + shlex.join(command))
    if config.cpu:
        print(f"# run in a temporary folder where {config.model_name} links to {Path(config.checkpoint).resolve()}")
    print(f"# API root for --manager llm:URL / --worker openai:URL: {config.base_url} (model {config.model_name})")
    from harness.manager.checkpoint_settings import MANAGER_FILE, read_manager_settings

    settings = read_manager_settings(config.checkpoint)
    if settings is not None:
        who = "clients on this machine" if not config.cpu else "no client: the CPU stand-in does not name the folder"
        print(f"# {MANAGER_FILE}: {json.dumps(settings.to_dict())} (followed by {who})")
    if args.dry_run:
        return 0
    try:
        require_cpu_server() if config.cpu else require("vllm")
    except ImportError as exc:
        hint = "" if config.cpu or is_available("vllm") else " On a CPU machine use --cpu (transformers serve)."
        print(f"stateguard serve: {exc}.{hint}", file=sys.stderr)
        return 2
    if not config.cpu:
        return run_owned(command, env, grace_s=config.grace_s)
    try:
        with model_link(config) as folder:
            return run_owned(command, env, grace_s=config.grace_s, cwd=folder)
    except ValueError as exc:
        print(f"stateguard serve: {exc}", file=sys.stderr)
        return 2
