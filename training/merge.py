"""``stateguard merge``: fold a LoRA adapter into its base model and save a plain, servable checkpoint.

    stateguard merge --adapter runs/sft-qwen3-8b-lora/adapter --out runs/sft-qwen3-8b-lora-merged
    stateguard merge --adapter runs/sft-lora --out runs/sft-lora-merged --dtype bfloat16

The adapter folder is what a LoRA run saves (``adapter_config.json``, ``adapter_model.safetensors`` and the tokenizer);
the base model is the one its ``adapter_config.json`` names (``base_model_name_or_path``). The output is a transformers
checkpoint (``config.json``, safetensors weights, the adapter folder's tokenizer and ``chat_template.jinja``, and the
adapter folder's ``manager.json``, how it is served: :mod:`harness.manager.checkpoint_settings`) that ``stateguard
serve``, ``vllm serve``, ``llm-hf:PATH`` and ``scripts/rl.py`` load as any model. ``scripts/sft.py`` with ``use_peft``
calls :func:`merge_adapter` itself after training (``merge_lora: true``, the default). Registered in ``pyproject.toml``
as the entry point ``merge = "training.merge:register"``.
"""

from __future__ import annotations

import argparse
import logging
from pathlib import Path

from harness.checkpoints import ADAPTER_CONFIG
from harness.cli import CommandLineError, prepare_out_dir
from harness.import_utils import require
from harness.manager.checkpoint_settings import read_manager_settings, write_manager_settings

logger = logging.getLogger(__name__)

DTYPES = ("auto", "bfloat16", "float16", "float32")


def merge_adapter(adapter: str | Path, out: str | Path, dtype: str = "auto") -> Path:
    """Load the base model of the LoRA ``adapter`` folder in ``dtype`` (``auto``: as saved), add the adapter, fold its
    weights into the base weights (``merge_and_unload``) and save the result to ``out`` with the adapter folder's
    tokenizer, chat template and ``manager.json`` (read before the model loads: a malformed one is refused first).
    Returns ``out``. A folder without ``adapter_config.json`` is a ``ValueError``."""
    adapter, out = Path(adapter), Path(out)
    if not (adapter / ADAPTER_CONFIG).is_file():
        raise ValueError(
            f"--adapter {adapter}: no {ADAPTER_CONFIG} there; pass the folder a LoRA run saved (with merge_lora: true "
            "the SFT output's adapter/ subfolder)"
        )
    if dtype not in DTYPES:
        raise ValueError(f"dtype={dtype!r} is not one of {', '.join(DTYPES)}; pick one of them")
    settings = read_manager_settings(adapter)
    require("peft")
    from peft import AutoPeftModelForCausalLM
    from transformers import AutoTokenizer

    model = AutoPeftModelForCausalLM.from_pretrained(str(adapter), dtype=dtype).merge_and_unload()
    model.save_pretrained(out, safe_serialization=True)
    AutoTokenizer.from_pretrained(str(adapter)).save_pretrained(out)
    if settings is not None:
        write_manager_settings(out, settings)
    logger.info("merged the LoRA adapter %s into its base model: %s", adapter, out)
    return out


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add ``merge`` to the ``stateguard`` parser."""
    parser = subparsers.add_parser(
        "merge",
        help="fold a LoRA adapter into its base model: a plain checkpoint that serve, vLLM and RL load",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--adapter", type=Path, required=True, help="the LoRA adapter folder (adapter_config.json)")
    parser.add_argument("--out", type=Path, required=True, help="folder to write the merged model to (created)")
    parser.add_argument(
        "--dtype", choices=DTYPES, default="auto", help="weight dtype of the merged model (default: as saved)"
    )
    parser.set_defaults(func=run_merge)


def run_merge(args: argparse.Namespace) -> int:
    if not (args.adapter / ADAPTER_CONFIG).is_file():
        raise CommandLineError(f"--adapter {args.adapter}: no {ADAPTER_CONFIG} there; pass a LoRA adapter folder.")
    prepare_out_dir(args.out)  # before torch loads
    out = merge_adapter(args.adapter, args.out, args.dtype)
    print(f"wrote {out}: the merged model (serve it with: stateguard serve --checkpoint {out})")
    return 0
