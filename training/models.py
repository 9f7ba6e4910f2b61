"""The embedded default model: a tiny, randomly initialised Qwen3ForCausalLM with the real Qwen3 tokenizer.

Every CPU config trains this model; full-scale configs name ``Qwen/Qwen3-8B`` instead. It has Qwen3's architecture
and vocabulary (151,936 embedding rows, the offline tokenizer of ``harness.tokenizer`` and this project's chat
template), so everything that runs on it (templates, masks, tool-call parsing, checkpoints) runs unchanged on the
real model. Nothing is downloaded.

    build_tiny_qwen3("runs/tiny-qwen3", seed=0)          # or: stateguard model tiny --out runs/tiny-qwen3

The folder holds ``config.json``, ``generation_config.json``, ``model.safetensors`` (float32), the tokenizer files
(``tokenizer.json``, ``tokenizer_config.json``, ``chat_template.jinja``) and ``stateguard_tiny.json``, a manifest
written last: its presence marks a complete build. Building into a folder that already holds a complete build with
the same seed and config does nothing; a different seed or config there is an error (never a silent overwrite).
The same seed always gives bit-identical weights.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import shutil
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from harness.import_utils import require
from harness.tokenizer import QWEN3_ADDED_TOKENS, QWEN3_VOCAB_SIZE

if TYPE_CHECKING:
    from transformers import Qwen3Config, Qwen3ForCausalLM

logger = logging.getLogger(__name__)

MANIFEST_NAME = "stateguard_tiny.json"
MANIFEST_VERSION = 1
BOS_TOKEN_ID = 151643  # Qwen3 config.json: bos_token_id (<|endoftext|>); the tokenizer adds no bos
EOS_TOKEN_ID = 151645  # <|im_end|>
PAD_TOKEN_ID = 151643  # <|endoftext|>
TOKENIZER_SIZE = QWEN3_ADDED_TOKENS[-1][0] + 1  # 151,669 ids; the embedding must cover them


@dataclass
class TinyQwen3Config:
    """Shape of the tiny Qwen3. Defaults: 2.56 M parameters besides the 19.4 M of the (tied) embedding."""

    hidden_size: int = field(default=128, metadata={"help": "Width of the residual stream."})
    num_hidden_layers: int = field(default=4, metadata={"help": "Number of decoder layers."})
    num_attention_heads: int = field(default=4, metadata={"help": "Query heads per layer."})
    num_key_value_heads: int = field(default=2, metadata={"help": "Key/value heads (grouped-query attention)."})
    head_dim: int = field(default=32, metadata={"help": "Width of one attention head."})
    intermediate_size: int = field(default=1536, metadata={"help": "Width of the SwiGLU feed-forward layer."})
    max_position_embeddings: int = field(default=40_960, metadata={"help": "Longest context (Qwen3-8B: 40,960)."})
    rope_theta: float = field(default=1_000_000.0, metadata={"help": "RoPE base frequency (Qwen3: 1e6)."})
    rms_norm_eps: float = field(default=1e-6, metadata={"help": "RMSNorm epsilon (Qwen3: 1e-6)."})
    initializer_range: float = field(default=0.02, metadata={"help": "Std of the normal weight init."})
    tie_word_embeddings: bool = field(default=True, metadata={"help": "Share the embedding with the LM head."})
    vocab_size: int = field(
        default=QWEN3_VOCAB_SIZE, metadata={"help": "Embedding rows; Qwen3 pads its 151,669 tokens to 151,936."}
    )

    def __post_init__(self) -> None:
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if f.type in ("int", "float") and not value > 0:
                raise ValueError(f"{f.name}={value} must be positive; pass a positive number")
        if self.num_attention_heads % self.num_key_value_heads:
            raise ValueError(
                f"num_attention_heads={self.num_attention_heads} is not a multiple of num_key_value_heads="
                f"{self.num_key_value_heads}: grouped-query attention shares each key/value head between a whole "
                "number of query heads; choose num_key_value_heads dividing num_attention_heads"
            )
        if self.vocab_size < TOKENIZER_SIZE:
            raise ValueError(
                f"vocab_size={self.vocab_size} is smaller than the tokenizer's {TOKENIZER_SIZE} ids, so "
                f"<|im_end|> and the tool tokens would have no embedding; use vocab_size >= {TOKENIZER_SIZE} "
                f"(Qwen3: {QWEN3_VOCAB_SIZE})"
            )

    @classmethod
    def from_overrides(cls, **overrides: Any) -> TinyQwen3Config:
        """The config with ``overrides`` applied; an unknown name is a ``ValueError`` listing the valid ones."""
        valid = [f.name for f in dataclasses.fields(cls)]
        unknown = sorted(set(overrides) - set(valid))
        if unknown:
            raise ValueError(f"unknown tiny Qwen3 setting(s) {unknown}; valid settings: {', '.join(valid)}")
        return cls(**overrides)

    def to_hf(self) -> Qwen3Config:
        """The ``transformers.Qwen3Config`` with Qwen3's token ids."""
        require("transformers")
        from transformers import Qwen3Config

        settings = dataclasses.asdict(self)
        rope_theta = settings.pop("rope_theta")
        return Qwen3Config(
            **settings,
            rope_parameters={"rope_type": "default", "rope_theta": rope_theta},
            hidden_act="silu",
            attention_bias=False,
            use_sliding_window=False,
            bos_token_id=BOS_TOKEN_ID,
            eos_token_id=EOS_TOKEN_ID,
            pad_token_id=PAD_TOKEN_ID,
        )


def init_tiny_qwen3(config: TinyQwen3Config | None = None, *, seed: int = 0) -> Qwen3ForCausalLM:
    """A freshly initialised tiny Qwen3 (float32). Deterministic in ``seed``; the global RNG is left untouched."""
    require("torch")
    import torch
    from transformers import Qwen3ForCausalLM

    hf_config = (config or TinyQwen3Config()).to_hf()
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = Qwen3ForCausalLM(hf_config)
    return model.float().eval()


def parameter_counts(model: Qwen3ForCausalLM) -> dict[str, int]:
    """``total`` (shared tensors once), ``embedding`` (input embedding and an untied LM head) and ``non_embedding``."""
    total = sum(p.numel() for p in model.parameters())
    embedding = model.get_input_embeddings().weight.numel()
    if not model.config.tie_word_embeddings:
        embedding += model.get_output_embeddings().weight.numel()
    return {"total": total, "embedding": embedding, "non_embedding": total - embedding}


def read_manifest(directory: str | Path, name: str = MANIFEST_NAME) -> dict[str, Any] | None:
    """The manifest ``name`` of a complete build in ``directory`` (default: the tiny model's), or ``None`` when there
    is none or a file it lists is gone."""
    path = Path(directory) / name
    if not path.is_file():
        return None
    try:
        manifest = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError:
        logger.warning("%s is not valid JSON: treating %s as incomplete", path, directory)
        return None
    missing = [name for name in manifest.get("files", {}) if not (Path(directory) / name).is_file()]
    return None if missing else manifest


def build_tiny_qwen3(
    out_dir: str | Path, *, seed: int = 0, cache_dir: str | Path | None = None, **overrides: Any
) -> Path:
    """Build, or find already built, the tiny Qwen3 with tokenizer and chat template in ``out_dir``.

    Args:
        out_dir: target folder; created. If it already holds a complete build with the same seed and config,
            nothing is done. Any other non-empty folder is refused with a ``ValueError``.
        seed: torch seed of the weight initialisation.
        cache_dir: tokenizer cache folder (see ``harness.tokenizer.build_qwen3_tokenizer``).
        overrides: fields of ``TinyQwen3Config`` (e.g. ``hidden_size=64``).

    Returns the folder. Counts, sizes and timing are in its ``stateguard_tiny.json`` (see ``read_manifest``).
    """
    config = TinyQwen3Config.from_overrides(**overrides)
    out_dir = Path(out_dir)
    wanted = {"seed": seed, "config": dataclasses.asdict(config)}
    if _check_existing(out_dir, wanted):
        logger.info("%s already holds the tiny Qwen3 (seed %d): nothing to do", out_dir, seed)
        return out_dir

    from transformers import GenerationConfig

    from harness.tokenizer import build_qwen3_tokenizer, save_qwen3_tokenizer

    start = time.perf_counter()
    tokenizer = build_qwen3_tokenizer(cache_dir)
    model = init_tiny_qwen3(config, seed=seed)
    model.generation_config = GenerationConfig(
        bos_token_id=BOS_TOKEN_ID,
        eos_token_id=[EOS_TOKEN_ID, PAD_TOKEN_ID],  # as Qwen3's generation_config.json: stop at either
        pad_token_id=PAD_TOKEN_ID,
    )

    out_dir.parent.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}.", dir=out_dir.parent))
    try:
        scratch.chmod(0o755)
        model.save_pretrained(scratch, safe_serialization=True)
        save_qwen3_tokenizer(tokenizer, scratch)
        files = {p.name: p.stat().st_size for p in sorted(scratch.iterdir()) if p.is_file()}
        manifest = {
            "manifest_version": MANIFEST_VERSION,
            **wanted,
            "architecture": "Qwen3ForCausalLM",
            "parameters": parameter_counts(model),
            "files": files,
            "build_seconds": round(time.perf_counter() - start, 3),
        }
        (scratch / MANIFEST_NAME).write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
        if out_dir.exists():
            out_dir.rmdir()  # empty: checked by _check_existing
        os.replace(scratch, out_dir)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    logger.info("wrote the tiny Qwen3 to %s in %.2f s", out_dir, manifest["build_seconds"])
    return out_dir


def _check_existing(out_dir: Path, wanted: dict[str, Any]) -> bool:
    """True when ``out_dir`` already holds this exact build; raise when it holds anything else."""
    if not out_dir.exists():
        return False
    if not out_dir.is_dir():
        raise ValueError(f"--out {out_dir} is a file, not a folder; choose a folder path")
    manifest = read_manifest(out_dir)
    if manifest is None:
        if any(out_dir.iterdir()):
            raise ValueError(
                f"{out_dir} is not empty and holds no complete tiny model ({MANIFEST_NAME} missing or files gone); "
                "choose another folder or delete this one"
            )
        return False
    found = {"seed": manifest.get("seed"), **(manifest.get("config") or {})}
    requested = {"seed": wanted["seed"], **wanted["config"]}
    differences = [
        f"{key}={found.get(key)!r} (requested {value!r})"
        for key, value in requested.items()
        if found.get(key) != value
    ]
    if differences:
        raise ValueError(
            f"{out_dir} already holds a tiny model built with {', '.join(differences)}; "
            "choose another folder or delete this one"
        )
    return True
