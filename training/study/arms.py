"""The study's arms: what each manager is, how a model arm is trained, and the ``stateguard evaluate`` command that
plays it.

:data:`ARMS` maps an arm name to its :class:`Arm`. Baselines: ``none`` (no manager), ``rule`` (a deterministic
verifier of executions, no model), ``read`` (the question reader: check specs from the turn's words, no model) and
``gold-specs`` (**an oracle upper bound**: the gold's own specs run by tier 0, behind ``--oracle_checks``). Model
arms: ``prompt`` (SmolLM2 as converted), ``sft`` (LoRA SFT on the training split's ``hier_checks`` samples, merged)
and ``sft-dapo`` (DAPO over check activations from ``sft``). Every model arm is the check-writing hierarchical manager
served from its checkpoint folder as a user serves it, ``--managers hier:llm-hf:DIR``: what it needs at inference
(the view, the grammar, the reply cap) is the folder's ``manager.json``
(:mod:`harness.manager.checkpoint_settings`), written by the SFT launcher and kept by merge and DAPO; the prompt arm's
folder links SmolLM2's files beside its own ``manager.json``.

Training launches the real launchers as subprocesses (``accelerate launch scripts/sft.py``, ``scripts/rl.py``;
:meth:`training.study.layout.Study.launch`) once per arm, leaving the marker ``OUT/arms/<arm>/train.json``.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from harness.manager.checkpoint_settings import ManagerSettings, read_manager_settings, write_manager_settings
from training.study.layout import Study

logger = logging.getLogger(__name__)

MARKER = "train.json"


@dataclass(frozen=True)
class Arm:
    """One manager of the study: its description, the manager spec it is evaluated with (``{model}`` stands for its
    checkpoint folder), whether it is an oracle, and how it is built (``train`` None: it is not trained)."""

    description: str
    spec: str
    model: bool = False
    oracle: bool = False
    train: Callable[[Study, str], dict[str, Any]] | None = None
    needs: tuple[str, ...] = ()


def checks_settings(study: Study, prompt_view: str) -> ManagerSettings:
    """The serving settings of a check-writing model arm: tier 1 of ``hier`` writes checks under the checks grammar,
    greedy, seeing ``prompt_view``, replies capped at the study's ``manager_max_tokens``."""
    return ManagerSettings(
        policy="hier",
        writes="checks",
        prompt_view=prompt_view,
        constrained_decoding=True,
        legal_actions_only=False,
        max_new_tokens=study.config.manager_max_tokens,
        temperature=0.0,
    )


def prepare_prompt(study: Study, arm: str) -> dict[str, Any]:
    """The prompt arm's folder: SmolLM2's files linked, and its ``manager.json`` (the untrained model sees the full
    check-writing prompt: it has no other way to know the check kinds)."""
    source = study.config.path(study.config.smollm2_dir)
    target = study.model_dir(arm)
    target.mkdir(parents=True, exist_ok=True)
    for path in source.iterdir():
        link = target / path.name
        if path.name != "manager.json" and not link.exists():
            link.symlink_to(path.resolve())
    write_manager_settings(target, checks_settings(study, study.config.prompt_arm_view))
    return {"checkpoint": str(target), "base": str(source)}


def train_sft(study: Study, arm: str) -> dict[str, Any]:
    """LoRA SFT of SmolLM2 on the training split's ``hier_checks`` samples, seen through ``prompt_view``: the SFT
    launcher writes the checkpoint's ``manager.json`` (the check-writing hier manager, that view, the reply cap) and
    merges the adapter into ``OUT/arms/<arm>/model``. A checkpoint whose settings are not the study's stops it."""
    config = study.config
    args = [
        "--model_name_or_path", str(config.path(config.smollm2_dir)), "--dataset_path", str(study.data_dir("train")),
        "--output_dir", str(study.model_dir(arm)), "--merge_lora", "true", "--formats", "hier_checks",
        "--prompt_view", config.prompt_view, "--serve_max_new_tokens", str(config.manager_max_tokens),
        *config.sft_args,
    ]  # fmt: skip
    study.launch(arm, "sft.py", config.sft_config, args)
    found = read_manager_settings(study.model_dir(arm))
    wanted = checks_settings(study, config.prompt_view)
    if found != wanted:
        raise RuntimeError(
            f"{study.model_dir(arm)}: the SFT saved manager.json {found and found.to_dict()}, the study serves "
            f"{wanted.to_dict()}; fix the SFT config or the study's prompt_view / manager_max_tokens"
        )
    return {"checkpoint": str(study.model_dir(arm))}


def train_dapo(study: Study, arm: str) -> dict[str, Any]:
    """DAPO (``scripts/rl.py --format hier_checks``) from ``sft``'s checkpoint over the training split's check
    activations: the model writes the checks, tier 0 runs them and decides; sampled under the checkpoint's own
    ``manager.json`` (view, grammar, reply cap)."""
    config = study.config
    start = study.model_dir(ARMS[arm].needs[0])
    output = study.model_dir(arm)
    args = ["--model_name_or_path", str(start), "--pool", str(study.data_dir("train")), "--format", "hier_checks"]
    study.launch(arm, "rl.py", config.rl_config, [*args, "--output_dir", str(output), *config.rl_args])
    if read_manager_settings(output) is None:
        raise RuntimeError(f"{output}: DAPO left no manager.json; the checkpoint cannot be served as trained")
    return {"checkpoint": str(output), "start": str(start)}


ARMS: dict[str, Arm] = {
    "none": Arm("no manager (plain worker)", "none"),
    "rule": Arm("deterministic verifier of executions, no model", "rule"),
    "read": Arm("question reader: check specs from the turn's words, no model", "read"),
    "gold-specs": Arm("ORACLE upper bound: the gold's check specs, run by tier 0", "hier-checks:gold", oracle=True),
    "prompt": Arm(
        "SmolLM2-135M-Instruct, prompt only, writing checks", "hier:llm-hf:{model}", True, train=prepare_prompt
    ),
    "sft": Arm("SmolLM2 after LoRA SFT on the check-writing samples", "hier:llm-hf:{model}", True, train=train_sft),
    "sft-dapo": Arm(
        "SmolLM2 after SFT, then DAPO over check activations",
        "hier:llm-hf:{model}",
        True,
        train=train_dapo,
        needs=("sft",),
    ),
}
"""Arm name -> what it is, the manager spec it is evaluated with and how it is built."""


def manager_spec(study: Study, arm: str) -> str:
    """The ``--managers`` value of ``arm`` (a model arm's checkpoint folder filled in)."""
    return ARMS[arm].spec.format(model=study.model_dir(arm))


def train_arm(study: Study, arm: str) -> dict[str, Any]:
    """Build ``arm`` once (marker ``OUT/arms/<arm>/train.json``); returns its figures."""
    marker = study.arm_dir(arm) / MARKER
    if marker.is_file():
        return json.loads(marker.read_text())
    spec = ARMS[arm]
    if spec.train is None:
        return {}
    start = time.perf_counter()
    result = spec.train(study, arm)
    result["seconds"] = round(time.perf_counter() - start, 1)
    marker.write_text(json.dumps(result, indent=2, sort_keys=True) + "\n")
    return result
