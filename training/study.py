"""The small-model study: what manager SFT and DAPO do to a real pretrained model, measured on CPU.

``scripts/study_small_model.py --config configs/study/smollm2.yaml`` runs :func:`run_study` (:class:`StudyConfig`):

1. **data** (``OUT/data``): two synthesis runs. ``train``: the six training domains with every fault type except the
   :attr:`~StudyConfig.heldout_fault_types`, the SFT (and DAPO pool) data. ``heldout``: the held-out domain
   (``logistics``, never in a training config) with every fault type, so two fault types and the domain are unseen
   in training. Nothing is ever tuned on ``heldout``: it is only scored.
2. **train** (``OUT/arms/<arm>``): each arm that needs training is a real launcher subprocess, exactly as a user
   types it (``accelerate launch scripts/sft.py --config ...``; ``scripts/rl.py`` for DAPO). LoRA adapters are merged
   into a plain checkpoint for evaluation.
3. **evaluate**: per model arm, *teacher-forced exact match* on held-out atomic samples (the gold context of one
   activation, then the model's next response: does its control action name equal the gold one?); per manager arm,
   *decision points* (:mod:`training.study_decisions`, ``decision_points``): the held-out activations where the gold
   manager repairs or commits, played closed loop in the real manager env, the gold manager playing the rest of the
   episode (repair precision / recall / F1 where whole faulted episodes are too long for a CPU); then every arm on
   the held-out episodes with the scripted (simulated) worker through :func:`harness.evaluation.run_evaluation`.
4. **report**: :mod:`training.study_report` writes ``results.json``, ``report.md`` and the plots.

Arms (:data:`ARMS`): ``none``, ``rule``, ``prompt`` (SmolLM2-135M-Instruct as converted, prompt only), ``sft-lora``,
``sft-full``, ``sft-dapo`` (DAPO from ``sft-full``; needs ``training.rl``: until it is installed the arm is reported
as unavailable) and ``tiny-sft`` (the random-init tiny Qwen3 after the same SFT, for contrast).

Prompt view (:attr:`StudyConfig.prompt_view`): ``full`` gives the model arms exactly the ``llm`` policy's messages;
``bare`` removes the system prompt and the tools block from the SFT data, the exact-match prompts and the episode
calls alike (CPU cost grows with sequence length), and DAPO's rollouts see the same view (``scripts/rl.py
--prompt_view``, :class:`training.rl.rollout.EpisodeTokens`).

Resume: every stage leaves a marker (``OUT/data/<split>/stats.json``, ``OUT/arms/<arm>/train.json``); exact-match
scores are appended per sample (``OUT/arms/<arm>/exact_match.jsonl``), decision points per point
(``OUT/arms/<arm>/decisions.jsonl``) and episodes per episode (the evaluation's own resume), so a killed study re-run
with the same ``OUT`` continues where it stopped; ``OUT/timing.json`` sums each stage's seconds over the
invocations (a trained arm's is its launch's wall time, from its marker), so the report's times are the study's cost
however often it was resumed. A data split synthesized with another config than the one given is
refused (the message names the fields), not silently reused.

Model inference uses :class:`~harness.llm.HFChatBackend`, prefix-cached: the key/values of the previous call are
reused for the prompt's longest common token prefix (the system prompt and tools block, about 3,000 tokens, are the
same in every manager call), which makes a manager call on two CPU cores several times faster; greedy outputs are
unchanged (tested).
"""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import logging
import random
import shutil
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import yaml

from harness.jsonl import append_jsonl, read_jsonl_resumable
from harness.llm import HFChatBackend, Message
from harness.yaml_config import load_yaml_config, type_problems
from training.pipeline import ROOT, launch_training
from training.prompt_view import check_prompt_view, view

logger = logging.getLogger(__name__)

MARKER = "train.json"
EXACT_FILE = "exact_match.jsonl"
TIMING_FILE = "timing.json"  # seconds per stage, summed over the invocations that ran it (a resume adds its own)


@dataclass(frozen=True)
class Arm:
    """One manager of the study: how it is trained (``train`` None: it is not) and whether a model answers."""

    description: str
    model: bool
    train: Callable[[Study, str], dict[str, Any]] | None = None
    needs: tuple[str, ...] = ()


@dataclass
class StudyConfig:
    """Everything the study runs; paths are relative to the repository root unless absolute."""

    out: str = field(default="runs/study-smollm2", metadata={"help": "Output folder of every stage."})
    smollm2_dir: str = field(
        default="runs/models/smollm2-135m",
        metadata={"help": "The converted SmolLM2 (built here when missing: stateguard model smollm2 --out DIR)."},
    )
    arms: list[str] = field(
        default_factory=lambda: ["none", "rule", "prompt", "sft-lora", "sft-full", "sft-dapo", "tiny-sft"],
        metadata={"help": "Managers to compare (names of training.study.ARMS), in report order."},
    )
    comparisons: list[list[str]] = field(
        default_factory=lambda: [
            ["prompt", "sft-lora"],
            ["prompt", "sft-full"],
            ["sft-lora", "sft-full"],
            ["sft-full", "sft-dapo"],
            ["tiny-sft", "sft-full"],
            ["rule", "sft-full"],
            ["none", "rule"],
        ],  # fmt: skip
        metadata={"help": "Pairs [a, b] whose paired differences b - a are reported with bootstrap CIs."},
    )
    train_synthesis: dict[str, Any] = field(
        default_factory=dict,
        metadata={"help": "SynthesisConfig fields of the training data; fault_types is set to all but the held out."},
    )
    heldout_synthesis: dict[str, Any] = field(
        default_factory=dict,
        metadata={"help": "SynthesisConfig fields of the held-out split; domains is set to the held-out domain."},
    )
    heldout_fault_types: list[str] = field(
        default_factory=lambda: ["unit_slip", "reversed_sort"],
        metadata={"help": "Fault types kept out of the training data (they appear in the held-out split only)."},
    )
    sft_full_config: str = field(default="configs/sft/smollm2-cpu.yaml", metadata={"help": "SFT config, sft-full."})
    sft_lora_config: str = field(default="configs/sft/smollm2-lora-cpu.yaml", metadata={"help": "SFT, sft-lora."})
    sft_tiny_config: str = field(default="configs/sft/tiny-cpu.yaml", metadata={"help": "SFT config, tiny-sft."})
    rl_config: str = field(default="configs/rl/smollm2-cpu.yaml", metadata={"help": "DAPO config, sft-dapo."})
    sft_args: list[str] = field(
        default_factory=list, metadata={"help": "Command-line overrides for every scripts/sft.py launch."}
    )
    rl_args: list[str] = field(default_factory=list, metadata={"help": "Command-line overrides for scripts/rl.py."})
    accelerate_config: str = field(default="configs/accelerate/cpu.yaml", metadata={"help": "accelerate config."})
    prompt_view: str = field(
        default="full",
        metadata={
            "help": "What the model arms see, in SFT data and at inference alike. full: exactly the llm policy's "
            "messages (system policy + tools block, ~3,400 SmolLM2 tokens before the activation). bare: the "
            "activation messages only, no system prompt, no tools block (the miniature: CPU cost grows with length)."
        },
    )
    exact_match_samples: int = field(
        default=40, metadata={"help": "Held-out atomic samples scored per model arm (teacher-forced exact match)."}
    )
    max_prompt_tokens: int = field(
        default=7680, metadata={"help": "Skip exact-match samples longer than this (SmolLM2's context is 8,192)."}
    )
    eval_limit: int | None = field(default=None, metadata={"help": "Held-out tasks played as episodes (None: all)."})
    eval_turns: int | None = field(
        default=None,
        metadata={"help": "Play only the first N turns of every held-out task (a copy of the suite with its tasks "
                  "cut there, faults at later turns left out; None: whole tasks). For the miniature: a model "
                  "manager call is seconds on CPU, two or more a turn."},
    )  # fmt: skip
    eval_fault_limit: int | None = field(
        default=None,
        metadata={"help": "Faulted episodes played, the first N of the kept tasks' (None: all); each task's clean "
                  "episode is always played."},
    )  # fmt: skip
    decision_points: int = field(
        default=0,
        metadata={"help": "Held-out decision points played closed loop by every manager arm (0: none): turn-end "
                  "activations where the gold manager repairs or commits, half of each kind as far as there are; "
                  "the gold manager plays the rest of the episode (training/study_decisions.py)."},
    )  # fmt: skip
    decision_max_responses: int = field(
        default=2, metadata={"help": "Responses an arm may give in a decision point's activation (check, then act)."}
    )
    manager_max_tokens: int = field(default=160, metadata={"help": "Cap on one manager reply (tokens)."})
    runtime: dict[str, Any] = field(
        default_factory=dict, metadata={"help": "RuntimeConfig fields of the episodes (e.g. max_actions)."}
    )
    isolation: str = field(default="bwrap", metadata={"help": "Sandbox isolation of synthesis and episodes."})
    seed: int = field(default=0, metadata={"help": "Seed of the sample selection and the bootstrap."})
    n_resamples: int = field(default=10_000, metadata={"help": "Bootstrap resamples of every interval."})

    def __post_init__(self) -> None:
        unknown = [a for a in self.arms if a not in ARMS]
        if unknown or not self.arms:
            raise ValueError(f"arms: unknown arm(s) {unknown} (or none given); valid arms: {', '.join(ARMS)}")
        for arm in self.arms:
            missing = [n for n in ARMS[arm].needs if n not in self.arms]
            if missing:
                raise ValueError(f"arms: {arm} is trained from {missing[0]}; add {missing[0]} to arms")
        for pair in self.comparisons:
            if len(pair) != 2 or any(a not in ARMS for a in pair):
                raise ValueError(f"comparisons: {pair} is not a pair of arm names; valid arms: {', '.join(ARMS)}")
        from synthesis.config import SynthesisConfig
        from synthesis.faults import FAULT_TYPES

        valid = sorted(f.name for f in dataclasses.fields(SynthesisConfig))
        problems = []
        for section in ("train_synthesis", "heldout_synthesis"):
            values = getattr(self, section)
            if unknown := sorted(set(values) - set(valid)):
                problems.append(f"{section}: unknown key(s) {unknown}; valid keys: {valid}")
            problems += type_problems(SynthesisConfig, values, prefix=f"{section}.")
        if problems:
            raise ValueError("; ".join(problems) + "; fix these SynthesisConfig fields.")
        bad = [t for t in self.heldout_fault_types if t not in FAULT_TYPES]
        if bad:
            raise ValueError(f"heldout_fault_types: unknown {bad}; valid fault types: {sorted(FAULT_TYPES)}")
        check_prompt_view(self.prompt_view)
        for name in ("exact_match_samples", "manager_max_tokens", "max_prompt_tokens", "n_resamples"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name}={getattr(self, name)} must be at least 1")
        if self.decision_points < 0:
            raise ValueError(f"decision_points={self.decision_points} must be 0 (none) or more")
        if self.decision_max_responses < 1:
            raise ValueError(f"decision_max_responses={self.decision_max_responses} must be at least 1")
        if self.eval_turns is not None and self.eval_turns < 1:
            raise ValueError(f"eval_turns={self.eval_turns} must be at least 1 (or null: whole tasks)")

    @classmethod
    def from_yaml(cls, path: str | Path, **overrides: Any) -> StudyConfig:
        return load_yaml_config(cls, path, "study", "configs/study/smollm2-mini.yaml", **overrides)

    def path(self, value: str) -> Path:
        path = Path(value)
        return path if path.is_absolute() else ROOT / path


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


# ---------------------------------------------------------------- the study
@dataclass
class Study:
    """A study run: its config, output folder and where each piece lives."""

    config: StudyConfig
    out: Path

    def data_dir(self, split: str) -> Path:
        return self.out / "data" / split

    def eval_suite(self) -> Path:
        """The suite the episodes are played on: the held-out split, or its tasks' first ``eval_turns`` turns."""
        if self.config.eval_turns is None:
            return self.data_dir("heldout")
        return self.out / "data" / f"heldout-first-{self.config.eval_turns}"

    def arm_dir(self, arm: str) -> Path:
        return self.out / "arms" / arm

    def model_dir(self, arm: str) -> Path:
        """The checkpoint a model arm is evaluated with."""
        if arm == "prompt":
            return self.config.path(self.config.smollm2_dir)
        return self.arm_dir(arm) / ("merged" if arm == "sft-lora" else "model")

    def launch(self, arm: str, script: str, config: str, args: list[str]) -> None:
        self.arm_dir(arm).mkdir(parents=True, exist_ok=True)
        launch_training(
            script,
            self.config.path(config),
            args,
            accelerate_config=self.config.path(self.config.accelerate_config),
            log=self.arm_dir(arm) / "log.txt",
            what=f"arm {arm}",
        )


def synthesize_split(study: Study, split: str) -> dict[str, Any]:
    """The ``train`` or ``heldout`` synthesis run (resumable; skipped when its stats.json exists)."""
    from synthesis.config import SynthesisConfig
    from synthesis.domains.catalog import HELDOUT_DOMAINS
    from synthesis.faults import FAULT_TYPES
    from synthesis.pipeline import synthesize

    out = study.data_dir(split)
    stats = out / "stats.json"
    config = study.config
    if split == "train":
        fields = {
            **config.train_synthesis,
            "fault_types": [t for t in FAULT_TYPES if t not in config.heldout_fault_types],
        }
    else:
        fields = {**config.heldout_synthesis, "domains": list(HELDOUT_DOMAINS), "validation_fraction": 0.0}
    if stats.is_file():
        done = json.loads(stats.read_text())
        had = done.get("config", {})
        changed = [k for k, v in fields.items() if k not in ("workers", "isolation") and had.get(k) != v]
        if changed:
            raise ValueError(
                f"{stats}: the {split} split there was synthesized with other {', '.join(changed)} than the config "
                f"asks ({', '.join(f'{k}={had.get(k)!r} vs {fields[k]!r}' for k in changed)}); every later stage "
                f"of the study depends on it: use another --out, or delete {study.out} to start over"
            )
        return done
    logger.info("synthesizing the %s split into %s", split, out)
    synthesize(SynthesisConfig(**{"isolation": config.isolation, **fields}), out, progress=True)
    return json.loads(stats.read_text())


def sft_dataset(study: Study) -> Path:
    """The training split as the model arms see it: the synthesis output itself (``full``), or a copy of its
    dataset with the system prompt and tools block removed (``bare``; lengths recounted by the SFT)."""
    if study.config.prompt_view == "full":
        return study.data_dir("train")
    target = study.out / "data" / f"train-{study.config.prompt_view}"
    if not (target / "dataset_dict.json").is_file():
        from datasets import DatasetDict, load_from_disk

        def shown(row: dict[str, Any]) -> dict[str, Any]:
            messages, tools = view(row["messages"], row["tools"], study.config.prompt_view)
            return {"messages": messages, "tools": tools or [], "n_tokens": 0}

        splits = load_from_disk(str(study.data_dir("train") / "dataset"))
        shown_splits = DatasetDict({name: split.map(shown) for name, split in splits.items()})
        shown_splits.save_to_disk(str(target), num_shards=dict.fromkeys(shown_splits, 1))  # an empty split too
    return target


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
        return result  # no marker: a later run retries once DAPO is installed
    result["seconds"] = round(time.perf_counter() - start, 1)
    marker.write_text(json.dumps(result, indent=2, sort_keys=True) + "\n")
    return result


# ---------------------------------------------------------------- teacher-forced exact match
def exact_match_samples(study: Study, tokenizer: Any) -> list[dict[str, Any]]:
    """The held-out atomic samples scored for exact match: those that fit ``max_prompt_tokens`` (counted with
    ``tokenizer``), round-robin over labels (repair samples are rare) in a seeded order, at most
    ``exact_match_samples``."""
    from datasets import load_from_disk

    from harness.manager.wire import parse_response
    from training.sft import count_tokens

    split = load_from_disk(str(study.data_dir("heldout") / "dataset"))["train"]
    rows = [row for row in split if row["kind"] == "atomic"]
    random.Random(study.config.seed).shuffle(rows)
    by_label: dict[str, list[dict[str, Any]]] = {}
    for row in rows:
        by_label.setdefault(row["label"], []).append(row)
    chosen: list[dict[str, Any]] = []
    queues = [by_label[label] for label in sorted(by_label)]
    while queues and len(chosen) < study.config.exact_match_samples:
        queue = queues.pop(0)
        row = queue.pop(0)
        messages, tools = view(row["messages"], row["tools"], study.config.prompt_view)
        if count_tokens(tokenizer, {"messages": messages, "tools": tools}) <= study.config.max_prompt_tokens:
            gold = parse_response(row["messages"][-1]["content"])
            chosen.append({**row, "gold": gold.action.name if gold.ok else None})
        if queue:
            queues.append(queue)
    return chosen


def score_exact_match(study: Study, arm: str, samples: list[dict[str, Any]], policy: Any) -> list[dict[str, Any]]:
    """Each sample's gold context (all but the last message), the arm's next response, and whether its action name
    equals the gold control action's. Appended per sample to ``OUT/arms/<arm>/exact_match.jsonl`` (resumable)."""
    from tqdm import tqdm

    from harness.manager.llm_policy import reply_to_text
    from harness.manager.wire import parse_response

    path = study.arm_dir(arm) / EXACT_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    done = read_jsonl_resumable(path)  # a torn last row of a killed run is dropped and played again
    seen = {row["content_hash"] for row in done}
    todo = [sample for sample in samples if sample["content_hash"] not in seen]
    wanted = {sample["content_hash"] for sample in samples}
    bar = tqdm(total=len(samples), initial=len(samples) - len(todo), desc=f"exact match {arm}", unit="sample")
    with bar:
        for sample in todo:
            tools = sample["tools"]
            tools = json.loads(tools) if isinstance(tools, str) else tools
            messages, tools = view(sample["messages"][:-1], tools, study.config.prompt_view)
            start = time.perf_counter()
            reply = policy.backend.chat(messages, tools=tools)
            parsed = parse_response(reply_to_text(reply))
            predicted = parsed.action.name if parsed.ok else None
            row = {
                "content_hash": sample["content_hash"],
                "task_id": sample["task_id"],
                "label": sample["label"],
                "gold": sample["gold"],
                "predicted": predicted,
                "parsed": parsed.ok,
                "match": predicted is not None and predicted == sample["gold"],
                "completion_tokens": reply.completion_tokens,
                "seconds": round(time.perf_counter() - start, 3),
            }
            append_jsonl(path, row)
            done.append(row)
            bar.update()
            bar.set_postfix(matched=sum(r["match"] for r in done if r["content_hash"] in wanted))
    return [row for row in done if row["content_hash"] in wanted]


# ---------------------------------------------------------------- decision points
def play_decision_points(
    study: Study, arms: list[str], policy: Callable[[str], Any], timed: Callable[[str, Callable[[], Any]], Any]
) -> dict[str, list[dict[str, Any]]]:
    """Every manager arm on the same held-out decision points (:mod:`training.study_decisions`), one env for all."""
    from envs import ManagerEnv, ReplayPool
    from harness.manager.policies import RulePolicy
    from training.study_decisions import DECISIONS_FILE, decision_points, score_decisions

    config = study.config
    pool = ReplayPool(study.data_dir("heldout"))
    points = decision_points(pool, config.decision_points, config.seed)
    env = ManagerEnv(pool=pool, worker="replay", isolation=config.isolation)
    try:
        return {
            arm: timed(
                f"decisions/{arm}",
                lambda a=arm: score_decisions(
                    study.arm_dir(a) / DECISIONS_FILE,
                    env,
                    points,
                    policy(a) if ARMS[a].model else RulePolicy(),
                    config.decision_max_responses,
                    label=a,
                ),
            )
            for arm in arms
        }
    finally:
        env.close()


# ---------------------------------------------------------------- driver
def first_turns_suite(src: Path, out: Path, n_turns: int) -> Path:
    """A copy of the synthesized suite ``src`` whose tasks keep their first ``n_turns`` turns (``config.yaml`` and
    ``private/reference.json`` cut there; the tables and the rest copied) and whose ``faults.jsonl`` keeps the faults
    injected in those turns. Turns only depend on earlier ones, so the cut tasks are valid tasks. Rebuilt each time
    (cheap: a few small files per task)."""
    from harness.tasks import load_task

    if out.exists():
        shutil.rmtree(out)
    kept: dict[str, set[str]] = {}
    for config_path in sorted((src / "tasks").glob("*/config.yaml")):
        task_dir = out / "tasks" / config_path.parent.name
        shutil.copytree(config_path.parent, task_dir)
        config = yaml.safe_load(config_path.read_text(encoding="utf-8"))
        config["turns"] = config["turns"][:n_turns]
        turn_ids = {str(turn["turn_id"]) for turn in config["turns"]}
        (task_dir / "config.yaml").write_text(yaml.safe_dump(config, sort_keys=False), encoding="utf-8")
        reference_path = task_dir / "private" / "reference.json"
        reference = json.loads(reference_path.read_text(encoding="utf-8"))
        reference = {turn_id: value for turn_id, value in reference.items() if turn_id in turn_ids}
        reference_path.write_text(json.dumps(reference, indent=2, ensure_ascii=False), encoding="utf-8")
        kept[load_task(task_dir).id] = turn_ids  # validates the cut task
    faults_path = src / "faults.jsonl"
    lines = faults_path.read_text(encoding="utf-8").splitlines() if faults_path.is_file() else []
    with (out / "faults.jsonl").open("w", encoding="utf-8") as fh:
        for line in filter(str.strip, lines):
            fault = json.loads(line)
            if str(fault.get("turn_id")) in kept.get(str(fault.get("task_id")), set()):
                fh.write(line + "\n")
    return out


def run_study(config: StudyConfig, out: str | Path | None = None) -> dict[str, Any]:
    """Run (or resume) the whole study; writes and returns the results (see :mod:`training.study_report`)."""
    from harness.evaluation.run import EvaluationConfig, run_evaluation
    from training.smollm2 import build_smollm2
    from training.study_report import collect, write_outputs

    study = Study(config, Path(out) if out is not None else config.path(config.out))
    study.out.mkdir(parents=True, exist_ok=True)
    timing_path = study.out / TIMING_FILE
    timing: dict[str, float] = json.loads(timing_path.read_text()) if timing_path.is_file() else {}

    def timed(name: str, fn: Callable[[], Any]) -> Any:
        began = time.perf_counter()
        value = fn()
        took = time.perf_counter() - began
        logger.info("study: %s took %.1f s", name, took)
        timing[name] = round(timing.get(name, 0.0) + took, 1)
        if name.startswith("train/") and isinstance(value, dict) and "seconds" in value:
            timing[name] = value["seconds"]  # the training launch's own wall time (a resumed arm's from its marker)
        timing_path.write_text(json.dumps(timing, indent=2) + "\n")
        return value

    if any(ARMS[a].model and a != "tiny-sft" for a in config.arms):
        timed("model", lambda: build_smollm2(config.path(config.smollm2_dir)))
    data = {
        split: timed(f"data/{split}", lambda s=split: synthesize_split(study, s)) for split in ("train", "heldout")
    }
    trained = {arm: timed(f"train/{arm}", lambda a=arm: train_arm(study, arm=a)) for arm in config.arms}
    arms = [a for a in config.arms if "unavailable" not in trained[a]]

    policies: dict[str, Any] = {}

    def policy(arm: str) -> Any:
        if arm not in policies:
            policies[arm] = model_policy(study.model_dir(arm), config.manager_max_tokens, config.prompt_view)
        return policies[arm]

    exact: dict[str, list[dict[str, Any]]] = {}
    model_arms = [a for a in arms if ARMS[a].model]
    if model_arms:
        from transformers import AutoTokenizer

        smollm2_arms = [a for a in model_arms if a != "tiny-sft"]  # count lengths with SmolLM2's (shorter) context
        counter = AutoTokenizer.from_pretrained(study.model_dir(smollm2_arms[0] if smollm2_arms else model_arms[0]))
        samples = exact_match_samples(study, counter)
        for arm in model_arms:
            exact[arm] = timed(f"exact_match/{arm}", lambda a=arm: score_exact_match(study, a, samples, policy(a)))

    decisions: dict[str, list[dict[str, Any]]] = {}
    if config.decision_points:
        decisions = play_decision_points(study, [a for a in arms if a != "none"], policy, timed)

    if config.eval_turns is not None:
        first_turns_suite(study.data_dir("heldout"), study.eval_suite(), config.eval_turns)
    eval_config = EvaluationConfig(
        suite=str(study.eval_suite()),
        out=str(study.out / "eval"),
        managers=[f"llm-hf:{study.model_dir(a)}" if ARMS[a].model else a for a in arms],
        labels=arms,
        limit=config.eval_limit,
        fault_limit=config.eval_fault_limit,
        isolation=config.isolation,
        runtime=config.runtime,
        manager_max_tokens=config.manager_max_tokens,
        seed=config.seed,
        n_resamples=config.n_resamples,
    )
    factories = {arm: (lambda a=arm: policy(a)) for arm in model_arms}
    evaluation = timed("episodes", lambda: run_evaluation(eval_config, policy_factories=factories))
    results = collect(
        study, data=data, trained=trained, exact=exact, evaluation=evaluation, timing=timing, decisions=decisions
    )
    results["config"] = asdict(config)
    write_outputs(study.out, results)
    return results
