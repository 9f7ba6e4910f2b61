"""DAPO for the manager on TRL's ``GRPOTrainer``.

:func:`run_rl` does the whole job; ``scripts/rl.py`` parses a YAML config into :class:`training.sft.ModelArguments`,
:class:`RLArguments` and TRL's ``GRPOConfig`` and calls it.

- Trainer: TRL's ``GRPOTrainer`` with ``loss_type: dapo`` (token-level loss), ``epsilon: 0.2`` / ``epsilon_high: 0.28``
  (clip-higher), ``beta: 0`` (no KL, no reference model), with a ``rollout_func`` (:class:`ManagerRollouts`) that plays
  rollouts in :class:`envs.ManagerEnv` (:mod:`training.rl.rollout`: one activation per rollout, the exact conversation
  the served ``llm`` policy sends, or with ``format: hier`` tier 1's of the ``hier`` manager; with ``takeover:
  decision`` the gold plays the activation's verification calls and the model its decision; with ``format:
  hier_checks`` the model writes a turn's checks, :mod:`training.rl.checks_rollout`; env ids masked: ``env_mask``).
  ``DapoTrainer`` (:mod:`training.rl.dapo_trainer`) adds the rollout state to checkpoints and two savings that leave
  the loss unchanged (both tested against TRL): rows with zero advantage (uniform groups that filled a batch) are not
  forwarded beyond what keeps every rank's forwards and collectives alike, and off CUDA in one process only the
  completion positions are scored (TRL's fused head scores every prompt position there: ~100x the work for a 3.7k-token
  prompt). Where the DAPO loss is computed: :mod:`training.rl.dapo`.
- Dynamic sampling (:mod:`training.rl.sampling`): the ``prompt`` rows TRL feeds are placeholders (one per group);
  :class:`ManagerRollouts` draws the start points itself from the replay pool, drops uniform groups and refills
  within ``max_rounds`` rounds, then trains on what it gathered.
- Rewards (:func:`training.rl.dapo_trainer.reward_functions`): one TRL reward function per term of the composed
  reward (:data:`rewards.TERMS`), weighted by ``RewardConfig`` (``reward_config``), so TRL logs ``rewards/<term>/mean``
  and the weighted sum is exactly :func:`rewards.score_episode`'s total; plus ``overlong`` (weight 1): DAPO's overlong
  shaping over the rollout's model tokens (``max_completion_length``, ``overlong_buffer``, ``overlong_factor``).
  ``reward`` in the logs is the mean of that sum.
- Logged each step besides TRL's own: :mod:`training.rl.metrics` lists them (``dapo/*``, ``manager/*``).
- Environments: ``rollout_workers: N`` envs (one sandbox each) play a dynamic-sampling round's rollouts side by side,
  in this process (``executor: local``, default; N = 1: one after another) or in Ray actors (``executor: ray``,
  :mod:`training.rl.workers`) while this process only samples (and trains); a crashed actor is replaced and its
  rollout replayed; ``dapo/env_actors_replaced`` counts the replacements. The rollouts are the in-process ones for a
  deterministic policy.
- Generation in waves (:mod:`training.rl.waves`): the pending responses of all N envs are sampled in one
  ``generate_many`` call, a group's first responses (the same context) as one request for ``num_generations``;
  transformers on CPU (:class:`training.rl.engines.TransformersEngine`), vLLM with ``use_vllm: true``
  (``vllm_mode`` server or colocate, :class:`~training.rl.vllm_engine.VLLMEngine`).
- Model: ``model_name_or_path`` is an SFT output folder, a hub id, or ``tiny`` (the embedded tiny Qwen3, random
  init, built once into the cache: the default, so the config runs with no SFT checkpoint at hand); all weights are
  trained (``use_peft`` and a LoRA adapter-only folder are refused: merge first).
- Resume: ``--resume_from_checkpoint DIR|true`` restores model, optimizer, scheduler and RNG (the Trainer's
  checkpoints) and, from ``rl_state-<process>.json`` in the checkpoint folder, the start-point sampler's position and
  the dynamic-sampling buffer.
- Output (``output_dir``): the model and tokenizer (servable by ``transformers serve`` / vLLM), ``trainer_state.json``
  (per-step logs), ``all_results.json``, ``rollout_groups.jsonl`` (every group played, trained or dropped: its start,
  each rollout's sampled decision, reward and reward minus the group mean; :mod:`training.rl.rollout_groups`) and a
  model card ``README.md`` (:mod:`training.rl.model_card`) whose last table sums those groups up by gold control and
  sampled decision.
"""

from __future__ import annotations

import json
import logging
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from envs.manager import check_format
from harness.executors import (
    INSTALL_RAY,
    ExecutorOptions,
    RayUnavailableError,
    address_field,
    check_executor,
    check_options,
    ray_connect_timeout_field,
    ray_num_cpus_field,
)
from harness.import_utils import is_available, require
from harness.manager.hier import TIER1_MIN_ACTIONS
from harness.manager.lifecycle import CONTROL_ACTIONS
from harness.manager.prompt_view import check_prompt_view
from harness.tokenizer import load_tokenizer
from harness.tracking import check_report_to
from training.rl.checks_rollout import check_checks_args, checks_start_points, save_settings, served_settings
from training.rl.dapo import overlong_penalty
from training.rl.dapo_trainer import dapo_trainer_class, reward_functions
from training.rl.metrics import rollout_metrics, rollout_share_callback
from training.rl.model_card import write_model_card
from training.rl.rollout import (
    EpisodePlayer,
    EpisodeTokens,
    Rollout,
    RolloutLimits,
    StartPoint,
    check_gold_controls,
    check_takeover,
    start_points,
)
from training.rl.rollout_groups import (
    GROUPS_FILE,
    append_records,
    group_record,
    read_records,
    summarize_groups,
    truncate_records,
)
from training.rl.sampling import DynamicSampler, Group, StartPointSampler
from training.rl.vllm_engine import vllm_settings
from training.rl.waves import play_in_waves
from training.sft import ModelArguments, resolve_model, resolve_resume

if TYPE_CHECKING:
    from trl import GRPOConfig, GRPOTrainer

logger = logging.getLogger(__name__)


@dataclass
class RLArguments:
    """The replay pool, the rollouts and DAPO's additions (TRL's ``GRPOConfig`` holds the rest)."""

    pool: str = field(
        default="runs/synth-smoke", metadata={"help": "A `stateguard synthesize --out DIR` folder (the replay pool)."}
    )
    reward_config: str | None = field(
        default=None, metadata={"help": "Reward weights YAML (configs/rewards/*.yaml); default: RewardConfig()."}
    )
    event_types: list[str] | None = field(
        default=None,
        metadata={"help": "Start activations of these events only (turn_start, turn_end, ...); default: all."},
    )
    gold_controls: list[str] | None = field(
        default=None,
        metadata={
            "help": "Start activations the gold ended with one of these control actions only, e.g. [REPAIR, "
            "FINALIZE_RELATIONS]: the check activations where the gold repairs or confirms; default: all."
        },
    )
    stratify_controls: bool = field(
        default=False,
        metadata={
            "help": "Draw start points by the gold's control action in turn (REPAIR, FINALIZE_RELATIONS, ...), each "
            "from its own seeded permutation, so a rare control (REPAIR) is played as often as a common one."
        },
    )
    takeover: str = field(
        default="activation",
        metadata={
            "help": "activation: the model plays the whole start activation. decision: the gold plays the start "
            "activation's tool calls (its verification) and the model takes over at the gold's control action, "
            "so the prompt holds the gold's calls and their results; start points are then the activations the "
            "gold ends with a control action (gold_controls, default: any)."
        },
    )
    max_start_points: int | None = field(
        default=None, metadata={"help": "Use only the first N start points of the pool (index order)."}
    )
    max_new_tokens: int = field(default=64, metadata={"help": "Token limit of one model response."})
    max_responses: int = field(
        default=8, metadata={"help": "Model responses per rollout; later ones are sent as empty (no tokens)."}
    )
    max_actions: int = field(default=8, metadata={"help": "The manager runtime's actions per activation."})
    format: str = field(
        default="flat",
        metadata={
            "help": "flat: the model is the llm manager (every activation can be a start point). hier: the model is "
            "tier 1 of the hier manager (start points: the gold's check activations with a tier-1 part; tier 0 and "
            "the gold play the rest). hier_checks: the model writes each start turn's checks (training/rl/"
            "checks_rollout.py; reward_config is then a rewards.CheckRewardConfig YAML)."
        },
    )
    prompt_view: str = field(
        default="full",
        metadata={
            "help": "full: rollouts see the served llm policy's conversation (system prompt + tools block). bare: "
            "the activation alone, as training.study's bare view trains and serves small models."
        },
    )
    overlong_buffer: int = field(
        default=64,
        metadata={"help": "Overlong shaping: penalty grows over the last N tokens of max_completion_length."},
    )
    overlong_factor: float = field(default=1.0, metadata={"help": "Overlong shaping: the penalty at the maximum."})
    mask_truncated: bool = field(
        default=False, metadata={"help": "Leave rollouts with a cut response out of the loss (DAPO's option)."}
    )
    max_rounds: int = field(default=3, metadata={"help": "Dynamic sampling: generation rounds per batch."})
    oversample: float = field(default=1.0, metadata={"help": "Dynamic sampling: groups played per missing group."})
    reward_atol: float = field(default=1e-6, metadata={"help": "Dynamic sampling: rewards this close are alike."})
    isolation: str | None = field(default=None, metadata={"help": "Sandbox isolation: bwrap | none (default: auto)."})
    torch_threads: int | None = field(
        default=None, metadata={"help": "torch.set_num_threads for this process (None: torch's default)."}
    )
    weight_sync_steps: int = field(
        default=10, metadata={"help": "vLLM only: run the weight-sync self-check every N steps (0: never)."}
    )
    weight_sync_threshold: float = field(
        default=0.05, metadata={"help": "vLLM only: warn when the probe's mean |logprob gap| exceeds this."}
    )
    rollout_workers: int = field(
        default=1,
        metadata={
            "help": "Envs per training process playing rollouts at once (one sandbox each; their pending responses "
            "are sampled in one batch per wave): Ray actors (a quarter of a CPU each) with executor ray, in this "
            "process with executor local."
        },
    )
    executor: str = field(
        default="local",
        metadata={
            "help": "Where the rollouts' envs run: local (in the training process) | ray (rollout_workers Ray "
            "actors, on a local Ray started for the run or on the cluster at `address`); the rollouts are the same."
        },
    )
    address: str | None = address_field()
    ray_num_cpus: int | None = ray_num_cpus_field("rollout_workers")
    ray_max_retries: int = field(
        default=3,
        metadata={"help": "executor ray: times a rollout whose env actor died is replayed on a new actor."},
    )
    ray_connect_timeout_s: float = ray_connect_timeout_field()
    temperature_grid: list[float] | None = field(
        default=None,
        metadata={
            "help": "Choose the sampling temperature on the training pool before training (training/rl/temperature.py)"
            ": the highest of these whose sampled first responses are legal at least temperature_min_legal of the "
            "time; replaces `temperature`. Unset: `temperature` as given."
        },
    )
    temperature_min_legal: float = field(
        default=0.8, metadata={"help": "Temperature probe: the legal rate the chosen temperature keeps."}
    )
    constrained_decoding: bool = field(
        default=False,
        metadata={
            "help": "Sample every response under the action grammar (harness.grammar, the transformers engine): "
            "each one is a well-formed action (unless cut by max_new_tokens); the temperature probe samples so too."
        },
    )
    temperature_points: int = field(default=8, metadata={"help": "Temperature probe: start points sampled."})
    temperature_samples: int = field(
        default=4, metadata={"help": "Temperature probe: first responses sampled per start point and temperature."}
    )

    def __post_init__(self) -> None:
        for name in ("max_new_tokens", "max_responses", "max_actions", "max_rounds"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name}={getattr(self, name)} must be >= 1")
        if self.overlong_buffer < 0 or self.overlong_factor < 0:
            raise ValueError(
                f"overlong_buffer={self.overlong_buffer} and overlong_factor={self.overlong_factor} must be >= 0"
            )
        if self.oversample < 1:
            raise ValueError(f"oversample={self.oversample} must be >= 1")
        check_prompt_view(self.prompt_view)
        check_takeover(self.takeover)
        check_checks_args(self)
        if self.gold_controls is not None:
            check_gold_controls(self.gold_controls)
        if check_format(self.format) != "flat" and self.max_actions <= TIER1_MIN_ACTIONS:
            raise ValueError(
                f"format={self.format!r} with max_actions={self.max_actions}: tier 0 needs one check and tier 1 at "
                f"least {TIER1_MIN_ACTIONS} actions of a check activation; use max_actions > {TIER1_MIN_ACTIONS}."
            )
        if self.max_start_points is not None and self.max_start_points < 1:
            raise ValueError(f"max_start_points={self.max_start_points} must be >= 1; leave it unset to use all")
        self.check_rollout_workers()
        if self.temperature_grid is not None:
            from training.rl.temperature import check_grid

            self.temperature_grid = check_grid(self.temperature_grid, self.temperature_min_legal)
            if self.temperature_points < 1 or self.temperature_samples < 1:
                raise ValueError(
                    f"temperature_points={self.temperature_points} and temperature_samples="
                    f"{self.temperature_samples} must be >= 1"
                )

    def check_rollout_workers(self) -> None:
        """The env-worker fields: ``executor`` and the Ray options (:func:`harness.executors.check_options`),
        ``rollout_workers`` >= 1, a local Ray with a CPU per actor, and Ray
        installed for ``executor: ray`` (:class:`~harness.executors.RayUnavailableError` naming the install
        command). Reaching ``address`` is checked when the workers start."""
        check_options(self)
        if self.rollout_workers < 1:
            raise ValueError(f"rollout_workers={self.rollout_workers} must be >= 1 (env actors per process)")
        if self.ray_num_cpus is not None and self.ray_num_cpus < self.rollout_workers:
            raise ValueError(
                f"ray_num_cpus={self.ray_num_cpus} is below rollout_workers={self.rollout_workers}: each env actor "
                "takes one CPU; raise ray_num_cpus or leave it null"
            )
        if self.executor == "ray" and not is_available("ray"):
            raise RayUnavailableError(
                f"executor ray needs Ray, which is not installed; install it with: {INSTALL_RAY} (or use executor: "
                "local)."
            )

    def executor_options(self) -> ExecutorOptions:
        return ExecutorOptions.of(self)


def check_config(rl_args: RLArguments, config: GRPOConfig) -> None:
    """Cross-checks between :class:`RLArguments` and ``GRPOConfig``; each error names the fields and the fix."""
    if config.beta != 0:
        raise ValueError(f"beta={config.beta}: DAPO has no KL term and no reference model; set beta: 0")
    vllm_settings(config)  # the vLLM fields, checked without vLLM
    if rl_args.constrained_decoding and config.use_vllm:
        raise ValueError(
            "constrained_decoding samples under the action grammar in the transformers engine; with use_vllm the "
            "rollouts come from vLLM, which this trainer does not hand a grammar: set use_vllm false or "
            "constrained_decoding false"
        )
    if rl_args.overlong_buffer > config.max_completion_length:
        raise ValueError(
            f"overlong_buffer={rl_args.overlong_buffer} exceeds max_completion_length={config.max_completion_length}; "
            "use a buffer inside the maximum"
        )
    per_process = config.per_device_train_batch_size * (
        config.steps_per_generation or config.gradient_accumulation_steps
    )
    if per_process % config.num_generations:
        raise ValueError(
            f"each process plays whole groups: per_device_train_batch_size x steps_per_generation = {per_process} "
            f"must be a multiple of num_generations={config.num_generations}"
        )


# ---------------------------------------------------------------- the rollout function
class ManagerRollouts:
    """TRL's ``rollout_func``: gathers a batch of groups with dynamic sampling (see the module docstring)."""

    def __init__(self, rl_args: RLArguments, config: GRPOConfig, tokenizer: Any, reward_config: Any, seed: int):
        from envs import ReplayPool
        from training.rl.workers import EnvSpec

        self.args, self.config = rl_args, config
        self.pool = ReplayPool(rl_args.pool)
        self.tokens = EpisodeTokens(tokenizer, prompt_view=rl_args.prompt_view, format=rl_args.format)
        cap = config.vllm_max_model_length if config.use_vllm else None  # vLLM refuses a longer context
        limits = RolloutLimits(rl_args.max_new_tokens, config.max_completion_length, rl_args.max_responses, cap)
        self.spec = EnvSpec(
            str(rl_args.pool), tokenizer, limits, rl_args.takeover, rl_args.format, rl_args.prompt_view,
            rl_args.isolation, rl_args.max_actions, reward_config,
        )  # fmt: skip
        self.player: EpisodePlayer | None = None  # executor local: the first env in this process
        self.players: list[EpisodePlayer] = []  # executor local: rollout_workers envs, one wave lane each
        self.workers: Any = None  # executor ray: training.rl.workers.EnvWorkers
        types = tuple(rl_args.event_types) if rl_args.event_types else None
        controls = tuple(rl_args.gold_controls) if rl_args.gold_controls is not None else None
        if controls is None and rl_args.takeover == "decision":
            controls = CONTROL_ACTIONS  # the model takes over at the gold's decision: there must be one
        checks = rl_args.format == "hier_checks"
        points = checks_start_points(self.pool) if checks else start_points(self.pool, types, rl_args.format, controls)
        points = points[: rl_args.max_start_points]
        self.sampler = DynamicSampler(
            StartPointSampler(points, seed, rl_args.stratify_controls), self.play_group, config.num_generations,
            rl_args.max_rounds, rl_args.oversample, rl_args.reward_atol, play_many=self.play_groups,
        )  # fmt: skip
        self.engine: Any = None
        self.seconds = 0.0  # time spent in rollouts, all calls together
        self.records_path: Path | None = None  # this process's rollout-group record, set at the first batch
        self.played: list[Group] = []  # the groups played since the last batch was gathered
        if rl_args.executor == "ray":
            from training.rl.workers import EnvWorkers

            self.workers = EnvWorkers(self.spec, rl_args.rollout_workers, rl_args.executor_options())
        else:
            self.players = [self.spec.player(self.pool, self.tokens) for _ in range(rl_args.rollout_workers)]
            self.player = self.players[0]

    def close(self) -> None:
        if self.workers is not None:
            self.workers.close()
        for player in self.players:
            player.env.close()

    def play_group(self, start: StartPoint) -> Group:
        """``num_generations`` rollouts from ``start``."""
        return self.play_groups([start])[0]

    def play_groups(self, starts: list[StartPoint]) -> list[Group]:
        """A group of ``num_generations`` rollouts from each of ``starts``, played in waves
        (:class:`~training.rl.waves.WaveDriver`) on the ``rollout_workers`` envs in this process (``executor:
        local``) or in Ray actors (``executor: ray``): the pending responses of all of them sampled in one
        ``generate_many`` call per wave, a group's first responses (the same context: the gold prefix replays
        deterministically) as one request for ``num_generations`` responses."""
        size = self.config.num_generations
        every = [start for start in starts for _ in range(size)]
        if self.workers is not None:
            rollouts = self.workers.play(every, self.engine, size)
        else:
            rollouts = play_in_waves(self.players, every, self.engine, size)
        for rollout in rollouts:
            rollout.overlong = overlong_penalty(
                rollout.model_tokens, self.config.max_completion_length, self.args.overlong_buffer,
                self.args.overlong_factor,
            )  # fmt: skip
        played = [Group(start, rollouts[i * size : (i + 1) * size]) for i, start in enumerate(starts)]
        self.played += played
        return played

    def choose_temperature(self, model_path: str, dtype: Any = "auto") -> float:
        """The sampling temperature chosen on this pool (:mod:`training.rl.temperature`) with the model at
        ``model_path``; a resumed run reads the choice it wrote (``temperature_probe.json`` in ``output_dir``)."""
        import torch
        from accelerate import PartialState
        from transformers import AutoModelForCausalLM

        from training.rl.engines import TransformersEngine
        from training.rl.temperature import PROBE_FILE, choose_temperature, probe_temperatures, write_probe

        args = self.args
        written = Path(self.config.output_dir) / PROBE_FILE
        if written.is_file():
            chosen = float(json.loads(written.read_text(encoding="utf-8"))["chosen"])
            logger.info("temperature: %.2f, chosen earlier (%s)", chosen, written)
            return chosen
        torch.manual_seed(self.config.seed)
        model = AutoModelForCausalLM.from_pretrained(model_path, dtype=dtype)
        player = self.player if self.player is not None else self.spec.player(self.pool, self.tokens)
        try:
            engine = TransformersEngine(
                model, self.tokens.eos_id, self.tokens.encode(self.tokens.system_text()), grammar=self.grammar(model)
            )
            table = probe_temperatures(
                player, engine, self.sampler.points.points, args.temperature_grid,
                points=args.temperature_points, samples=args.temperature_samples,
                max_new_tokens=args.max_new_tokens, seed=self.config.seed + 1,
            )  # fmt: skip
        finally:
            if player is not self.player:
                player.env.close()
        chosen = choose_temperature(table, args.temperature_min_legal)
        if PartialState().is_main_process:
            write_probe(self.config.output_dir, table, chosen, args.temperature_min_legal)
        logger.info(
            "temperature: %.2f chosen on the training pool (legal >= %.2f)", chosen, args.temperature_min_legal
        )
        return chosen

    def use_model(self, model: Any) -> None:
        """Sample with ``model`` in this process (:class:`~training.rl.engines.TransformersEngine`); the system turn's
        KV cache is shared by every rollout until the next :meth:`refresh` of the engine."""
        from training.rl.engines import TransformersEngine

        prefix = self.tokens.encode(self.tokens.system_text())
        self.engine = TransformersEngine(
            model, self.tokens.eos_id, prefix, self.config.temperature, grammar=self.grammar(model)
        )

    def grammar(self, model: Any) -> Any:
        """The action grammar for ``model``'s responses (``constrained_decoding``), else None."""
        if not self.args.constrained_decoding:
            return None
        from harness.grammar import TokenGrammar
        from harness.manager.hier_checks import checks_grammar
        from harness.manager.wire import call_grammar

        grammar = checks_grammar if self.args.format == "hier_checks" else call_grammar
        return TokenGrammar.for_model(self.tokens.tokenizer, model, grammar, [self.tokens.eos_id])

    def _engine(self, trainer: GRPOTrainer) -> Any:
        from training.rl.vllm_engine import VLLMEngine

        if self.engine is None:
            if trainer.args.use_vllm:
                self.engine = VLLMEngine(trainer, self.tokens.eos_id, trainer.args.temperature)
            else:
                self.use_model(trainer.accelerator.unwrap_model(trainer.model))
        self.engine.refresh()
        return self.engine

    def __call__(self, prompts: list[Any], trainer: GRPOTrainer) -> dict[str, list[Any]]:
        started = time.perf_counter()
        engine = self._engine(trainer)
        try:
            self._maybe_check_weight_sync(trainer, engine)
            self.played = []
            groups, stats = self.sampler.gather(len(prompts) // self.config.num_generations)
        finally:
            engine.release()
        self.record(groups, trainer.state.global_step)
        rollouts = [r for g in groups for r in g.rollouts]
        seconds = time.perf_counter() - started
        self.seconds += seconds
        metrics = rollout_metrics(groups, stats, self.pool)
        metrics["dapo/rollout_s"] = seconds
        if self.workers is not None:
            metrics["dapo/env_actors_replaced"] = float(self.workers.replaced)
        for name, value in metrics.items():
            trainer._metrics["train"][name].append(value)  # TRL averages and logs them with its own metrics
        return self.batch(rollouts)

    def record(self, groups: list[Group], done_steps: int) -> None:
        """Append the groups played for this batch (trained or dropped) and the buffered groups it trains to this
        process's rollout-group record (:mod:`training.rl.rollout_groups`; ``output_dir/rollout_groups.jsonl`` on the
        main process, ``rollout_groups-<index>.jsonl`` on the others). At the first batch the lines of steps after
        ``done_steps`` are dropped: a resumed run records them again."""
        if self.records_path is None:
            from accelerate import PartialState

            index = PartialState().process_index
            name = GROUPS_FILE if index == 0 else GROUPS_FILE.replace(".jsonl", f"-{index}.jsonl")
            self.records_path = Path(self.config.output_dir) / name
            truncate_records(self.records_path, done_steps)
        step, atol = done_steps + 1, self.args.reward_atol
        trained = {id(g) for g in groups}
        records = [group_record(g, step, atol, trained=id(g) in trained) for g in self.played]
        played = {id(g) for g in self.played}
        records += [group_record(g, step, atol, from_buffer=True) for g in groups if id(g) not in played]
        append_records(self.records_path, records)

    def batch(self, rollouts: list[Rollout]) -> dict[str, list[Any]]:
        """The rollouts in ``rollout_func``'s output format (trailing env ids trimmed, see :meth:`Rollout.trimmed`)."""
        out: dict[str, list[Any]] = {k: [] for k in ("prompt_ids", "completion_ids", "logprobs", "env_mask")}
        for rollout in rollouts:
            ids, mask, logprobs = rollout.trimmed()
            if self.args.mask_truncated and rollout.truncated:
                mask = [0] * len(mask)
            out["prompt_ids"].append(rollout.prompt_ids)
            out["completion_ids"].append(ids)
            out["env_mask"].append(mask)
            out["logprobs"].append(logprobs)
        out["reward_terms"] = [r.reward_terms for r in rollouts]
        out["overlong"] = [r.overlong for r in rollouts]
        return out

    def _maybe_check_weight_sync(self, trainer: GRPOTrainer, engine: Any) -> None:
        from training.rl.engines import sequence_logprobs
        from training.rl.vllm_engine import VLLMEngine, check_weight_sync

        every = self.args.weight_sync_steps
        if not isinstance(engine, VLLMEngine) or not every or trainer.state.global_step % every:
            return
        model = trainer.accelerator.unwrap_model(trainer.model)
        prompt = self.tokens.prompt("# Activation: weight-sync probe")
        completion = self.tokens.encode('<tool_call>\n{"name": "ABSTAIN", "arguments": {}}\n</tool_call>')
        gap = check_weight_sync(  # both sides at temperature 1: the check is of the weights
            lambda p, c: sequence_logprobs(model, p, c, 1.0),
            engine.score, prompt, completion + [self.tokens.eos_id], self.args.weight_sync_threshold,
        )  # fmt: skip
        trainer._metrics["train"]["dapo/weight_sync_gap"].append(gap)


def build_trainer(model_args: ModelArguments, rl_args: RLArguments, config: GRPOConfig) -> Any:
    """The ``DapoTrainer`` over the replay pool (see the module docstring)."""
    require("trl")
    check_report_to(config.report_to)
    import torch
    from accelerate import PartialState
    from datasets import Dataset

    from rewards import CheckRewardConfig, RewardConfig

    model_args.refuse_lora("DAPO")  # RL trains every weight of a full model
    check_executor(rl_args.executor_options())  # executor ray: Ray installed and `address` answering, before any work
    if rl_args.torch_threads:
        torch.set_num_threads(rl_args.torch_threads)
    model_path = resolve_model(model_args)
    tokenizer = load_tokenizer(model_path)  # the project's chat template, also on a hub base model
    reward_cls = CheckRewardConfig if rl_args.format == "hier_checks" else RewardConfig
    reward_config = reward_cls.from_yaml(rl_args.reward_config) if rl_args.reward_config else reward_cls()
    settings = served_settings(rl_args, model_path)  # hier_checks: sample as the init's manager.json serves
    check_config(rl_args, config)  # after the settings: their grammar, token cap and view are checked too
    funcs, config.reward_weights = reward_functions(reward_config.weights())
    config.model_init_kwargs = {"dtype": model_args.dtype, **(config.model_init_kwargs or {})}
    seed = config.seed + PartialState().process_index
    rollouts = ManagerRollouts(rl_args, config, tokenizer, reward_config, seed)
    if rl_args.temperature_grid is not None:
        config.temperature = rollouts.choose_temperature(model_path, model_args.dtype)
    per_process = config.per_device_train_batch_size * (
        config.steps_per_generation or config.gradient_accumulation_steps
    )
    slots = [f"group slot {i} (start points come from the replay pool)" for i in range(per_process)]
    callback = rollout_share_callback(rollouts)
    trainer = dapo_trainer_class()(
        model=model_path,
        reward_funcs=funcs,
        args=config,
        train_dataset=Dataset.from_dict({"prompt": slots[:: config.num_generations]}),
        processing_class=tokenizer,
        rollouts=rollouts,
        callbacks=[callback],
    )
    callback.trainer = trainer
    trainer.manager_settings = settings  # hier_checks: the init checkpoint's manager.json (run_rl saves it)
    return trainer


def run_rl(model_args: ModelArguments, rl_args: RLArguments, config: GRPOConfig) -> dict[str, Any]:
    """Train, save the model, tokenizer, logs and model card in ``output_dir``; return the final metrics."""
    trainer = build_trainer(model_args, rl_args, config)
    try:
        result = trainer.train(resume_from_checkpoint=resolve_resume(config.resume_from_checkpoint))
    finally:
        trainer.rollouts.close()
    metrics = {f"train/{k.removeprefix('train_')}": v for k, v in result.metrics.items()}
    rewards = [e["reward"] for e in trainer.state.log_history if "reward" in e]
    if rewards:
        metrics.update({"rl/reward_first_step": rewards[0], "rl/reward_last_step": rewards[-1]})
    metrics["rl/rollout_s_total"] = trainer.rollouts.seconds
    metrics["rl/temperature"] = config.temperature
    trainer.save_model(config.output_dir)
    if trainer.accelerator.is_main_process:
        save_settings(trainer.manager_settings, rl_args, config.output_dir)  # hier_checks: manager.json
        trainer.save_metrics("all", metrics, combined=False)
        trainer.state.save_to_json(str(Path(config.output_dir) / "trainer_state.json"))
        groups = summarize_groups(read_records(Path(config.output_dir) / GROUPS_FILE))
        write_model_card(Path(config.output_dir), model_args, rl_args, config, metrics, groups)
    return metrics
