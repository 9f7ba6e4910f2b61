"""The one place where heavy optional dependencies are gated.

``is_X_available()`` never imports the package (``importlib.util.find_spec``), so it is cheap and safe on a machine
where importing it would fail (vLLM pins a CUDA torch and is never installed on CPU machines).
``require(name)`` raises an ``ImportError`` naming the extra to install.
"""

from __future__ import annotations

import importlib.util
from functools import cache

# import name -> (pip extra that provides it, what it is for)
OPTIONAL_DEPENDENCIES: dict[str, tuple[str, str]] = {
    "vllm": ("vllm", "GPU generation and serving (CUDA only)"),
    "deepspeed": ("deepspeed", "ZeRO-2/3 training"),
    "trl": ("train", "SFT and GRPO/DAPO trainers"),
    "transformers": ("train", "models and tokenizers"),
    "peft": ("train", "LoRA adapters"),
    "datasets": ("train", "dataset export"),
    "accelerate": ("train", "launching and distributed training"),
    "torch": ("train", "tensors and models"),
    "gymnasium": ("train", "the Gymnasium environments (envs/)"),
    "llguidance": ("train", "grammar-constrained decoding of in-process models (harness.grammar)"),
    "gguf": ("train", "converting SmolLM2's GGUF file (stateguard model smollm2)"),
    "jupyter_client": ("dev", "the ipykernel reference in scripts/bench_sandbox.py"),
    "fastapi": ("serving", "the CPU stand-in server (transformers serve)"),
    "uvicorn": ("serving", "the CPU stand-in server (transformers serve)"),
    "ray": ("ray", "the ray executor of synthesis and evaluation (executor: ray)"),
    "trackio": ("tracking", "experiment tracking with trackio (report_to: trackio)"),
    "tensorboard": ("tracking", "experiment tracking with TensorBoard (report_to: tensorboard)"),
}


@cache
def is_available(name: str) -> bool:
    return importlib.util.find_spec(name) is not None


def is_vllm_available() -> bool:
    return is_available("vllm")


def is_deepspeed_available() -> bool:
    return is_available("deepspeed")


def is_trl_available() -> bool:
    return is_available("trl")


def require(name: str) -> None:
    """Raise ``ImportError`` naming the extra to install when ``name`` is not importable."""
    if is_available(name):
        return
    extra, purpose = OPTIONAL_DEPENDENCIES.get(name, (None, "this feature"))
    hint = f"pip install -c constraints.txt -e '.[{extra}]'" if extra else f"pip install {name}"
    raise ImportError(f"{name} is required for {purpose} but is not installed. Install it with: {hint}")
