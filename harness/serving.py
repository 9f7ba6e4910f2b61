"""``stateguard serve``: serve a checkpoint behind an OpenAI-compatible endpoint for the ``llm:URL`` manager policy.

    stateguard serve --checkpoint runs/sft/final                 # GPU: vllm serve (needs the vllm extra)
    stateguard serve --checkpoint runs/sft/final --dry-run       # print the exact vllm command only
    stateguard serve --checkpoint runs/tiny --cpu --port 8001    # CPU stand-in: transformers serve

**GPU** (:func:`vllm_command`)::

    vllm serve CKPT --served-model-name NAME --host HOST --port PORT --chat-template CKPT/chat_template.jinja \\
        --enable-auto-tool-choice --tool-call-parser hermes [--max-model-len N]

The chat template is the one saved with the checkpoint (the template the model was trained with), and the hermes
tool-call parser matches the wire format (``<tool_call>{"name", "arguments"}</tool_call>``), so the endpoint returns
structured ``tool_calls`` that :func:`harness.manager.llm_policy.reply_to_text` turns back into the same wire text.

**CPU stand-in** (:func:`cpu_command`): ``transformers serve CKPT --device cpu`` (the ``transformers[serving]`` extra:
fastapi, uvicorn), with ``HF_HUB_OFFLINE=1`` so a local path never reaches the Hub. It loads the tokenizer, and so
the same ``chat_template.jinja``, from the checkpoint folder, renders the request's ``tools`` with it and parses Qwen3
``<tool_call>`` blocks into structured ``tool_calls`` like vLLM's hermes parser. The model id it lists is the
checkpoint path; the harness's :class:`~harness.llm.OpenAIChatBackend` uses the first listed id, so ``llm:URL``
works against either server unchanged.

:func:`serve_in_background` starts either server as a child process, waits until ``GET /v1/models`` answers and
yields the API root (``http://HOST:PORT/v1``); tests and the checkpoint evaluation use it.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import shlex
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from harness.import_utils import is_available, require

logger = logging.getLogger(__name__)

CHAT_TEMPLATE_FILE = "chat_template.jinja"
TOOL_CALL_PARSER = "hermes"


@dataclass
class ServeConfig:
    checkpoint: str = field(metadata={"help": "Checkpoint folder (config.json, weights, tokenizer, chat template)."})
    host: str = field(default="127.0.0.1", metadata={"help": "Listen address (0.0.0.0 to serve other machines)."})
    port: int = field(default=8000, metadata={"help": "Listen port."})
    served_model_name: str | None = field(
        default=None, metadata={"help": "Model id the endpoint lists (vLLM; default: the checkpoint folder's name)."}
    )
    max_model_len: int | None = field(default=None, metadata={"help": "vLLM context length (default: the model's)."})
    extra_args: list[str] = field(default_factory=list, metadata={"help": "More arguments for the server, verbatim."})

    def __post_init__(self) -> None:
        path = Path(self.checkpoint)
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
        if not 0 < self.port < 65536:
            raise ValueError(f"--port {self.port}: use a TCP port in 1..65535, e.g. 8000.")

    @property
    def model_name(self) -> str:
        return self.served_model_name or Path(self.checkpoint).resolve().name

    @property
    def base_url(self) -> str:
        host = "127.0.0.1" if self.host in ("0.0.0.0", "::") else self.host
        return f"http://{host}:{self.port}/v1"


def vllm_command(config: ServeConfig) -> list[str]:
    """The exact ``vllm serve`` command for ``config`` (see the module docstring)."""
    command = [
        "vllm", "serve", str(config.checkpoint),
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
    """The ``transformers serve`` command of the CPU stand-in (run with :func:`cpu_env`)."""
    local = Path(sys.executable).parent / "transformers"
    program = str(local) if local.is_file() else "transformers"
    command = [program, "serve", str(config.checkpoint), "--host", config.host, "--port", str(config.port)]
    return command + ["--device", "cpu", *config.extra_args]


def cpu_env() -> dict[str, str]:
    """The environment of the stand-in: offline, so a local checkpoint path is never looked up on the Hub."""
    return {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}


def require_cpu_server() -> None:
    """Raise ``ImportError`` naming the extra when ``transformers serve`` cannot run here."""
    for name in ("transformers", "torch", "fastapi", "uvicorn"):
        require(name)


def server_command(config: ServeConfig, *, cpu: bool) -> tuple[list[str], dict[str, str] | None]:
    """The command (and environment, None: inherited) that serves ``config`` on CPU or with vLLM."""
    return (cpu_command(config), cpu_env()) if cpu else (vllm_command(config), None)


def wait_until_ready(url: str, process: subprocess.Popen, timeout_s: float) -> None:
    """Poll ``GET {url}/models`` until it answers 200; raise when the server exits or ``timeout_s`` passes."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"the server exited with code {process.returncode} before it answered {url}/models.")
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
    config: ServeConfig, *, cpu: bool = True, log_path: str | Path | None = None, startup_timeout_s: float = 180.0
) -> Iterator[str]:
    """Start the server as a child process, wait until it is ready, yield its API root; stop it on exit.

    The server's output goes to ``log_path`` (default: ``serve.log`` in the current folder's ``runs/``)."""
    if cpu:
        require_cpu_server()
    else:
        require("vllm")
    command, env = server_command(config, cpu=cpu)
    log_path = Path(log_path or Path("runs") / "serve.log")
    log_path.parent.mkdir(parents=True, exist_ok=True)
    logger.info("starting: %s (log %s)", shlex.join(command), log_path)
    with open(log_path, "ab") as log:
        process = subprocess.Popen(command, env=env, stdout=log, stderr=subprocess.STDOUT)
        try:
            wait_until_ready(config.base_url, process, startup_timeout_s)
            yield config.base_url
        finally:
            process.terminate()
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


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
    parser.add_argument("--checkpoint", required=True, help="checkpoint folder (with chat_template.jinja)")
    parser.add_argument("--host", default="127.0.0.1", help="listen address (default 127.0.0.1)")
    parser.add_argument("--port", type=int, default=8000, help="listen port (default 8000)")
    parser.add_argument("--served-model-name", default=None, help="model id to serve under (vLLM; default: folder)")
    parser.add_argument("--max-model-len", type=int, default=None, help="vLLM context length")
    parser.add_argument("--cpu", action="store_true", help="the CPU stand-in: transformers serve")
    parser.add_argument("--dry-run", action="store_true", help="print the command only")


def serve_command(args: argparse.Namespace) -> int:
    try:
        config = ServeConfig(
            checkpoint=args.checkpoint,
            host=args.host,
            port=args.port,
            served_model_name=args.served_model_name,
            max_model_len=args.max_model_len,
        )
    except ValueError as exc:
        print(f"stateguard serve: {exc}", file=sys.stderr)
        return 2
    command, env = server_command(config, cpu=args.cpu)
    prefix = "HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 " if args.cpu else ""
    print(prefix + shlex.join(command))
    print(f"# API root for --manager llm:URL / --worker openai:URL: {config.base_url}")
    if args.dry_run:
        return 0
    try:
        require_cpu_server() if args.cpu else require("vllm")
    except ImportError as exc:
        hint = "" if args.cpu or is_available("vllm") else " On a CPU machine use --cpu (transformers serve)."
        print(f"stateguard serve: {exc}.{hint}", file=sys.stderr)
        return 2
    return subprocess.call(command, env=env)
