"""The study's config (:class:`StudyConfig`): its design, declared before any held-out task is drawn.

A YAML file of these fields (``training/study/configs/smollm2.yaml``) is the study's declaration: the frozen test set
(:attr:`~StudyConfig.testset`, drawn once from a domain and a question writer no training data uses, its ids and
hashes committed as :attr:`~StudyConfig.testset_record`), the arms, the primary metrics, the training recipe and,
per recipe choice, the split it was made on (:attr:`~StudyConfig.choices`: never the test set).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.manager.prompt_view import check_prompt_view
from harness.tracking import check_report_to_choice
from harness.yaml_config import load_yaml_config, type_problems
from training.pipeline import ROOT

PRIMARY_METRICS = ("repair_f1", "false_repair_rate", "turn_accuracy", "dcr", "episode_reward")
"""The episode metrics a config may name as primary (:mod:`training.study.episode_metrics` computes each)."""

CHOICE_SPLITS = ("train", "validation", "a priori")
"""Where a recipe choice may have been made: the training data's splits, or before any data (never the test set)."""


@dataclass
class StudyConfig:
    """Everything the study runs; paths are relative to the repository root unless absolute."""

    out: str = field(default="runs/study-smollm2", metadata={"help": "Output folder of every stage."})
    smollm2_dir: str = field(
        default="runs/models/smollm2-135m",
        metadata={"help": "The converted SmolLM2 (built here when missing: stateguard model smollm2 --out DIR)."},
    )
    edition: int = field(default=1, metadata={"help": "This edition's number (recorded in the test set's record)."})
    arms: list[str] = field(
        default_factory=lambda: ["none", "rule", "read", "gold-specs", "prompt", "sft", "sft-dapo"],
        metadata={"help": "Managers to compare (names of training.study.arms.ARMS), baselines first."},
    )
    train_synthesis: dict[str, Any] = field(
        default_factory=dict,
        metadata={"help": "SynthesisConfig fields of the training data (training domains, question writer a)."},
    )
    testset: dict[str, Any] = field(
        default_factory=dict,
        metadata={"help": "SynthesisConfig fields of the frozen test set: a domain and a question writer that the "
                  "training data never uses, and its own seed."},
    )  # fmt: skip
    test_fault_types: list[str] | None = field(
        default=None,
        metadata={"help": "Fault types the test set's faulted episodes are drawn from (each detectable: the gold's "
                  "checks reveal it at its turn); null: every type."},
    )  # fmt: skip
    test_faults_per_task: int = field(
        default=2, metadata={"help": "Faulted episodes per test task (its detectable faults, a seeded draw)."}
    )
    min_faulted: int = field(default=30, metadata={"help": "Faulted episodes the test set must hold."})
    min_clean: int = field(default=15, metadata={"help": "Clean episodes (one per task) the test set must hold."})
    testset_record: str = field(
        default="docs/study/testset.json",
        metadata={"help": "The frozen test set's record (task ids, hashes, faults, editions that have seen it). "
                  "Written at the first draw; every later run must draw exactly it, or stops."},
    )  # fmt: skip
    model_tasks: int | None = field(
        default=None,
        metadata={"help": "Test tasks the model arms play (the first N of the frozen set, each with its clean and "
                  "faulted episodes); null: all. The baselines always play every task."},
    )  # fmt: skip
    primary_metrics: list[str] = field(
        default_factory=lambda: ["repair_f1", "false_repair_rate", "turn_accuracy", "dcr"],
        metadata={"help": f"The primary episode metrics, named before the test set is drawn: {PRIMARY_METRICS}."},
    )
    choices: dict[str, str] = field(
        default_factory=dict,
        metadata={"help": f"Each recipe choice -> the split it was made on ({', '.join(CHOICE_SPLITS)})."},
    )
    sft_config: str = field(default="configs/sft/smollm2-lora-cpu.yaml", metadata={"help": "SFT config (LoRA)."})
    sft_args: list[str] = field(default_factory=list, metadata={"help": "Overrides for the scripts/sft.py launch."})
    rl_config: str = field(default="configs/rl/smollm2-checks-cpu.yaml", metadata={"help": "DAPO config."})
    rl_args: list[str] = field(default_factory=list, metadata={"help": "Overrides for the scripts/rl.py launch."})
    accelerate_config: str = field(default="configs/accelerate/cpu.yaml", metadata={"help": "accelerate config."})
    prompt_view: str = field(
        default="bare",
        metadata={"help": "What the trained arms see, in SFT data and served alike (saved in their manager.json): "
                  "full (the check-writing system prompt first) or bare (the request alone)."},
    )  # fmt: skip
    prompt_arm_view: str = field(
        default="full", metadata={"help": "The view the untrained prompt arm is served with (its manager.json)."}
    )
    manager_max_tokens: int = field(
        default=320, metadata={"help": "Tier 1's reply cap in tokens (saved in every model arm's manager.json)."}
    )
    runtime: dict[str, Any] = field(default_factory=dict, metadata={"help": "RuntimeConfig fields of the episodes."})
    workers: int = field(default=2, metadata={"help": "Episodes played at a time by the baseline arms."})
    model_workers: int = field(default=1, metadata={"help": "Episodes played at a time by a model arm."})
    decision_points: int = field(
        default=0,
        metadata={"help": "Test decision points of the diagnostic (the gold runs the checks, the digest rule and "
                  "rule decide; 0: none)."},
    )  # fmt: skip
    record_only: bool = field(
        default=False,
        metadata={"help": "Write the record from the arms whose episodes are finished and stop (an interim record "
                  "of a study still running: the other arms are listed as not played yet); trains and plays nothing."},
    )  # fmt: skip
    isolation: str = field(default="bwrap", metadata={"help": "Sandbox isolation of synthesis and episodes."})
    seed: int = field(default=0, metadata={"help": "Seed of the fault draw and the bootstrap."})
    n_resamples: int = field(default=10_000, metadata={"help": "Bootstrap resamples of every interval."})
    report_to: str = field(
        default="auto",
        metadata={"help": "Tracker of the training launches: auto (trackio outside CI, none in CI) | trackio | "
                  "tensorboard | wandb | none."},
    )  # fmt: skip

    def __post_init__(self) -> None:
        from synthesis.config import SynthesisConfig
        from synthesis.domains.catalog import TRAINING_DOMAINS
        from synthesis.faults import FAULT_TYPES
        from training.study.arms import ARMS

        check_report_to_choice(self.report_to)
        unknown = [a for a in self.arms if a not in ARMS]
        if unknown or not self.arms:
            raise ValueError(f"arms: unknown arm(s) {unknown} (or none given); valid arms: {', '.join(ARMS)}")
        for arm in self.arms:
            if missing := [n for n in ARMS[arm].needs if n not in self.arms]:
                raise ValueError(f"arms: {arm} is trained from {missing[0]}; add {missing[0]} to arms")
        valid = sorted(f.name for f in dataclasses.fields(SynthesisConfig))
        problems = []
        for section in ("train_synthesis", "testset"):
            values = getattr(self, section)
            if stray := sorted(set(values) - set(valid)):
                problems.append(f"{section}: unknown key(s) {stray}; valid keys: {valid}")
            problems += type_problems(SynthesisConfig, values, prefix=f"{section}.")
        if problems:
            raise ValueError("; ".join(problems) + "; fix these SynthesisConfig fields.")
        train_domains = set(self.train_synthesis.get("domains", TRAINING_DOMAINS))
        test_domains = set(self.testset.get("domains", []))
        if not test_domains or test_domains & train_domains:
            raise ValueError(
                f"testset.domains={sorted(test_domains)}: name the held-out domain(s), none of the training "
                f"domains {sorted(train_domains)}"
            )
        train_writer = self.train_synthesis.get("question_writer", "a")
        if self.testset.get("question_writer", "a") == train_writer:
            raise ValueError(
                f"testset.question_writer={train_writer!r} is the training data's; the test set is worded by the "
                "other writer (question_writer: b)"
            )
        if "hier_checks" not in self.train_synthesis.get("formats", ["hier_checks"]):
            raise ValueError("train_synthesis.formats: the model arms train on hier_checks samples; add hier_checks")
        if self.test_fault_types is not None and (bad := sorted(set(self.test_fault_types) - set(FAULT_TYPES))):
            raise ValueError(f"test_fault_types: unknown {bad}; valid fault types: {sorted(FAULT_TYPES)}")
        if bad := [m for m in self.primary_metrics if m not in PRIMARY_METRICS]:
            raise ValueError(f"primary_metrics: unknown {bad}; valid: {', '.join(PRIMARY_METRICS)}")
        if bad := {k: v for k, v in self.choices.items() if v not in CHOICE_SPLITS}:
            raise ValueError(f"choices: {bad} name no allowed split; each choice is made on one of {CHOICE_SPLITS}")
        check_prompt_view(self.prompt_view)
        check_prompt_view(self.prompt_arm_view)
        for name in ("test_faults_per_task", "manager_max_tokens", "n_resamples", "workers", "model_workers"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name}={getattr(self, name)} must be at least 1")
        for name in ("min_faulted", "min_clean", "decision_points"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name}={getattr(self, name)} must be 0 or more")
        if self.model_tasks is not None and self.model_tasks < 1:
            raise ValueError(f"model_tasks={self.model_tasks} must be at least 1 (or null: every test task)")

    @classmethod
    def from_yaml(cls, path: str | Path, **overrides: Any) -> StudyConfig:
        return load_yaml_config(cls, path, "study", "training/study/configs/smollm2-mini.yaml", **overrides)

    def path(self, value: str) -> Path:
        path = Path(value)
        return path if path.is_absolute() else ROOT / path
