"""The small-model study: what manager SFT and DAPO do to a real pretrained model, measured on CPU.

``training/study/cli.py --config training/study/configs/smollm2.yaml`` runs :func:`run_study` (:class:`StudyConfig`):

1. **data** (``OUT/data``): two synthesis runs. ``train``: the six training domains with every fault type except the
   :attr:`~StudyConfig.heldout_fault_types`, the SFT (and DAPO pool) data. ``heldout``: the held-out domain
   (``logistics``, never in a training config) with every fault type, so two fault types and the domain are unseen
   in training. Nothing is ever tuned on ``heldout``: it is only scored.
2. **train** (``OUT/arms/<arm>``): each arm that needs training is a real launcher subprocess, exactly as a user
   types it (``accelerate launch scripts/sft.py --config ...``; ``scripts/rl.py`` for DAPO). LoRA adapters are merged
   into a plain checkpoint for evaluation.
3. **evaluate**: per flat model arm, *teacher-forced exact match* on held-out atomic samples (the gold context of one
   activation, then the model's next response: does its control action name equal the gold one?); per manager arm,
   *decision points* (:mod:`training.study.decisions`, ``decision_points``): the held-out activations where the gold
   manager repairs or commits, played closed loop in the real manager env, the gold manager playing the rest of the
   episode (repair precision / recall / F1 where whole faulted episodes are too long for a CPU); then every arm on
   the held-out episodes with the scripted (simulated) worker through :func:`harness.evaluation.run_evaluation`. Every
   model arm plays as its served policy (:meth:`Arm.serve`) in both: ``hier`` as the hierarchical manager. Before
   them each flat model arm's decision margins are scored on the training data's ``margin_split`` rows
   (:mod:`training.study.margin`); with ``calibrate_decisions`` the arm is served with the decision bias chosen
   on those rows (:func:`training.study.margin.calibrate`; ``decision_bias`` says how it is served), at the
   decision points and in the episodes alike.
4. **report**: :mod:`training.study.report` writes ``results.json``, ``report.md`` and the plots.

Modules: this one holds the config, the :class:`Study` paths and the driver; :mod:`training.study.data` (stage 1 and
the cut evaluation suite), :mod:`training.study.arms` (stage 2, and serving a model arm),
:mod:`training.study.exact_match` and :mod:`training.study.decisions` (stage 3), :mod:`training.study.report`
(stage 4). Their public names are importable from here too.

Arms (:data:`ARMS`): ``none``, ``rule``, ``prompt`` (SmolLM2-135M-Instruct as converted, prompt only), ``sft-lora``,
``sft-full``, ``sft-dapo`` (DAPO from ``sft-full``; where ``training.rl`` or ``scripts/rl.py`` is missing the arm is
reported as unavailable), ``tiny-sft`` (the random-init tiny Qwen3 after the same SFT, for contrast) and ``hier``
(``sft-lora``'s SFT on the hier samples, served as :class:`~harness.manager.hier.HierPolicy`: tier 0 keeps the books,
the model decides once per check activation; it is not scored by exact match, whose samples are flat ones).

Prompt view (:attr:`StudyConfig.prompt_view`): ``full`` gives the model arms exactly the ``llm`` policy's messages;
``bare`` removes the system prompt and the tools block from the SFT data, the exact-match prompts and the episode
calls alike (CPU cost grows with sequence length), and DAPO's rollouts see the same view (``scripts/rl.py
--prompt_view``, :class:`training.rl.rollout.EpisodeTokens`). The hier arm follows the same rule: under ``bare``
its SFT rows and its tier-1 calls have no system prompt (:data:`~harness.manager.hier_prompts.HIER_SYSTEM`) and no
tools block (:mod:`training.study.arms`).

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
import json
import logging
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

from harness.manager.prompt_view import check_prompt_view, view
from harness.tracking import check_report_to_choice, resolve_report_to
from harness.yaml_config import load_yaml_config, type_problems
from training.pipeline import ROOT
from training.study.arms import (
    ARMS,
    MARKER,
    WINDOW_STEPS,
    Arm,
    dapo_available,
    hier_model_policy,
    merge_lora,
    model_policy,
    model_usage,
    train_arm,
    train_dapo,
    train_sft,
)
from training.study.data import first_turns_suite, sft_dataset, synthesize_split
from training.study.exact_match import EXACT_FILE, exact_match_samples, score_exact_match
from training.study.layout import Study

__all__ = [  # the driver and config, and the stages' functions under their historical names
    "ARMS",
    "EXACT_FILE",
    "MARKER",
    "TIMING_FILE",
    "Arm",
    "Study",
    "StudyConfig",
    "dapo_available",
    "exact_match_samples",
    "first_turns_suite",
    "hier_model_policy",
    "merge_lora",
    "model_policy",
    "model_usage",
    "play_decision_points",
    "run_study",
    "score_exact_match",
    "sft_dataset",
    "synthesize_split",
    "train_arm",
    "train_dapo",
    "train_sft",
    "view",
]

logger = logging.getLogger(__name__)

TIMING_FILE = "timing.json"  # seconds per stage, summed over the invocations that ran it (a resume adds its own)


@dataclass
class StudyConfig:
    """Everything the study runs; paths are relative to the repository root unless absolute."""

    out: str = field(default="runs/study-smollm2", metadata={"help": "Output folder of every stage."})
    smollm2_dir: str = field(
        default="runs/models/smollm2-135m",
        metadata={"help": "The converted SmolLM2 (built here when missing: stateguard model smollm2 --out DIR)."},
    )
    arms: list[str] = field(
        default_factory=lambda: [
            "none",
            "rule",
            "prompt",
            "sft-lora",
            "sft-dapo",
            "rl-only",
            "windowed",
            "hier",
        ],  # fmt: skip
        metadata={"help": "Managers to compare (names of training.study.ARMS), in report order."},
    )
    comparisons: list[list[str]] | None = field(
        default=None,
        metadata={"help": "Pairs [a, b] whose paired differences b - a are reported with bootstrap CIs (None: every "
                  "pair of arms, in arms order)."},
    )  # fmt: skip
    train_synthesis: dict[str, Any] = field(
        default_factory=dict,
        metadata={"help": "SynthesisConfig fields of the training data; fault_types is set to all but the held out."},
    )
    heldout_synthesis: dict[str, Any] = field(
        default_factory=dict,
        metadata={"help": "SynthesisConfig fields of the held-out split; domains is set to the held-out domain."},
    )
    heldout_seen_synthesis: dict[str, Any] = field(
        default_factory=dict,
        metadata={"help": "SynthesisConfig fields of a second held-out split: held-out tasks of the held-out domain "
                  "with the training fault types (fault_types is set to them; give another seed than "
                  "heldout_synthesis). Empty: no such split. Decision points are drawn from both held-out splits and "
                  "reported per split."},
    )  # fmt: skip
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
    episode_arms: list[str] | None = field(
        default=None,
        metadata={"help": "The arms that play the episodes (None: every arm); the others are measured at the decision "
                  "points and by exact match only (a flat model arm's episode is minutes of CPU per turn)."},
    )  # fmt: skip
    eval_split: str = field(
        default="heldout",
        metadata={"help": "The held-out split played as episodes: heldout (the held-out fault types) or heldout-seen "
                  "(held-out tasks with the training fault types; needs heldout_seen_synthesis)."},
    )  # fmt: skip
    eval_faulted_only: bool = field(
        default=False,
        metadata={"help": "Play only the tasks that keep a harmful fault within their first eval_turns turns (their "
                  "clean episode too): faulted episodes cut to the turns that hold the fault."},
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
                  "the gold manager plays the rest of the episode (training/study/decisions.py)."},
    )  # fmt: skip
    decision_max_responses: int = field(
        default=2, metadata={"help": "Responses an arm may give in a decision point's activation (check, then act)."}
    )
    decision_takeover: str = field(
        default="decision",
        metadata={"help": "Where the arm takes over a decision point (and DAPO's rollouts): decision (the gold runs "
                  "its checks, the arm reads their results and decides) or activation (it writes its own checks)."},
    )  # fmt: skip
    margin_split: str | None = field(
        default="validation",
        metadata={"help": "The training data's split whose flat REPAIR / FINALIZE_RELATIONS rows score each flat "
                  "model arm's decision margins after training (training.study.margin: the recipe's check on the "
                  "split it is chosen on, never a held-out one); null: not scored."},
    )  # fmt: skip
    margin_limit: int | None = field(
        default=None, metadata={"help": "At most this many margin rows (repair and confirm in turn; None: all)."}
    )
    calibrate_decisions: bool = field(
        default=False,
        metadata={"help": "Serve each flat model arm with the decision bias chosen on its margin_split rows "
                  "(training.study.margin.calibrate: the constant added to the REPAIR-vs-confirm log-odds that "
                  "best separates those training rows), added to REPAIR's branching token at the decision points "
                  "and in the episodes alike; the hier arm is not biased. Needs margin_split."},
    )  # fmt: skip
    decision_bias: Literal["pair", "token"] = field(
        default="pair",
        metadata={"help": "How calibrate_decisions serves the bias (training.study.margin.repair_bias): pair moves "
                  "REPAIR's branching token against the confirmation's only (the bias chooses between the two "
                  "decisions, never whether to decide rather than probe again); token adds it to REPAIR's logit "
                  "outright (REPAIR rises against every other action at that point too)."},
    )  # fmt: skip
    manager_max_tokens: int = field(default=160, metadata={"help": "Cap on one manager reply (tokens)."})
    constrained_decoding: bool = field(
        default=False,
        metadata={"help": "Serve every model arm that writes actions (flat and hier; not windowed) under the action "
                  "grammar (harness.grammar): each reply is one well-formed action, at the decision points and in "
                  "the episodes alike. Exact match (teacher-forced) and DAPO's rollouts are not affected."},
    )  # fmt: skip
    legal_actions_only: bool = field(
        default=False,
        metadata={"help": "With constrained_decoding, each reply of a flat model arm may name only the actions the "
                  "runtime lists as legal now (the prompt lists them too; model_settings.constrain_actions), at the "
                  "decision points and in the episodes: a refused action is then one whose arguments break a rule."},
    )  # fmt: skip
    decide_after_probe: bool = field(
        default=False,
        metadata={"help": "With constrained_decoding, a flat model arm may take neither decision (REPAIR, "
                  "FINALIZE_RELATIONS) before a probe of the activation has run (training.study.decoding; "
                  "implies legal_actions_only): its decisions follow evidence it wrote, as every "
                  "decision of the gold manager does."},
    )  # fmt: skip
    runtime: dict[str, Any] = field(
        default_factory=dict, metadata={"help": "RuntimeConfig fields of the episodes (e.g. max_actions)."}
    )
    isolation: str = field(default="bwrap", metadata={"help": "Sandbox isolation of synthesis and episodes."})
    seed: int = field(default=0, metadata={"help": "Seed of the sample selection and the bootstrap."})
    n_resamples: int = field(default=10_000, metadata={"help": "Bootstrap resamples of every interval."})
    report_to: str = field(
        default="auto",
        metadata={
            "help": "Tracker of the training launches (runs <out folder>-<arm>) and the episode evaluation "
            "(<out folder>-eval): auto (trackio outside CI, none in CI) | trackio | tensorboard | wandb | none."
        },
    )

    def __post_init__(self) -> None:
        check_report_to_choice(self.report_to)
        unknown = [a for a in self.arms if a not in ARMS]
        if unknown or not self.arms:
            raise ValueError(f"arms: unknown arm(s) {unknown} (or none given); valid arms: {', '.join(ARMS)}")
        for arm in self.arms:
            missing = [n for n in ARMS[arm].needs if n not in self.arms]
            if missing:
                raise ValueError(f"arms: {arm} is trained from {missing[0]}; add {missing[0]} to arms")
        if self.margin_split not in (None, "train", "validation"):
            raise ValueError(
                f"margin_split={self.margin_split!r}: use train or validation (a training-data split), or null"
            )
        if self.margin_limit is not None and self.margin_limit <= 0:
            raise ValueError(f"margin_limit={self.margin_limit} must be positive (or null: every row)")
        if (self.legal_actions_only or self.decide_after_probe) and not self.constrained_decoding:
            raise ValueError(
                "legal_actions_only / decide_after_probe shape the action grammar; set constrained_decoding: true"
            )
        if self.decision_bias not in ("pair", "token"):
            raise ValueError(f"decision_bias={self.decision_bias!r}: use pair or token")
        if self.calibrate_decisions and self.margin_split is None:
            raise ValueError("calibrate_decisions: true needs margin_split (the training rows the bias is chosen on)")
        if self.comparisons is None:
            self.comparisons = [[a, b] for i, a in enumerate(self.arms) for b in self.arms[i + 1 :]]
        for pair in self.comparisons:
            if len(pair) != 2 or any(a not in ARMS for a in pair):
                raise ValueError(f"comparisons: {pair} is not a pair of arm names; valid arms: {', '.join(ARMS)}")
        from synthesis.config import SynthesisConfig
        from synthesis.faults import FAULT_TYPES
        from synthesis.samples import FORMATS

        valid = sorted(f.name for f in dataclasses.fields(SynthesisConfig))
        problems = []
        for section in ("train_synthesis", "heldout_synthesis", "heldout_seen_synthesis"):
            values = getattr(self, section)
            if unknown := sorted(set(values) - set(valid)):
                problems.append(f"{section}: unknown key(s) {unknown}; valid keys: {valid}")
            problems += type_problems(SynthesisConfig, values, prefix=f"{section}.")
        if problems:
            raise ValueError("; ".join(problems) + "; fix these SynthesisConfig fields.")
        trained = {ARMS[a].format for a in self.arms if ARMS[a].train is not None}
        built = self.train_synthesis.get("formats", list(FORMATS))
        if lacking := sorted(trained - set(built)):
            raise ValueError(
                f"train_synthesis.formats={built}: the arms {self.arms} train on {lacking} samples too; add "
                f"{lacking} to train_synthesis.formats (or leave it out: every format is built by default)"
            )
        bad = [t for t in self.heldout_fault_types if t not in FAULT_TYPES]
        if bad:
            raise ValueError(f"heldout_fault_types: unknown {bad}; valid fault types: {sorted(FAULT_TYPES)}")
        check_prompt_view(self.prompt_view)
        for name in ("exact_match_samples", "manager_max_tokens", "max_prompt_tokens", "n_resamples"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name}={getattr(self, name)} must be at least 1")
        if self.decision_points < 0:
            raise ValueError(f"decision_points={self.decision_points} must be 0 (none) or more")
        from training.rl.rollout import TAKEOVERS

        if self.decision_takeover not in TAKEOVERS:
            raise ValueError(f"decision_takeover={self.decision_takeover!r}: use one of {', '.join(TAKEOVERS)}")
        if self.decision_max_responses < 1:
            raise ValueError(f"decision_max_responses={self.decision_max_responses} must be at least 1")
        if self.episode_arms is not None and (stray := [a for a in self.episode_arms if a not in self.arms]):
            raise ValueError(f"episode_arms: {stray} are not in arms {self.arms}; list arms that the study runs")
        if self.eval_split not in ("heldout", "heldout-seen"):
            raise ValueError(f"eval_split={self.eval_split!r}: use heldout or heldout-seen")
        if self.eval_split == "heldout-seen" and not self.heldout_seen_synthesis:
            raise ValueError(
                "eval_split=heldout-seen needs heldout_seen_synthesis (the split's SynthesisConfig fields)"
            )
        if self.eval_faulted_only and self.eval_turns is None:
            raise ValueError("eval_faulted_only needs eval_turns (the cut that must hold the fault)")
        if self.eval_turns is not None and self.eval_turns < 1:
            raise ValueError(f"eval_turns={self.eval_turns} must be at least 1 (or null: whole tasks)")

    @classmethod
    def from_yaml(cls, path: str | Path, **overrides: Any) -> StudyConfig:
        return load_yaml_config(cls, path, "study", "training/study/configs/smollm2-mini.yaml", **overrides)

    def path(self, value: str) -> Path:
        path = Path(value)
        return path if path.is_absolute() else ROOT / path


# ---------------------------------------------------------------- decision points
def play_decision_points(
    study: Study, arms: list[str], policy: Callable[[str], Any], timed: Callable[[str, Callable[[], Any]], Any]
) -> dict[str, list[dict[str, Any]]]:
    """Every deciding arm on the same decision points (:mod:`training.study.decisions`): ``decision_points`` of each
    held-out split (its rows' ``group``), one env per split."""
    from envs import ManagerEnv, ReplayPool
    from harness.manager.policies import RulePolicy
    from training.study.decisions import DECISIONS_FILE, decision_points, score_decisions

    config = study.config
    rows: dict[str, list[dict[str, Any]]] = {arm: [] for arm in arms}
    for split in study.heldout_splits():
        pool = ReplayPool(study.data_dir(split))
        points = decision_points(pool, config.decision_points, config.seed)
        env = ManagerEnv(pool=pool, worker="replay", isolation=config.isolation)
        try:
            for arm in arms:
                rows[arm] += timed(
                    f"decisions/{arm}",
                    lambda a=arm, e=env, p=points, g=split: score_decisions(
                        study.arm_dir(a) / DECISIONS_FILE,
                        e,
                        p,
                        policy(a) if ARMS[a].model else RulePolicy(),
                        config.decision_max_responses,
                        label=a,
                        takeover=config.decision_takeover,
                        group=g,
                    ),
                )
        finally:
            env.close()
    return rows


def _manager_spec(study: Study, arm: str) -> str:
    """The evaluation's manager spec of ``arm`` (its label in the records; model arms are built by the study)."""
    if not ARMS[arm].model:
        return arm
    if ARMS[arm].format == "windowed":
        return f"windowed-hf:{WINDOW_STEPS}:{study.model_dir(arm)}"
    return f"{'hier:' if ARMS[arm].format == 'hier' else ''}llm-hf:{study.model_dir(arm)}"


def run_study(config: StudyConfig, out: str | Path | None = None) -> dict[str, Any]:
    """Run (or resume) the whole study; writes and returns the results (see :mod:`training.study.report`)."""
    from harness.evaluation.evaluate import EvaluationConfig, run_evaluation
    from training.smollm2 import build_smollm2
    from training.study.render import write_outputs
    from training.study.report import collect, track_study

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
        split: timed(f"data/{split}", lambda s=split: synthesize_split(study, s))
        for split in ("train", *study.heldout_splits())
    }
    trained = {arm: timed(f"train/{arm}", lambda a=arm: train_arm(study, arm=a)) for arm in config.arms}
    arms = [a for a in config.arms if "unavailable" not in trained[a]]

    policies: dict[str, Any] = {}
    calibration: dict[str, dict[str, Any]] = {}  # flat model arm -> its decision bias, chosen on training rows

    def policy(arm: str) -> Any:
        if arm not in policies:
            policies[arm] = ARMS[arm].serve(
                study.model_dir(arm),
                config.manager_max_tokens,
                config.prompt_view,
                config.constrained_decoding,
                legal_only=config.legal_actions_only,
                decide_after_probe=config.decide_after_probe,
            )
            if calibration.get(arm, {}).get("bias"):
                from harness.manager.model_settings import model_backend
                from training.study.branch_bias import serve_with_bias
                from training.study.margin import repair_bias

                backend = model_backend(policies[arm])
                bias = calibration[arm]["bias"]
                serve_with_bias(backend, repair_bias(backend.tokenizer, bias, pairwise=config.decision_bias == "pair"))
        return policies[arm]

    exact: dict[str, list[dict[str, Any]]] = {}
    model_arms = [a for a in arms if ARMS[a].model]
    exact_arms = [a for a in model_arms if ARMS[a].format == "flat"]  # the samples are flat conversations
    margins: dict[str, dict[str, Any]] = {}
    if config.margin_split is not None:  # the same flat arms, on the training data's decision rows
        from training.study.margin import arm_margins

        for arm in exact_arms:
            margins[arm] = timed(f"margins/{arm}", lambda a=arm: arm_margins(study, a))
    if config.calibrate_decisions:
        from training.study.margin import calibrate

        calibration.update({arm: calibrate(margins[arm]["rows"]) for arm in margins})
        for arm, chosen in calibration.items():
            logger.info("study: %s decision bias %+.3f (training rows: %s)", arm, chosen["bias"], chosen)
    if exact_arms:
        from transformers import AutoTokenizer

        smollm2_arms = [a for a in exact_arms if a != "tiny-sft"]  # count lengths with SmolLM2's (shorter) context
        counter = AutoTokenizer.from_pretrained(study.model_dir(smollm2_arms[0] if smollm2_arms else exact_arms[0]))
        samples = exact_match_samples(study, counter)
        for arm in exact_arms:
            exact[arm] = timed(f"exact_match/{arm}", lambda a=arm: score_exact_match(study, a, samples, policy(a)))

    decisions: dict[str, list[dict[str, Any]]] = {}
    if config.decision_points:
        decisions = play_decision_points(study, [a for a in arms if ARMS[a].decides], policy, timed)

    episode_arms = [a for a in arms if config.episode_arms is None or a in config.episode_arms]
    if config.eval_turns is not None:
        first_turns_suite(
            study.data_dir(config.eval_split), study.eval_suite(), config.eval_turns, config.eval_faulted_only
        )
    eval_config = EvaluationConfig.from_dict(
        dict(
            suite=str(study.eval_suite()),
            out=str(study.out / "eval"),
            managers=[_manager_spec(study, a) for a in episode_arms],
            labels=episode_arms,
            limit=config.eval_limit,
            fault_limit=config.eval_fault_limit,
            isolation=config.isolation,
            runtime=config.runtime,
            manager_max_tokens=config.manager_max_tokens,
            constrained_decoding=config.constrained_decoding,
            seed=config.seed,
            n_resamples=config.n_resamples,
            report_to=resolve_report_to(config.report_to),
            run_name=f"{study.out.name}-eval",
        ),
        source="study evaluation",
    )
    factories = {arm: (lambda a=arm: policy(a)) for arm in model_arms if arm in episode_arms}
    evaluation = timed("episodes", lambda: run_evaluation(eval_config, policy_factories=factories))
    results = collect(
        study,
        data=data,
        trained=trained,
        exact=exact,
        evaluation=evaluation,
        timing=timing,
        decisions=decisions,
        margins=margins,
        calibration=calibration,
    )
    results["config"] = asdict(config)
    write_outputs(study.out, results)
    track_study(study.out, results, resolve_report_to(config.report_to), f"{study.out.name}-study")
    return results
