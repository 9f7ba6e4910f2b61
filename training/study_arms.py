"""The study's arms: how each manager is built (trained, for the model arms) and served.

:data:`ARMS` maps an arm name to its :class:`Arm`. Training arms launch the real launchers as subprocesses
(``scripts/sft.py``, ``scripts/rl.py``, through :meth:`training.study.Study.launch`); :func:`train_arm` trains one
once and leaves its marker ``OUT/arms/<arm>/train.json``. Every model arm is served as the ``llm`` manager policy
over its checkpoint (:func:`model_policy`).
"""

from __future__ import annotations

import importlib.util
import json
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from harness.llm import HFChatBackend, Message
from training.pipeline import ROOT
from training.prompt_view import view
from training.study_data import sft_dataset

if TYPE_CHECKING:
    from training.study import Study

logger = logging.getLogger(__name__)

MARKER = "train.json"


@dataclass(frozen=True)
class Arm:
    """One manager of the study: how it is trained (``train`` None: it is not) and whether a model answers."""

    description: str
    model: bool
    train: Callable[[Study, str], dict[str, Any]] | None = None
    needs: tuple[str, ...] = ()


# ---------------------------------------------------------------- inference
def model_policy(path: str | Path, max_new_tokens: int, prompt_view: str = "full") -> Any:
    """The ``llm`` manager policy over the checkpoint ``path`` (in process, prefix-cached), seeing ``prompt_view``."""
    from harness.manager.llm_policy import LLMPolicy

    class ViewedPolicy(LLMPolicy):
        def messages(self, inp: Any) -> list[Message]:
            return view(super().messages(inp), None, prompt_view)[0]

    policy = ViewedPolicy(HFChatBackend(str(path), max_new_tokens=max_new_tokens), name="llm")
    policy.tools = view([], policy.tools, prompt_view)[1]
    return policy


def _sft_args(study: Study, arm: str, model: str, dataset: Path, output: Path) -> list[str]:
    return [
        "--model_name_or_path", model, "--dataset_path", str(dataset), "--output_dir", str(output),
        *study.config.sft_args,
    ]  # fmt: skip


def train_sft(study: Study, arm: str) -> dict[str, Any]:
    """SFT of SmolLM2 (full or LoRA, merged afterwards) or of the tiny Qwen3, on the training split."""
    config = study.config
    data = sft_dataset(study)
    if arm == "tiny-sft":
        output = study.model_dir(arm)
        study.launch(arm, "sft.py", config.sft_tiny_config, _sft_args(study, arm, "tiny", data, output))
        return {"checkpoint": str(output)}
    smollm2 = str(config.path(config.smollm2_dir))
    if arm == "sft-full":
        output = study.model_dir(arm)
        study.launch(arm, "sft.py", config.sft_full_config, _sft_args(study, arm, smollm2, data, output))
        return {"checkpoint": str(output)}
    adapter = study.arm_dir(arm) / "adapter"
    study.launch(arm, "sft.py", config.sft_lora_config, _sft_args(study, arm, smollm2, data, adapter))
    merge_lora(adapter, study.model_dir(arm))
    return {"checkpoint": str(study.model_dir(arm)), "adapter": str(adapter)}


def merge_lora(adapter: Path, out: Path) -> Path:
    """Fold a trained LoRA adapter into its base model and save a plain checkpoint (weights, tokenizer, template)."""
    from peft import AutoPeftModelForCausalLM
    from transformers import AutoTokenizer

    model = AutoPeftModelForCausalLM.from_pretrained(str(adapter)).merge_and_unload()
    model.save_pretrained(out, safe_serialization=True)
    AutoTokenizer.from_pretrained(str(adapter)).save_pretrained(out)
    return out


def dapo_available() -> str | None:
    """None when DAPO can run here, else why not (the arm is then reported as unavailable)."""
    if importlib.util.find_spec("training.rl") is None or not (ROOT / "scripts" / "rl.py").is_file():
        return "DAPO arm unavailable: training.rl / scripts/rl.py are not installed yet"
    return None


def train_dapo(study: Study, arm: str) -> dict[str, Any]:
    """DAPO from the sft-full checkpoint on the training split's episodes (``scripts/rl.py``)."""
    reason = dapo_available()
    if reason is not None:
        return {"unavailable": reason}
    output = study.model_dir(arm)
    args = ["--model_name_or_path", str(study.model_dir("sft-full")), "--pool", str(study.data_dir("train"))]
    args += ["--prompt_view", study.config.prompt_view]  # the rollouts see what the SFT taught and the arms serve
    study.launch(arm, "rl.py", study.config.rl_config, [*args, "--output_dir", str(output), *study.config.rl_args])
    return {"checkpoint": str(output)}


ARMS: dict[str, Arm] = {
    "none": Arm("no manager (plain worker)", model=False),
    "rule": Arm("deterministic rule verifier, no model", model=False),
    "prompt": Arm("SmolLM2-135M-Instruct, prompt only", model=True),
    "sft-lora": Arm("SmolLM2 after SFT, LoRA adapters (merged)", model=True, train=train_sft),
    "sft-full": Arm("SmolLM2 after SFT, full fine-tune", model=True, train=train_sft),
    "sft-dapo": Arm("SmolLM2 after SFT (full), then DAPO", model=True, train=train_dapo, needs=("sft-full",)),
    "tiny-sft": Arm("tiny random-init Qwen3 after the same SFT", model=True, train=train_sft),
}
"""Arm name -> how it is built. Every model arm is the ``llm`` manager policy over its checkpoint."""


def train_arm(study: Study, arm: str) -> dict[str, Any]:
    """Train ``arm`` once (marker ``OUT/arms/<arm>/train.json``); returns its figures (``unavailable`` if it can't)."""
    marker = study.arm_dir(arm) / MARKER
    if marker.is_file():
        return json.loads(marker.read_text())
    spec = ARMS[arm]
    if spec.train is None:
        return {}
    start = time.perf_counter()
    result = spec.train(study, arm)
    if "unavailable" in result:
        logger.warning("%s", result["unavailable"])
        return result  # no marker: a later run tries again
    result["seconds"] = round(time.perf_counter() - start, 1)
    marker.write_text(json.dumps(result, indent=2, sort_keys=True) + "\n")
    return result
