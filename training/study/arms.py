"""The study's arms: how each manager is built (trained, for the model arms) and served.

:data:`ARMS` maps an arm name to its :class:`Arm`. Training arms launch the real launchers as subprocesses
(``scripts/sft.py`` through :mod:`training.study.sft`, ``scripts/rl.py``, with
:meth:`training.study.driver.Study.launch`); :func:`train_arm` trains one
once and leaves its marker ``OUT/arms/<arm>/train.json``. A model arm is served by its :attr:`Arm.serve` over its
checkpoint: the flat ``llm`` manager policy (:func:`model_policy`), or, for ``hier``, the hierarchical manager whose
tier 1 is the checkpoint (:func:`hier_model_policy`).

``hier`` is ``sft-lora`` on the other sample format: the same LoRA config, ``sft_args`` (steps, sample limits,
stratification) and merge, on the training split's ``hier`` rows (``--formats hier``: tier 1's decision
conversations) instead of the ``flat`` ones (``scripts/sft.py``'s default, which every other arm keeps).

Prompt view and ``hier``: one rule for both formats. :func:`harness.manager.prompt_view.view` is applied to every row
of the SFT data (:func:`training.study.data.sft_dataset`) and to every served call, flat or hier, so under ``bare`` the
hier model is trained and asked without :data:`~harness.manager.hier_prompts.HIER_SYSTEM` and without the tier-1
tools block: only the decision prompt (the public turn, the draft state, tier 0's check results, the legal decisions
and budget) and its own calls. Under ``full`` it sees exactly what :class:`~harness.manager.hier.HierPolicy` sends.

Usage: every served model policy counts its model calls and the prompt / completion tokens its backend reported
(``calls``, ``prompt_tokens``, ``completion_tokens``: :class:`~harness.manager.llm_policy.LLMPolicy`'s own counters;
the hier policy exposes its tier-1 :attr:`~harness.manager.hier.HierPolicy.stats` under the same names), read by
:func:`model_usage`.
"""

from __future__ import annotations

import importlib.util
import json
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.llm import HFChatBackend, Message
from harness.manager.prompt_view import view
from training.pipeline import ROOT
from training.study.data import sft_dataset
from training.study.layout import Study

logger = logging.getLogger(__name__)

MARKER = "train.json"
SFT_MODULE = "training.study.sft"
"""What the SFT arms launch: ``scripts/sft.py``'s arguments plus the study's ``--action_name_weight``."""


@dataclass(frozen=True)
class Arm:
    """One manager of the study: how it is trained (``train`` None: it is not) and whether a model answers."""

    description: str
    model: bool
    train: Callable[[Study, str], dict[str, Any]] | None = None
    needs: tuple[str, ...] = ()
    format: str = "flat"
    """The sample format it is trained on and answers in: ``flat`` (the ``llm`` manager's conversations; scored by
    teacher-forced exact match too), ``hier`` (tier 1's decision conversations of the hierarchical manager) or
    ``windowed`` (no manager actions: stateless hints to the worker at turn starts, so it plays the episodes only)."""
    decides: bool = True
    """Whether it takes manager actions, so plays the decision points (not ``none``, not ``windowed``)."""

    def serve(
        self,
        path: str | Path,
        max_new_tokens: int,
        prompt_view: str,
        constrained: bool = False,
        legal_only: bool = False,
        decide_after_probe: bool = False,
    ) -> Any:
        """The policy of this (model) arm over the checkpoint ``path``; ``constrained``: an arm that writes actions
        (flat, hier) decodes under the action grammar (:func:`harness.manager.model_settings.constrain_actions`), a
        flat one also under ``legal_only`` there and :func:`training.study.decoding.decide_after_probe` (the hier
        arm's tier 0 writes its checks and probes)."""
        factory = {"hier": hier_model_policy, "windowed": windowed_model_policy}.get(self.format, model_policy)
        policy = factory(path, max_new_tokens, prompt_view)
        if constrained and self.format != "windowed":
            from harness.manager.model_settings import constrain_actions
            from training.study.decoding import actions_now

            flat = self.format == "flat"
            probe_first = flat and decide_after_probe
            constrain_actions(
                policy, legal_only=flat and legal_only or probe_first, actions=actions_now if probe_first else None
            )
        return policy


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


def hier_model_policy(path: str | Path, max_new_tokens: int, prompt_view: str = "full") -> Any:
    """The ``hier`` manager whose tier 1 is the checkpoint ``path`` (in process, prefix-cached, replies of at most
    ``max_new_tokens``), its decision conversations seen through ``prompt_view`` (``bare``: no system prompt, no
    tools block, as in the hier SFT data). Tier 0 answers every other request without the model. Besides ``stats``
    it has ``calls``, ``prompt_tokens`` and ``completion_tokens`` (tier 1's), as the flat ``llm`` policy has."""
    from harness.manager.hier import HierPolicy

    class ViewedHierPolicy(HierPolicy):
        def messages(self, *args: Any) -> list[Message]:
            return view(super().messages(*args), None, prompt_view)[0]

        calls = property(lambda self: self.stats.calls)
        prompt_tokens = property(lambda self: self.stats.prompt_tokens)
        completion_tokens = property(lambda self: self.stats.completion_tokens)

    policy = ViewedHierPolicy(HFChatBackend(str(path), max_new_tokens=max_new_tokens), name="hier")
    policy.tools = view([], policy.tools, prompt_view)[1]
    return policy


def windowed_model_policy(path: str | Path, max_new_tokens: int, prompt_view: str = "full") -> Any:
    """The windowed ablation over the checkpoint ``path``: stateless hints from the last
    :data:`WINDOW_STEPS` steps (its own short system prompt in every view: it has no tools block to drop)."""
    from harness.manager.windowed import WindowedModelPolicy

    return WindowedModelPolicy(HFChatBackend(str(path), max_new_tokens=max_new_tokens), WINDOW_STEPS, name="windowed")


WINDOW_STEPS = 3
"""Steps the windowed arm sees (``windowed-hf:3:PATH``)."""


def model_usage(policy: Any) -> dict[str, int] | None:
    """A model policy's usage so far: ``calls`` (model calls), ``prompt_tokens`` and ``completion_tokens`` (as its
    backend reported them); None for a policy without them (no model)."""
    names = ("calls", "prompt_tokens", "completion_tokens")
    if not all(isinstance(getattr(policy, name, None), int) for name in names):
        return None
    return {name: int(getattr(policy, name)) for name in names}


def _sft_args(study: Study, arm: str, model: str, dataset: Path, output: Path) -> list[str]:
    """The SFT arguments (:data:`SFT_MODULE`) of ``arm``: the study's ``sft_args`` for all, ``--formats hier`` for a
    hier arm (the others train on ``flat``, the script's default)."""
    formats = ["--formats", "hier"] if ARMS[arm].format == "hier" else []
    return [
        "--model_name_or_path", model, "--dataset_path", str(dataset), "--output_dir", str(output),
        *study.config.sft_args, *formats,
    ]  # fmt: skip


def train_sft(study: Study, arm: str) -> dict[str, Any]:
    """SFT of SmolLM2 (full or LoRA, merged afterwards; ``hier``: LoRA on the hier rows) or of the tiny Qwen3, on the
    training split."""
    config = study.config
    data = sft_dataset(study)
    if arm == "tiny-sft":
        output = study.model_dir(arm)
        study.launch(arm, SFT_MODULE, config.sft_tiny_config, _sft_args(study, arm, "tiny", data, output))
        return {"checkpoint": str(output)}
    smollm2 = str(config.path(config.smollm2_dir))
    if arm == "sft-full":
        output = study.model_dir(arm)
        study.launch(arm, SFT_MODULE, config.sft_full_config, _sft_args(study, arm, smollm2, data, output))
        return {"checkpoint": str(output)}
    adapter = study.arm_dir(arm) / "adapter"
    # the adapter alone in arms/<arm>/adapter (merge_lora false), merged into the arm's model folder here
    args = ["--merge_lora", "false", *_sft_args(study, arm, smollm2, data, adapter)]
    study.launch(arm, SFT_MODULE, config.sft_lora_config, args)
    merge_lora(adapter, study.model_dir(arm))
    return {"checkpoint": str(study.model_dir(arm)), "adapter": str(adapter)}


def merge_lora(adapter: Path, out: Path) -> Path:
    """Fold a trained LoRA adapter into its base model and save a plain checkpoint (weights, tokenizer, template):
    :func:`training.merge.merge_adapter`, the weights as saved."""
    from training.merge import merge_adapter

    return merge_adapter(adapter, out)


def dapo_available() -> str | None:
    """None when DAPO can run here, else why not (the arm is then reported as unavailable)."""
    if importlib.util.find_spec("training.rl") is None or not (ROOT / "scripts" / "rl.py").is_file():
        return "DAPO arm unavailable: training.rl / scripts/rl.py are not installed yet"
    return None


def train_dapo(study: Study, arm: str) -> dict[str, Any]:
    """DAPO (``scripts/rl.py``) on the training split's decision points: its check activations where the gold repairs
    or confirms (:data:`training.study.decoding.DECISIONS`), the model taking over where the study's decision
    points hand over (``decision_takeover``). ``sft-dapo`` starts from ``sft-lora``'s merged checkpoint, ``rl-only``
    from SmolLM2 as converted (no SFT)."""
    from training.study.decoding import DECISIONS as DECISION_CONTROLS

    reason = dapo_available()
    if reason is not None:
        return {"unavailable": reason}
    output = study.model_dir(arm)
    start = study.model_dir(ARMS[arm].needs[0]) if ARMS[arm].needs else study.model_dir("prompt")
    args = ["--model_name_or_path", str(start), "--pool", str(study.data_dir("train"))]
    args += ["--prompt_view", study.config.prompt_view]  # the rollouts see what the SFT taught and the arms serve
    args += ["--event_types", "turn_end", "--gold_controls", *DECISION_CONTROLS, "--stratify_controls", "true"]
    args += ["--takeover", study.config.decision_takeover]
    study.launch(arm, "rl.py", study.config.rl_config, [*args, "--output_dir", str(output), *study.config.rl_args])
    return {"checkpoint": str(output), "start": str(start)}


ARMS: dict[str, Arm] = {
    "none": Arm("no manager (plain worker)", model=False, decides=False),
    "rule": Arm("deterministic rule verifier, no model (constraints as text: check_execution only)", model=False),
    "prompt": Arm("SmolLM2-135M-Instruct, prompt only", model=True),
    "sft-lora": Arm("SmolLM2 after SFT, LoRA adapters (merged): the study's `sft`", model=True, train=train_sft),
    "sft-full": Arm("SmolLM2 after SFT, full fine-tune", model=True, train=train_sft),
    "sft-dapo": Arm("SmolLM2 after SFT (sft-lora), then DAPO", model=True, train=train_dapo, needs=("sft-lora",)),
    "rl-only": Arm("SmolLM2 as converted, then DAPO (no SFT: the paper's w/o SFT)", model=True, train=train_dapo),
    "windowed": Arm(
        "SmolLM2 as converted, prompted for stateless hints from the last 3 steps (no states, no actions)",
        model=True,
        format="windowed",
        decides=False,
    ),
    "tiny-sft": Arm("tiny random-init Qwen3 after the same SFT", model=True, train=train_sft),
    "hier": Arm(
        "hierarchical manager: tier 0 bookkeeping, SmolLM2 LoRA SFT (as sft-lora) on the hier samples as tier 1",
        model=True,
        train=train_sft,
        format="hier",
    ),
}
"""Arm name -> how it is built and served (:meth:`Arm.serve`)."""


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
