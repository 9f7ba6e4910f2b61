"""What a model folder holds: full weights, or a LoRA adapter only.

A LoRA run saves an *adapter*: ``adapter_config.json`` and ``adapter_model.safetensors`` (a few low-rank matrices
and the name of the base model they belong to), no ``config.json`` of its own and no model weights. Neither
``vllm serve`` nor a colocated ``vllm.LLM`` loads such a folder as a model, and transformers would fetch the base
model named inside it. The SFT script merges by default (``merge_lora: true``: the output folder holds the merged
model, the adapter in ``adapter/``); an adapter saved otherwise is merged with ``stateguard merge --adapter DIR --out
DIR``. :func:`refuse_adapter_only` is the one check the serving, evaluation and RL entry points run on a model folder.
"""

from __future__ import annotations

from pathlib import Path

ADAPTER_CONFIG = "adapter_config.json"
WEIGHT_FILES = (
    "model.safetensors", "model.safetensors.index.json", "pytorch_model.bin", "pytorch_model.bin.index.json",
)  # fmt: skip
"""The files of a transformers checkpoint's weights (one file, or the index of shards)."""


def is_adapter_only(path: str | Path) -> bool:
    """True when ``path`` is a folder with ``adapter_config.json`` and none of :data:`WEIGHT_FILES`."""
    folder = Path(path)
    return (folder / ADAPTER_CONFIG).is_file() and not any((folder / name).is_file() for name in WEIGHT_FILES)


def adapter_only_problem(path: str | Path) -> str | None:
    """Why ``path`` cannot be loaded as a model and the fix (the merge command), or None when it is no adapter-only
    folder."""
    if not is_adapter_only(path):
        return None
    folder = Path(path)
    return (
        f"{folder} holds a LoRA adapter only ({ADAPTER_CONFIG}, no model weights), which vLLM and transformers do "
        f"not load as a model; merge it into its base model first: stateguard merge --adapter {folder} "
        f"--out {folder}-merged"
    )


def refuse_adapter_only(path: str | Path, what: str = "model") -> None:
    """Raise ``ValueError`` (one line: the folder, why, the merge command) when ``path`` holds a LoRA adapter only.
    ``what`` names the argument in the message (e.g. ``--checkpoint``)."""
    problem = adapter_only_problem(path)
    if problem is not None:
        raise ValueError(f"{what} {problem}")
