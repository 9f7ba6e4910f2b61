"""``SynthesisConfig``: what ``stateguard synthesize`` builds (YAML keys = field names; configs/synthesis/*.yaml)."""

from __future__ import annotations

import os
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, Literal

from harness.checks.spec import CHECK_KINDS
from harness.executors import (
    EXECUTION_FIELDS,
    address_field,
    check_options,
    executor_field,
    ray_connect_timeout_field,
    ray_max_retries_field,
    ray_num_cpus_field,
)
from harness.yaml_config import load_yaml_config
from synthesis.samples import FORMATS, KINDS, LABELS


def _domain_names() -> list[str]:
    from synthesis.domains import DOMAINS

    return sorted(DOMAINS)


def _training_domains() -> list[str]:
    from synthesis.domains.catalog import TRAINING_DOMAINS

    return sorted(TRAINING_DOMAINS)


def _fault_type_names() -> list[str]:
    from synthesis.faults import FAULT_TYPES

    return sorted(FAULT_TYPES)


def _question_writers() -> list[str]:
    from synthesis.domains.wording import QUESTION_WRITERS

    return list(QUESTION_WRITERS)


RUN_FIELDS = ("workers", "teacher_workers", *EXECUTION_FIELDS)
"""Fields that choose where and how widely the work runs, never what it produces."""
OMITTED_AT_DEFAULT = {"question_writer": "a"}
"""Fields that :meth:`SynthesisConfig.output_dict` leaves out while they hold these values, so that a run at the
default has the fingerprint (resume) and the written config of a config without the field."""


@dataclass
class SynthesisConfig:
    domains: list[str] = field(
        default_factory=_training_domains,
        metadata={
            "help": "Built-in domains to generate tasks in (synthesis.domains); default: the six training domains "
            "(the held-out domain, logistics, is left to evaluation)."
        },
    )
    tasks_per_domain: int = field(default=2, metadata={"help": "Generated tasks per domain (0: none)."})
    n_turns: list[int] = field(
        default_factory=lambda: [6, 10],
        metadata={"help": "[min, max] turns of a generated task (6..30); each task draws one from its seed."},
    )
    seed: int = field(default=0, metadata={"help": "Base seed: task seeds, turn counts and fault sampling."})
    task_dirs: list[str] = field(
        default_factory=list, metadata={"help": "Imported multi_turn task folders (run like generated ones)."}
    )
    tables: list[str] = field(
        default_factory=list,
        metadata={"help": "CSV files (e.g. DABench tables) to build generated question chains over."},
    )
    table_turns: int = field(default=6, metadata={"help": "Turns of a question chain over one table (6..30)."})
    question_writer: Literal["a", "b"] = field(
        default="a",
        metadata={
            "help": "Who words the generated tasks and table chains (synthesis.domains.wording): a, the wording of "
            "the training data, or b, the same requirements in other words ('the three largest' for 'top 3', 'to two "
            "decimal places' for 'to 2 decimals'; same tables, code, slots and answers) for a held-out evaluation of "
            "reading. Imported task_dirs keep their own words."
        },
    )
    fault_types: list[str] | None = field(
        default=None, metadata={"help": "Fault types to inject (synthesis.faults.FAULT_TYPES); null: all."}
    )
    gold_skip_check_kinds: list[str] = field(
        default_factory=list,
        metadata={
            "help": "Check kinds (harness.checks.spec.CHECK_KINDS) the gold manager does not write; a constraint "
            "whose spec is skipped is run as its own code. [unit_scale, resample] measures the detectability "
            "without the two kinds that reveal unit and resampling faults; []: every kind (the default)."
        },
    )
    generate_faults: bool = field(default=True, metadata={"help": "Generate faults with the fault library."})
    faults_files: list[str] = field(
        default_factory=list, metadata={"help": "faults.jsonl files (the shared format) to replay as well."}
    )
    max_faults_per_task: int | None = field(
        default=None,
        metadata={"help": "Keep at most this many generated faults per task, spread over fault types (null: all)."},
    )
    kinds: list[str] = field(
        default_factory=lambda: ["atomic", "full"], metadata={"help": f"Sample kinds to build: {list(KINDS)}."}
    )
    formats: list[str] = field(
        default_factory=lambda: list(FORMATS),
        metadata={
            "help": f"Sample formats to build, any of {list(FORMATS)}: flat (the `llm` manager's conversations, "
            "every kind), hier (tier 1's decision conversations of the `hier` manager, atomic only) and hier_checks "
            "(tier 1 of `hier` writing the turn's checks: the request and the gold's specs, atomic only)."
        },
    )
    faulted_atomic_labels: list[str] = field(
        default_factory=lambda: ["repair", "post_repair", "benign", "undetectable"],
        metadata={
            "help": "Labels of the atomic samples taken from faulted runs (their clean activations repeat the clean "
            f"run's); any of {list(LABELS)}."
        },
    )
    max_tokens: int = field(
        default=40960,
        metadata={"help": "Context budget: drop samples whose chat-template rendering has more Qwen3 tokens."},
    )
    count_tokens: bool = field(
        default=True, metadata={"help": "Count tokens with the real Qwen3 tokenizer (false: no length filter)."}
    )
    validation_fraction: float = field(
        default=0.1, metadata={"help": "Fraction of TASKS (never samples) in the validation split."}
    )
    workers: int | None = field(
        default=None,
        metadata={
            "help": "executor local: worker processes (null: cores + 1; each worker waits on its sandbox kernel part "
            "of the time, measured +10% over one per core on 2 cores)."
        },
    )
    isolation: str | None = field(
        default=None, metadata={"help": "Sandbox isolation: bwrap | none; null: bwrap when usable, else none."}
    )
    teacher_url: str | None = field(
        default=None,
        metadata={"help": "Optional OpenAI-compatible API root that paraphrases the natural-language fields."},
    )
    teacher_workers: int = field(
        default=1,
        metadata={
            "help": "executor local, with teacher_url: tasks synthesized at once on threads of this process (each "
            "with its own sandbox and tokenizer), so that this many teacher requests are in flight; it replaces the "
            "worker processes (leave workers null). 1: the worker processes, one teacher request in flight each."
        },
    )
    executor: Literal["local", "ray"] = executor_field()
    address: str | None = address_field()
    ray_num_cpus: int | None = ray_num_cpus_field("as many as the local executor's workers")
    ray_max_retries: int = ray_max_retries_field()
    ray_connect_timeout_s: float = ray_connect_timeout_field()

    def __post_init__(self) -> None:
        valid_domains = _domain_names()
        unknown = [d for d in self.domains if d not in valid_domains]
        if unknown:
            raise ValueError(f"domains: unknown domain(s) {unknown}; valid domains: {valid_domains}.")
        if self.fault_types is not None:
            valid_types = _fault_type_names()
            unknown = [t for t in self.fault_types if t not in valid_types]
            if unknown:
                raise ValueError(f"fault_types: unknown fault type(s) {unknown}; valid fault types: {valid_types}.")
        unknown = [k for k in self.gold_skip_check_kinds if k not in CHECK_KINDS]
        if unknown:
            raise ValueError(
                f"gold_skip_check_kinds: unknown check kind(s) {unknown}; valid kinds: {sorted(CHECK_KINDS)}."
            )
        if len(self.n_turns) != 2 or not 6 <= self.n_turns[0] <= self.n_turns[1] <= 30:
            raise ValueError(f"n_turns={self.n_turns}: give [min, max] with 6 <= min <= max <= 30, e.g. [6, 10].")
        if self.question_writer not in _question_writers():
            raise ValueError(
                f"question_writer={self.question_writer!r}: use one of {_question_writers()} (a: the training "
                "wording, b: the same requirements in other words)."
            )
        if not 6 <= self.table_turns <= 30:
            raise ValueError(f"table_turns={self.table_turns}: a chain has 6..30 turns; use e.g. 6.")
        if self.tasks_per_domain < 0:
            raise ValueError(f"tasks_per_domain={self.tasks_per_domain} is negative; use 0 or more.")
        if not 0.0 <= self.validation_fraction < 1.0:
            raise ValueError(
                f"validation_fraction={self.validation_fraction}: use a fraction in [0, 1) of the tasks, e.g. 0.1."
            )
        bad_kinds = [k for k in self.kinds if k not in KINDS]
        if bad_kinds or not self.kinds:
            raise ValueError(f"kinds={self.kinds}: use a non-empty subset of {list(KINDS)}.")
        bad_formats = [f for f in self.formats if f not in FORMATS]
        if bad_formats or not self.formats:
            raise ValueError(f"formats={self.formats}: use a non-empty subset of {list(FORMATS)}.")
        bad_labels = [label for label in self.faulted_atomic_labels if label not in LABELS]
        if bad_labels:
            raise ValueError(f"faulted_atomic_labels: unknown label(s) {bad_labels}; valid labels: {list(LABELS)}.")
        if self.max_tokens < 256:
            raise ValueError(f"max_tokens={self.max_tokens} is too small for any sample; use e.g. 40960.")
        if self.workers is not None and self.workers < 1:
            raise ValueError(f"workers={self.workers}: use 1 or more, or null for the number of cores.")
        if self.max_faults_per_task is not None and self.max_faults_per_task < 0:
            raise ValueError(f"max_faults_per_task={self.max_faults_per_task} is negative; use 0+, or null for all.")
        if self.isolation not in (None, "bwrap", "none"):
            raise ValueError(f"isolation={self.isolation!r}: use 'bwrap', 'none' or null (auto).")
        if self.teacher_url is not None and not self.teacher_url.startswith(("http://", "https://")):
            raise ValueError(
                f"teacher_url={self.teacher_url!r}: give an http(s) API root like http://localhost:8000/v1."
            )
        self._check_teacher_workers()
        check_options(self)

    def _check_teacher_workers(self) -> None:
        if self.teacher_workers < 1:
            raise ValueError(f"teacher_workers={self.teacher_workers}: use 1 or more.")
        if self.teacher_workers == 1:
            return
        if self.teacher_url is None:
            raise ValueError(
                f"teacher_workers={self.teacher_workers} runs tasks on threads while they wait on the teacher, but "
                "teacher_url is null; set teacher_url, or use workers (processes) for tasks without a teacher."
            )
        if self.executor != "local" or (self.workers or 1) > 1:
            raise ValueError(
                f"teacher_workers={self.teacher_workers} with executor {self.executor} and workers={self.workers}: "
                "teacher threads replace the worker processes of executor local; set workers: null (or 1) and "
                "executor: local, or teacher_workers: 1."
            )

    @property
    def n_workers(self) -> int:
        return self.workers or (os.cpu_count() or 1) + 1

    def to_dict(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(self)}

    def output_dict(self) -> dict[str, Any]:
        """:meth:`to_dict` without :data:`RUN_FIELDS` (how the run was spread, which never changes its outputs) and
        without the fields of :data:`OMITTED_AT_DEFAULT` at their default: the config written into
        ``shards/config.json`` and ``stats.json``."""
        return {
            name: value
            for name, value in self.to_dict().items()
            if name not in RUN_FIELDS and not (name in OMITTED_AT_DEFAULT and value == OMITTED_AT_DEFAULT[name])
        }

    @classmethod
    def from_yaml(cls, path: str | Path, **overrides: Any) -> SynthesisConfig:
        """Load ``path`` (keys = field names; unknown keys are an error naming them), then apply ``overrides``."""
        return load_yaml_config(cls, path, "synthesis", "configs/synthesis/smoke.yaml", **overrides)
