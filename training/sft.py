"""Supervised fine-tuning of the manager on the synthesized dataset.

One function, :func:`run_sft`, does the whole job; ``scripts/sft.py`` only parses a YAML config into the three
dataclasses below and calls it. The trainer is TRL's ``SFTTrainer``, used as is:

- Data: the ``dataset/`` folder a synthesis run writes (``datasets.DatasetDict`` with ``train`` and ``validation``;
  columns ``messages`` ``[{role, content}]`` and ``tools``, the function schemas). This is TRL's conversational format
  with tools: ``SFTTrainer`` renders each row with the tokenizer's chat template, passing ``tools``, so the system
  prompt carries the ``# Tools`` block exactly as at inference. ``formats`` picks the rows by their ``format`` column:
  ``flat`` (the default: the ``llm`` manager's conversations), ``hier`` (tier 1's of the ``hier`` manager),
  ``hier_checks`` (tier 1's writing checks), or several (:func:`~training.sft_rows.select_formats`); ``prompt_view:
  bare`` drops the system prompt and the tools from every row (:func:`~training.sft_rows.apply_prompt_view`).
  ``last_turn_only`` trains each sample's final assistant turn (its control action: the decision) and nothing before
  it: rows become TRL's conversational prompt-completion pairs (:func:`~training.sft_rows.to_last_turn`),
  ``SFTTrainer`` masks the prompt (``completion_only_loss``) and the assistant mask still applies, so the loss covers
  exactly that turn's tokens. ``turn_prefixes`` first makes one sample of each assistant turn (the conversation up to
  it, :func:`~training.sft_rows.to_turn_prefixes`), so that with ``last_turn_only`` the tool calls of a check are
  trained too, each with its own ``action`` to stratify by.
- Loss on assistant tokens only (``assistant_only_loss=True``, forced): the project's chat template
  (``harness/chat_template.jinja``) wraps each assistant body, tool-call JSON and ``<|im_end|>`` included, in
  ``{% generation %}`` markers, and TRL turns everything outside them into label -100.
- Length: TRL *truncates* sequences longer than ``max_length``, which would silently cut assistant tokens (and
  the end-of-turn the model must learn). :func:`drop_overlong` therefore removes every sample longer than
  ``max_length`` before the trainer sees it, and logs how many it dropped per split. Lengths come from the
  dataset's ``n_tokens`` column (the synthesis counts them with the same tokenizer and template); a row whose
  ``n_tokens`` is 0 (not counted) is tokenized here.
- Model: a path or hub id, or ``tiny`` for the embedded tiny Qwen3 (:mod:`training.models`), built once into the
  cache folder. ``use_peft`` trains LoRA adapters instead of all weights.
- Output (``output_dir``): the model, the tokenizer with its chat template, ``README.md`` (a short model card: data,
  drops, settings, metrics), ``all_results.json`` (the metrics of the final training and evaluation),
  ``trainer_state.json`` (the logged history: per-step loss, evaluations) and ``manager.json``, how the checkpoint is
  served (:func:`serving_settings`: the manager of its sample format, its prompt view, greedy under the grammar,
  ``serve_max_new_tokens``; :mod:`harness.manager.checkpoint_settings`; also in ``adapter/``). With ``use_peft`` the
  model there is the merged one (``merge_lora: true``, the default: the base with the adapter folded in by
  :func:`training.merge.merge_adapter`, servable as is) and the adapter is in ``output_dir/adapter``; ``merge_lora:
  false`` saves the adapter alone to ``output_dir`` (``stateguard merge`` folds it in later).
- Small subsets: ``max_train_samples`` / ``max_eval_samples`` take the first rows, or with ``stratify_by: label`` an
  equal share of each label (:func:`~training.sft_rows.stratified_subset`; the counts are logged as
  ``data/train_label/<value>``).
- Metrics are namespaced: ``data/...`` (samples used, over-length drops per split), ``train/...`` (TRL's final
  training metrics, plus ``train/tokens_per_second_after_first_step`` from :func:`steady_tokens_per_second`:
  ``include_num_input_tokens_seen`` is switched on to count non-padding tokens per step) and ``eval/...`` (the
  validation split after training). The per-step logs are TRL's (``loss``, ``grad_norm``, ``learning_rate``, ...).
- Resume: ``--resume_from_checkpoint DIR`` or ``true`` (the latest ``checkpoint-*`` in ``output_dir``) restores
  the model, optimizer, scheduler, RNG states and data position (the Trainer's own checkpoints; save them with
  ``save_strategy: steps``). With ``full_determinism: true`` on CPU, a run killed after a checkpoint and resumed
  ends with weights bitwise equal to an uninterrupted run's (tests/training/test_sft_resume.py).
- Speed on CPU: TRL scores every position of a sequence with its LM head there (on GPUs only the labelled ones);
  :func:`training.lm_head.use_compact_lm_head` scores only the labelled positions on CPU, same values (~10x faster
  steps on manager samples, whose long system turn carries no label).
- Distributed: the same code runs under DeepSpeed ZeRO-2/3 (``--deepspeed configs/accelerate/deepspeed/zero2.json``
  or an accelerate config); tests/training/test_sft_zero2.py trains with two CPU processes under ``torchrun``.
"""

from __future__ import annotations

import json
import logging
import os
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from harness.checkpoints import refuse_adapter_only
from harness.import_utils import require
from harness.manager.checkpoint_settings import ManagerSettings, write_manager_settings
from harness.manager.prompt_view import PROMPT_VIEWS
from harness.tokenizer import CACHE_DIR_ENV, DEFAULT_CACHE_DIR, load_tokenizer
from harness.tracking import check_report_to
from training.merge import merge_adapter
from training.models import TOKENIZER_SIZE
from training.sft_rows import apply_prompt_view, select_formats, stratified_subset, to_last_turn, to_turn_prefixes

if TYPE_CHECKING:
    from datasets import Dataset, DatasetDict
    from transformers import PreTrainedTokenizerBase
    from trl import SFTConfig, SFTTrainer

logger = logging.getLogger(__name__)

TINY_MODEL = "tiny"
ADAPTER_SUBDIR = "adapter"
"""With ``use_peft`` and ``merge_lora``: the subfolder of ``output_dir`` that holds the trained LoRA adapter."""


@dataclass
class ModelArguments:
    """Which model to fine-tune, and whether to train LoRA adapters instead of all weights."""

    model_name_or_path: str = field(
        default=TINY_MODEL,
        metadata={
            "help": "Model folder or hub id (e.g. Qwen/Qwen3-8B), or 'tiny' for the embedded tiny Qwen3, built once "
            "into $STATEGUARD_CACHE_DIR (default ~/.cache/stateguard)/tiny-qwen3-seed<tiny_seed>."
        },
    )
    tiny_seed: int = field(default=0, metadata={"help": "Weight-init seed of the tiny model (model 'tiny' only)."})
    dtype: str = field(
        default="auto",
        metadata={"help": "Weight dtype when loading: auto (as saved), bfloat16, float16 or float32."},
    )
    attn_implementation: str | None = field(
        default=None, metadata={"help": "Attention kernel (sdpa, eager, flash_attention_2); default: transformers'."}
    )
    use_peft: bool = field(default=False, metadata={"help": "Train LoRA adapters (PEFT) instead of all weights."})
    lora_r: int = field(default=16, metadata={"help": "LoRA rank."})
    lora_alpha: int = field(default=32, metadata={"help": "LoRA scaling numerator (scale = alpha / r)."})
    lora_dropout: float = field(default=0.05, metadata={"help": "Dropout on the LoRA branch."})
    lora_target_modules: list[str] = field(
        default_factory=lambda: ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"],
        metadata={"help": "Module names that get LoRA adapters (Qwen3: attention and MLP projections)."},
    )
    merge_lora: bool = field(
        default=True,
        metadata={
            "help": "With use_peft: after training, save the adapter to output_dir/adapter and the merged model (base "
            "+ adapter folded in; what vLLM and `stateguard serve` load) to output_dir. false: output_dir holds the "
            "adapter only (merge it later with `stateguard merge --adapter DIR --out DIR`)."
        },
    )

    def refuse_lora(self, trainer: str) -> None:
        """Raise ``ValueError`` (one line, with the fix) when ``trainer``, which trains every weight of a full model,
        is given ``use_peft`` or a LoRA adapter-only ``model_name_or_path``."""
        if self.use_peft:
            raise ValueError(
                f"use_peft=true: {trainer} trains all weights here (no LoRA in its trainer or vLLM weight sync); set "
                "use_peft: false and start from a merged SFT model (scripts/sft.py merges by default; an adapter "
                "folder: stateguard merge --adapter DIR --out DIR)"
            )
        refuse_adapter_only(self.model_name_or_path, "model_name_or_path")

    def __post_init__(self) -> None:
        valid_dtypes = ("auto", "bfloat16", "float16", "float32")
        if self.dtype not in valid_dtypes:
            raise ValueError(f"dtype={self.dtype!r} is not one of {', '.join(valid_dtypes)}; pick one of them")
        if self.use_peft and (self.lora_r <= 0 or self.lora_alpha <= 0):
            raise ValueError(
                f"use_peft needs lora_r > 0 and lora_alpha > 0 (got lora_r={self.lora_r}, "
                f"lora_alpha={self.lora_alpha}); set positive values"
            )


@dataclass
class DataArguments:
    """Where the synthesized dataset is, and how much of it to use."""

    dataset_path: str = field(
        default="runs/synth-smoke",
        metadata={
            "help": "A synthesis output folder (stateguard synthesize --out DIR) or its dataset/ folder: a "
            "datasets.DatasetDict with train and validation splits."
        },
    )
    max_train_samples: int | None = field(
        default=None, metadata={"help": "Use at most this many training samples (after the length filter)."}
    )
    max_eval_samples: int | None = field(
        default=None, metadata={"help": "Use at most this many validation samples (after the length filter)."}
    )
    stratify_by: str | None = field(
        default=None,
        metadata={
            "help": "A dataset column (e.g. `label`): the max_train_samples / max_eval_samples subsets are drawn "
            "round-robin over its values, each value's rows in a seeded random order, so a rare value (repair "
            "samples are ~7 % of a synthesis) is not left out of a small subset. Unset: the first rows."
        },
    )
    subset_seed: int = field(default=0, metadata={"help": "The seed of the stratified subsets' row order."})
    formats: list[str] = field(
        default_factory=lambda: ["flat"],
        metadata={
            "help": "Sample formats to train on (the dataset's `format` column, synthesis.samples.FORMATS): flat "
            "(the `llm` manager's conversations), hier (tier 1's of the `hier` manager deciding) and/or hier_checks "
            "(tier 1's writing the turn's checks). A dataset without the column holds flat samples only. One format "
            "says how the checkpoint is served (manager.json: flat -> llm, hier -> hier, hier_checks -> hier writing "
            "checks)."
        },
    )
    prompt_view: str = field(
        default="full",
        metadata={
            "help": "What the model is trained (and then served) on: full (the conversations as synthesized, system "
            "prompt and tools block first) or bare (without both: harness.manager.prompt_view). Saved in "
            "manager.json."
        },
    )
    serve_max_new_tokens: int = field(
        default=384,
        metadata={
            "help": "The serving cap on one reply, in tokens, saved in the checkpoint's manager.json (stateguard "
            "run/evaluate --manager [hier:]llm-hf:DIR use it; --manager-max-tokens overrides it). Not a training "
            "setting."
        },
    )

    last_turn_only: bool = field(
        default=False,
        metadata={
            "help": "Train on each sample's last assistant turn only (its control action), the turns before it "
            "(checks, probes) being context: the rows become prompt-completion pairs, the prompt masked."
        },
    )
    turn_prefixes: bool = field(
        default=False,
        metadata={
            "help": "Expand each sample into one per assistant turn: the conversation up to and including that turn, "
            "with an `action` column naming the turn's action (its tool call's name). With last_turn_only each one "
            "trains its own last turn, so a check's tool calls (check_execution, run_probe) are trained as well as "
            "its decision; stratify_by: action balances the actions."
        },
    )

    def __post_init__(self) -> None:
        from synthesis.samples import FORMATS

        if not self.formats or any(f not in FORMATS for f in self.formats):
            raise ValueError(f"formats={self.formats}: use a non-empty subset of {list(FORMATS)}")
        if self.prompt_view not in PROMPT_VIEWS or self.serve_max_new_tokens < 1:
            raise ValueError(f"prompt_view={self.prompt_view!r}, serve_max_new_tokens={self.serve_max_new_tokens}: "
                             f"use one of {', '.join(PROMPT_VIEWS)} and a positive number of tokens")  # fmt: skip
        for name in ("max_train_samples", "max_eval_samples"):
            value = getattr(self, name)
            if value is not None and value <= 0:
                raise ValueError(f"{name}={value} must be positive; leave it unset to use every sample")
        if self.stratify_by is not None and self.max_train_samples is None and self.max_eval_samples is None:
            raise ValueError(
                f"stratify_by={self.stratify_by!r} picks which rows a limited subset keeps, but neither "
                "max_train_samples nor max_eval_samples is set; set one, or drop stratify_by"
            )


def resolve_dataset_dir(dataset_path: str | Path) -> Path:
    """The ``DatasetDict`` folder: ``dataset_path`` itself, or its ``dataset/`` subfolder (a synthesis out dir)."""
    path = Path(dataset_path).expanduser()
    for candidate in (path, path / "dataset"):
        if (candidate / "dataset_dict.json").is_file():
            return candidate
    raise FileNotFoundError(
        f"dataset_path={str(path)!r} holds no datasets.DatasetDict (no dataset_dict.json there or in dataset/); "
        "point it at a `stateguard synthesize --out DIR` folder or its dataset/ subfolder"
    )


def resolve_model(model_args: ModelArguments) -> str:
    """The model folder or hub id to load; ``tiny`` is built (once) into the cache folder."""
    if model_args.model_name_or_path != TINY_MODEL:
        return model_args.model_name_or_path
    from training.models import build_tiny_qwen3

    cache_root = Path(os.environ.get(CACHE_DIR_ENV) or DEFAULT_CACHE_DIR).expanduser()
    return str(build_tiny_qwen3(cache_root / f"tiny-qwen3-seed{model_args.tiny_seed}", seed=model_args.tiny_seed))


def count_tokens(tokenizer: PreTrainedTokenizerBase, row: dict[str, Any]) -> int:
    """Tokens of one row rendered with the tokenizer's chat template and its tools, as ``SFTTrainer`` renders it."""
    tools = row.get("tools")
    tools = json.loads(tools) if isinstance(tools, str) else tools
    ids = tokenizer.apply_chat_template(row["messages"], tools=tools, tokenize=True, return_dict=True)["input_ids"]
    return len(ids)


def drop_overlong(
    dataset: Dataset, max_length: int | None, tokenizer: PreTrainedTokenizerBase | None = None
) -> tuple[Dataset, int]:
    """``dataset`` without the rows longer than ``max_length`` tokens, and how many were dropped.

    Lengths come from ``n_tokens``; rows with ``n_tokens`` 0 (the synthesis did not count) are tokenized with
    ``tokenizer``, which is then required. The synthesis counts with the Qwen3 tokenizer, so for a tokenizer of
    another size (e.g. SmolLM2's) every row is recounted. ``max_length`` None keeps everything.
    """
    if max_length is None:
        return dataset, 0
    qwen3_counts = tokenizer is None or len(tokenizer) == TOKENIZER_SIZE
    lengths = [0] * len(dataset)
    if "n_tokens" in dataset.column_names and qwen3_counts:
        lengths = list(dataset["n_tokens"])
    uncounted = [i for i, n in enumerate(lengths) if n <= 0]
    if uncounted:
        if tokenizer is None:
            raise ValueError(
                f"{len(uncounted)} rows have no n_tokens count; pass the tokenizer so drop_overlong can count them"
            )
        for i in uncounted:
            lengths[i] = count_tokens(tokenizer, dataset[i])
    keep = [i for i, n in enumerate(lengths) if n <= max_length]
    dropped = len(dataset) - len(keep)
    return (dataset.select(keep) if dropped else dataset), dropped


def load_sft_splits(
    data_args: DataArguments, max_length: int | None, tokenizer: PreTrainedTokenizerBase | None = None
) -> tuple[DatasetDict, dict[str, int]]:
    """The train/validation splits ready for ``SFTTrainer``, and their data metrics: the over-length drops per split
    (``dropped_overlong_<split>``) and, with ``stratify_by``, the rows kept per value (``<split>_<column>/<value>``).

    Only the rows of ``data_args.formats`` are used (:func:`~training.sft_rows.select_formats`), seen through
    ``data_args.prompt_view`` (:func:`~training.sft_rows.apply_prompt_view`), and only their ``messages`` and
    ``tools`` are kept (the other columns are metadata TRL would ignore or trip over); with ``last_turn_only`` they
    are ``prompt``, ``completion`` and ``tools`` (:func:`~training.sft_rows.to_last_turn`).
    """
    from datasets import DatasetDict, load_from_disk

    directory = resolve_dataset_dir(data_args.dataset_path)
    splits = load_from_disk(str(directory))
    missing = [name for name in ("train", "validation") if name not in splits]
    if missing:
        raise ValueError(f"{directory} has no {' or '.join(missing)} split (found {list(splits)}); re-run synthesis")
    limits = {"train": data_args.max_train_samples, "validation": data_args.max_eval_samples}
    column = data_args.stratify_by
    out, stats = {}, {}
    for name, limit in limits.items():
        rows = apply_prompt_view(select_formats(splits[name], data_args.formats), data_args.prompt_view)
        if data_args.turn_prefixes:
            rows = to_turn_prefixes(rows)
        kept, dropped = drop_overlong(rows, max_length, tokenizer)
        stats[f"dropped_overlong_{name}"] = dropped
        if dropped:
            logger.warning(
                "dropped %d of %d %s samples longer than max_length=%d tokens (never truncated)",
                dropped, len(splits[name]), name, max_length,
            )  # fmt: skip
        if limit is not None and column is not None:
            kept = stratified_subset(kept, column, limit, data_args.subset_seed)
            counts = Counter(kept[column])
            strata = {value: counts[value] for value in sorted(counts, key=str)}
            stats.update({f"{name}_{column}/{value}": n for value, n in strata.items()})
            logger.info("%s subset by %s: %s", name, column, strata)
        elif limit is not None:
            kept = kept.select(range(min(limit, len(kept))))
        kept = kept.select_columns(["messages", "tools"])
        out[name] = to_last_turn(kept) if data_args.last_turn_only else kept
    if len(out["train"]) == 0:
        raise ValueError(
            f"no training sample of {directory} in formats {data_args.formats} fits max_length={max_length} "
            f"({stats['dropped_overlong_train']} dropped); raise max_length, or pick formats the dataset holds"
        )
    return DatasetDict(out), stats


def build_trainer(
    model_args: ModelArguments,
    data_args: DataArguments,
    sft_config: SFTConfig,
    trainer_class: type[SFTTrainer] | None = None,
) -> tuple[SFTTrainer, dict[str, int]]:
    """The ``SFTTrainer`` over the length-filtered splits, and their data metrics (see :func:`load_sft_splits`).
    ``trainer_class``: a subclass of TRL's ``SFTTrainer`` to build instead (same constructor), e.g. one with its own
    ``compute_loss``."""
    require("trl")
    check_report_to(sft_config.report_to)
    if model_args.use_peft:
        require("peft")
    from trl import SFTTrainer

    from training.lm_head import use_compact_lm_head

    if not sft_config.assistant_only_loss:
        logger.info("assistant_only_loss forced to True: the manager is trained on its own turns only")
        sft_config.assistant_only_loss = True
    if data_args.last_turn_only and sft_config.completion_only_loss is False:
        raise ValueError(
            "last_turn_only trains the last assistant turn alone, but completion_only_loss=false puts the loss on "
            "every assistant turn; drop completion_only_loss (or set it true), or turn last_turn_only off"
        )
    if sft_config.include_num_input_tokens_seen == "no":  # per-step token counts, for the throughput metric
        sft_config.include_num_input_tokens_seen = "non_padding"
    model_path = resolve_model(model_args)
    tokenizer = load_tokenizer(model_path)  # the project's chat template, also on a hub base model
    splits, data_stats = load_sft_splits(data_args, sft_config.max_length, tokenizer)
    model_init_kwargs = {"dtype": model_args.dtype}
    if model_args.attn_implementation is not None:
        model_init_kwargs["attn_implementation"] = model_args.attn_implementation
    sft_config.model_init_kwargs = {**model_init_kwargs, **(sft_config.model_init_kwargs or {})}
    trainer = (trainer_class or SFTTrainer)(
        model=model_path,
        args=sft_config,
        train_dataset=splits["train"],
        eval_dataset=splits["validation"] if len(splits["validation"]) else None,
        processing_class=tokenizer,
        peft_config=_lora_config(model_args),
    )
    # On CPU, score only the labelled positions (TRL scores every position there; see training/lm_head.py)
    use_compact_lm_head(trainer.model.get_base_model() if model_args.use_peft else trainer.model)
    return trainer, data_stats


def _lora_config(model_args: ModelArguments) -> Any:
    if not model_args.use_peft:
        return None
    from peft import LoraConfig

    return LoraConfig(
        r=model_args.lora_r,
        lora_alpha=model_args.lora_alpha,
        lora_dropout=model_args.lora_dropout,
        target_modules=model_args.lora_target_modules,
        task_type="CAUSAL_LM",
    )


def steady_tokens_per_second(log_history: list[dict[str, Any]]) -> float | None:
    """Training throughput without the first logged step (which warms up): tokens over seconds between the first
    and the last per-step log of the latest session, or None with fewer than two such logs.

    Per-step logs (those with ``loss``) carry ``num_input_tokens_seen`` (non-padding tokens, all processes) and
    ``train_runtime`` (seconds since this session's ``train()`` began) when ``include_num_input_tokens_seen`` is on.
    A resumed run's history starts with the earlier session's logs, whose clock restarts: only the trailing logs
    with increasing ``train_runtime`` count.
    """
    logs = [e for e in log_history if {"loss", "train_runtime", "num_input_tokens_seen"} <= e.keys()]
    start = len(logs) - 1
    while start > 0 and logs[start - 1]["train_runtime"] < logs[start]["train_runtime"]:
        start -= 1
    if len(logs) - start < 2:
        return None
    first, last = logs[start], logs[-1]
    return (last["num_input_tokens_seen"] - first["num_input_tokens_seen"]) / (
        last["train_runtime"] - first["train_runtime"]
    )


def resolve_resume(resume_from_checkpoint: str | None) -> str | bool | None:
    """``--resume_from_checkpoint``'s value for ``Trainer.train``: a checkpoint folder, or ``True`` (the string
    ``true``: the latest ``checkpoint-*`` in ``output_dir``), or None (start afresh; also ``false``)."""
    if resume_from_checkpoint is None or resume_from_checkpoint.lower() == "false":
        return None
    if resume_from_checkpoint.lower() == "true":
        return True
    return resume_from_checkpoint


def run_sft(
    model_args: ModelArguments,
    data_args: DataArguments,
    sft_config: SFTConfig,
    trainer_class: type[SFTTrainer] | None = None,
) -> dict[str, Any]:
    """Train, evaluate on the validation split, save model + tokenizer + model card; return the metrics.
    ``trainer_class``: as in :func:`build_trainer`.

    Metrics are namespaced: ``train/...`` (the final ``trainer.train`` output), ``eval/...`` (validation loss after
    training) and ``data/...`` (sample counts and over-length drops).
    """
    trainer, data_stats = build_trainer(model_args, data_args, sft_config, trainer_class)
    metrics: dict[str, Any] = {
        "data/train_samples": len(trainer.train_dataset),
        "data/eval_samples": len(trainer.eval_dataset) if trainer.eval_dataset is not None else 0,
        **{f"data/{key}": n for key, n in data_stats.items()},
    }
    result = trainer.train(resume_from_checkpoint=resolve_resume(sft_config.resume_from_checkpoint))
    metrics.update({f"train/{k.removeprefix('train_')}": v for k, v in result.metrics.items()})
    tokens_per_second = steady_tokens_per_second(trainer.state.log_history)
    if tokens_per_second is not None:
        metrics["train/tokens_per_second_after_first_step"] = tokens_per_second
    if trainer.eval_dataset is not None:
        metrics.update({f"eval/{k.removeprefix('eval_')}": v for k, v in trainer.evaluate().items()})
    trainer.log_metrics("all", metrics)
    merge = model_args.use_peft and model_args.merge_lora
    adapter_dir = Path(sft_config.output_dir) / ADAPTER_SUBDIR if merge else Path(sft_config.output_dir)
    trainer.save_model(str(adapter_dir))  # the tokenizer (with chat_template.jinja) is saved alongside
    if merge:
        if trainer.accelerator.is_main_process:
            merge_adapter(adapter_dir, sft_config.output_dir, model_args.dtype)
        trainer.accelerator.wait_for_everyone()
    if trainer.accelerator.is_main_process:
        trainer.save_metrics("all", metrics, combined=False)
        trainer.state.save_to_json(str(Path(sft_config.output_dir) / "trainer_state.json"))  # the loss curve
        write_model_card(Path(sft_config.output_dir), model_args, data_args, sft_config, metrics)
        settings = serving_settings(data_args)
        for folder in {Path(sft_config.output_dir), adapter_dir} if settings is not None else ():
            write_manager_settings(folder, settings)  # the adapter's too: `stateguard merge` copies it
    return metrics


SERVED_AS = {"flat": ("llm", None), "hier": ("hier", "decisions"), "hier_checks": ("hier", "checks")}
"""Sample format -> the manager the checkpoint is served as: ``(policy, writes)`` of its manager.json."""


def serving_settings(data_args: DataArguments) -> ManagerSettings | None:
    """How a checkpoint trained on ``data_args`` is served (its ``manager.json``): the manager of its one sample
    format, its prompt view, greedy under the grammar, ``serve_max_new_tokens``; None (with a warning) for a mix of
    formats, which serves no single manager."""
    if len(set(data_args.formats)) != 1:
        logger.warning("formats %s train more than one manager; no manager.json written (write one with `stateguard "
                       "model settings DIR ...`)", data_args.formats)  # fmt: skip
        return None
    policy, writes = SERVED_AS[data_args.formats[0]]
    return ManagerSettings(policy, writes, data_args.prompt_view, max_new_tokens=data_args.serve_max_new_tokens)


def settings_and_metrics(settings: dict[str, Any], metrics: dict[str, Any]) -> list[str]:
    """A model card's "Settings" list and "Metrics" table (floats to 6 significant digits), as Markdown lines."""
    return [
        "## Settings",
        "",
        *(f"- {name}: {value}" for name, value in settings.items()),
        "",
        "## Metrics",
        "",
        "| metric | value |",
        "|---|---|",
        *(f"| {k} | {v:.6g} |" if isinstance(v, float) else f"| {k} | {v} |" for k, v in metrics.items()),
        "",
    ]


def write_model_card(
    out_dir: Path, model_args: ModelArguments, data_args: DataArguments, sft_config: SFTConfig, metrics: dict
) -> Path:
    """``out_dir/README.md``: base model, data, drops, the main settings and the final metrics."""
    settings = {
        name: getattr(sft_config, name)
        for name in (
            "num_train_epochs", "max_steps", "learning_rate", "per_device_train_batch_size",
            "gradient_accumulation_steps", "max_length", "bf16", "gradient_checkpointing", "seed",
        )
    }  # fmt: skip
    merged = model_args.use_peft and model_args.merge_lora
    loss_on = "assistant tokens"
    if data_args.last_turn_only:
        loss_on = "each sample's last assistant turn (its control action)"
    lines = [
        "# StateGuard manager (SFT)",
        "",
        f"- base model: `{model_args.model_name_or_path}`" + (" with LoRA adapters" if model_args.use_peft else "")
        + (f" (merged into this model; the adapter in `{ADAPTER_SUBDIR}/`)" if merged else ""),
        f"- data: `{resolve_dataset_dir(data_args.dataset_path)}` (train / validation splits of a synthesis run)",
        f"- loss: {loss_on} (tool-call JSON and `<|im_end|>` included); over-length samples dropped, never truncated",
        "- trained with TRL `SFTTrainer` via `scripts/sft.py`",
        "",
        *settings_and_metrics(settings, metrics),
    ]  # fmt: skip
    path = out_dir / "README.md"
    path.write_text("\n".join(lines), encoding="utf-8")
    return path
