"""The main job end to end: ``stateguard pipeline --config configs/pipeline/<name>.yaml``.

``make demo`` runs it on ``configs/pipeline/demo.yaml``: everything on CPU with the embedded tiny Qwen3 (random init,
the real Qwen3 tokenizer), everything under one output folder:

1. ``model``      build the tiny Qwen3 (``OUT/model``);
2. ``synthesize`` counterfactual synthesis (``OUT/synthesize``: dataset, episodes, faults);
3. ``sft``        ``accelerate launch scripts/sft.py`` from the tiny model on ``OUT/synthesize`` (``OUT/sft``);
4. ``rl``         ``accelerate launch scripts/rl.py`` (DAPO) from the SFT checkpoint on the same data (``OUT/rl``);
5. ``evaluate``   serve the RL checkpoint with the local OpenAI-compatible stand-in (``stateguard serve --cpu``) and
                  evaluate ``none`` / ``rule`` / ``llm(SFT)`` / ``llm(SFT+RL)`` on a held-out faulted suite with the
                  scripted worker (SIMULATED) (``OUT/evaluate``: results.json, report.md). The demo plays the
                  ``heldout-demo`` suite's clean episode and the two faults whose turn has the most scored
                  dependent turns (``eval_fault_order: dependents``), so a fault can spread and the DCR is defined.

The flags are the fields of :class:`PipelineConfig` (:mod:`harness.config_cli`: the defaults, then ``--config FILE``
(default ``configs/pipeline/demo.yaml``), then the flags, e.g. ``--eval_limit 2`` or ``--serve-port 8018``; every
value's type is checked). ``--out`` (default: the config's ``out``, relative to the repository root; a flag's path is
relative to the current folder) is checked before the first stage: a writable folder, created when missing. Each stage
writes ``OUT/<stage>/stage.json`` (seconds, key figures and the stage's fingerprint: code version, config values,
config file digests, upstream fingerprints) when it completes; a stage whose marker exists and matches is skipped, so
re-running resumes after the last completed stage (and the trainers' own checkpoints resume inside a stage). Before the
first stage (:mod:`training.pipeline_guard`) ``--out`` is locked (a second pipeline on it is refused), a marker that is
unreadable, has no or another fingerprint, or lies below an unfinished stage stops the run with one line naming the
file and the fix, and every file the remaining stages read must exist. ``--from-stage STAGE`` discards that stage's
folder and the later ones and runs from it. Exit code 0 when every stage ran, 1 when a stage failed (re-run to resume),
2 for bad input. The training stages run as real launcher subprocesses, exactly as a user would type them; their output
goes to ``OUT/<stage>/log.txt`` and the command is printed. The run ends with a summary table (dataset size, losses,
rewards before/after RL, where the report is and, per manager, turn accuracy, DCR with its number of turns, and the
paired turn-accuracy difference versus the first manager, ``none``, with its bootstrap CI and P(diff <= 0)), the
checkpoints and the commands to try next (view an episode, serve the RL checkpoint, evaluate it:
:func:`next_steps`) and, as the last line, one JSON object with ``total_s`` and each stage's seconds.

The tiny model is random-init and trained for a few steps: the demo shows that the pipeline runs, not that the
manager learned anything (the small-model study measures that with a real pretrained model).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import re
import shlex
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from harness.cli import prepare_out_dir
from harness.config_cli import add_config_arguments, given_flag, parse_config
from harness.run_guard import OutLock
from harness.tracking import check_report_to_choice, resolve_report_to, trainer_flags
from harness.yaml_config import load_yaml_config
from training.pipeline_guard import MARKER, check_inputs, discard_from, read_markers, stage_fingerprints

if TYPE_CHECKING:
    from harness.evaluation.evaluate import EvaluationConfig

logger = logging.getLogger(__name__)

ROOT = Path(__file__).resolve().parents[1]
STAGES = ("model", "synthesize", "sft", "rl", "evaluate")
RL_LABEL = "llm(SFT+RL)"
"""The served RL checkpoint's arm in the ``evaluate`` stage (its episodes: ``episodes/llm_SFT_RL_.jsonl``)."""


@dataclass
class PipelineConfig:
    """What each stage runs; paths are relative to the repository root unless absolute."""

    out: str = field(default="runs/demo", metadata={"help": "Output folder of every stage."})
    synthesis: str = field(
        default="configs/synthesis/smoke.yaml", metadata={"help": "Synthesis config (stateguard synthesize)."}
    )
    sft: str = field(default="configs/sft/tiny-cpu.yaml", metadata={"help": "SFT config (scripts/sft.py)."})
    sft_args: list[str] = field(
        default_factory=list, metadata={"help": "Extra command-line overrides for scripts/sft.py."}
    )
    rl: str = field(default="configs/rl/tiny-cpu.yaml", metadata={"help": "DAPO config (scripts/rl.py)."})
    rl_args: list[str] = field(
        default_factory=list, metadata={"help": "Extra command-line overrides for scripts/rl.py."}
    )
    accelerate_config: str = field(
        default="configs/accelerate/cpu.yaml", metadata={"help": "accelerate config of the training launches."}
    )
    tiny_seed: int = field(default=0, metadata={"help": "Weight-init seed of the tiny model."})
    eval_suite: str = field(default="smoke", metadata={"help": "Evaluation suite (a held-out name or a folder)."})
    eval_limit: int | None = field(default=None, metadata={"help": "Keep only the first N tasks of the suite."})
    eval_fault_limit: int | None = field(
        default=None, metadata={"help": "Keep only N faults of those tasks (each task keeps its clean run)."}
    )
    eval_fault_order: str = field(
        default="file",
        metadata={
            "help": "Which faults eval_fault_limit keeps: file (the first N of the faults file) | dependents (the N "
            "whose turn has the most scored dependent turns, so the fault can spread; ties in file order)."
        },
    )
    eval_max_tokens: int = field(default=48, metadata={"help": "Cap on one manager reply of the llm variants."})
    eval_max_actions: int | None = field(
        default=None,
        metadata={"help": "Manager actions per activation in the evaluation (RuntimeConfig.max_actions)."},
    )
    serve_port: int = field(default=8017, metadata={"help": "Port of the local stand-in server."})
    isolation: Literal["bwrap", "none"] = field(default="bwrap", metadata={"help": "Sandbox isolation."})
    report_to: str = field(
        default="auto",
        metadata={
            "help": "Tracker of the SFT, RL and evaluation runs (named <out folder>-sft, -rl, -eval): auto (trackio "
            "outside CI, none in CI) | trackio | tensorboard | wandb | none."
        },
    )

    def __post_init__(self) -> None:
        from harness.evaluation.suite import FAULT_ORDERS

        check_report_to_choice(self.report_to)

        if self.eval_fault_order not in FAULT_ORDERS:
            raise ValueError(
                f"eval_fault_order={self.eval_fault_order!r} is not a fault order; use one of "
                f"{', '.join(FAULT_ORDERS)} (see harness.evaluation.suite)."
            )

    @classmethod
    def from_yaml(cls, path: str | Path, **overrides: Any) -> PipelineConfig:
        return load_yaml_config(cls, path, "pipeline", "configs/pipeline/demo.yaml", **overrides)

    def path(self, value: str) -> Path:
        p = Path(value)
        return p if p.is_absolute() else ROOT / p


# ---------------------------------------------------------------- stages
@dataclass
class Context:
    config: PipelineConfig
    out: Path

    def stage_dir(self, stage: str) -> Path:
        return self.out / stage

    @property
    def report_to(self) -> str:
        return resolve_report_to(self.config.report_to)


def _launch(ctx: Context, stage: str, script: str, config: str, args: list[str]) -> None:
    """``accelerate launch`` a training script (reporting to ``report_to`` as run ``<out folder>-<stage>``); output
    to OUT/<stage>/log.txt (tail shown on failure)."""
    accelerate_config = ctx.config.path(ctx.config.accelerate_config)
    log = ctx.stage_dir(stage) / "log.txt"
    args = [*trainer_flags(ctx.report_to, f"{ctx.out.name}-{stage}"), *args]
    launch_training(
        script, ctx.config.path(config), args, accelerate_config=accelerate_config, log=log, what=f"stage {stage}"
    )


def launch_training(
    script: str, config: Path, args: list[str], *, accelerate_config: Path, log: Path, what: str
) -> None:
    """``accelerate launch scripts/<script> --config CONFIG ARGS`` offline, as a user would type it (the command is
    printed); output to ``log``. A ``script`` without ``.py`` is a module (``-m package.module``). A failure
    raises ``RuntimeError`` naming ``what`` with the log's tail."""
    target = [str(ROOT / "scripts" / script)] if script.endswith(".py") else ["-m", script]
    command = [
        sys.executable, "-m", "accelerate.commands.launch", "--config_file", str(accelerate_config),
        *target, "--config", str(config), *args,
    ]  # fmt: skip
    print(f"  $ {shlex.join(command)}", flush=True)
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
    code = run_logged(command, env, log, desc=what)
    if code != 0:
        tail = "\n".join(log.read_text(errors="replace").splitlines()[-25:])
        raise RuntimeError(f"{what}: {script} exited with code {code}; log {log}:\n{tail}")


TRAINER_BAR = re.compile(rb"(?:^|[\r\n]) *\d+%\|[^|\r\n]*\| *(\d+)/(\d+) \[")
"""The Trainer's step bar in a child's output: a tqdm bar *without* a description (dataset maps, shard writers and the
like have one), e.g. ``\r 25%|██▌       | 2/8 [00:03<00:09, 1.5s/it]``."""


def run_logged(command: list[str], env: dict[str, str], log: Path, *, desc: str) -> int:
    """Run ``command`` with its output (stdout and stderr) going to ``log``; meanwhile show the Trainer's step bar
    found in that output as a progress bar of our own, so a long training stage is visibly moving. Returns the exit
    code."""
    from tqdm import tqdm

    with open(log, "wb") as fh, tqdm(desc=f"  {desc}", unit="step", leave=False) as bar:
        process = subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        assert process.stdout is not None
        tail = b""
        for chunk in iter(lambda: process.stdout.read1(65536), b""):
            fh.write(chunk)
            steps = TRAINER_BAR.findall(tail + chunk)
            tail = chunk[-200:]  # a bar split across two reads is still found
            if steps:
                done, total = (int(x) for x in steps[-1])
                if bar.total != total:
                    bar.reset(total=total)
                bar.n = done
                bar.refresh()
        return process.wait()


def trainer_log(folder: Path) -> list[dict[str, Any]]:
    """The ``log_history`` of ``folder/trainer_state.json`` (per-step logs), or [] when there is none."""
    path = folder / "trainer_state.json"
    return json.loads(path.read_text())["log_history"] if path.is_file() else []


def stage_model(ctx: Context) -> dict[str, Any]:
    from training.models import build_tiny_qwen3

    path = build_tiny_qwen3(ctx.stage_dir("model") / "tiny-qwen3", seed=ctx.config.tiny_seed)
    return {"checkpoint": str(path)}


def stage_synthesize(ctx: Context) -> dict[str, Any]:
    from synthesis.config import SynthesisConfig
    from synthesis.driver import synthesize

    config = SynthesisConfig.from_yaml(ctx.config.path(ctx.config.synthesis))
    result = synthesize(config, ctx.stage_dir("synthesize"), progress=True)
    return {"trajectories": result.trajectories, "samples": result.stats["samples"]["total"]}


def stage_sft(ctx: Context) -> dict[str, Any]:
    out = ctx.stage_dir("sft")
    model = _done(ctx, "model")["checkpoint"]
    args = [
        "--model_name_or_path",
        model,
        "--dataset_path",
        str(ctx.stage_dir("synthesize")),
        "--output_dir",
        str(out),
    ]
    _launch(ctx, "sft", "sft.py", ctx.config.sft, args + ctx.config.sft_args)
    results = json.loads((out / "all_results.json").read_text())
    losses = [e["loss"] for e in trainer_log(out) if "loss" in e]
    return {
        "checkpoint": str(out),
        "train_loss_first": losses[0] if losses else None,
        "train_loss_last": losses[-1] if losses else None,
        "eval_loss": results.get("eval/loss", results.get("eval_loss")),
    }


def stage_rl(ctx: Context) -> dict[str, Any]:
    out = ctx.stage_dir("rl")
    args = ["--model_name_or_path", str(ctx.stage_dir("sft")), "--pool", str(ctx.stage_dir("synthesize"))]
    _launch(ctx, "rl", "rl.py", ctx.config.rl, args + ["--output_dir", str(out), *ctx.config.rl_args])
    rewards = [e["reward"] for e in trainer_log(out) if "reward" in e]
    return {
        "checkpoint": str(out),
        "reward_first_step": rewards[0] if rewards else None,
        "reward_last_step": rewards[-1] if rewards else None,
        "steps": len(rewards),
    }


def evaluation_config(
    config: PipelineConfig, out: Path, managers: list[str], labels: list[str], cache: Path
) -> EvaluationConfig:
    """The evaluation the ``evaluate`` stage runs (suite, task and fault selection, runtime) for ``managers``."""
    from harness.evaluation.evaluate import EvaluationConfig

    fields = {
        "suite": config.eval_suite,
        "out": str(out),
        "managers": managers,
        "labels": labels,
        "limit": config.eval_limit,
        "fault_limit": config.eval_fault_limit,
        "fault_order": config.eval_fault_order,
        "cache": str(cache),
        "isolation": config.isolation,
        "runtime": {"max_actions": config.eval_max_actions} if config.eval_max_actions else {},
        "manager_max_tokens": config.eval_max_tokens,
        "report_to": resolve_report_to(config.report_to),
        "run_name": f"{out.parent.name}-eval",
    }
    return EvaluationConfig.from_dict(fields, source="pipeline evaluate stage")


def evaluation_figures(results: dict[str, Any]) -> dict[str, Any]:
    """The figures the summary shows from an evaluation's ``results.json``.

    Per variant: its accuracies, repairs, DCR, ``dcr_n`` (the turns in the DCR's clean and contaminated groups) and
    ``dcr_contaminated`` (those in the contaminated group; the DCR is undefined when either group is empty), and for
    every variant after the first (the baseline, ``none``) ``vs_baseline``: the paired comparison
    ``variant - baseline`` of :func:`harness.evaluation.summary.compare_variants` (``turn_accuracy_diff``, ``ci95``,
    ``p_nonpositive``, ``task_macro_diff``)."""
    from harness.evaluation.report import dcr_n

    names = list(results["variants"])
    baseline = names[0] if names else None
    paired = {c["b"]: c for c in results["comparisons"] if c["a"] == baseline}
    variants = {}
    for name, v in results["variants"].items():
        keys = ("task_accuracy", "turn_accuracy", "dcr", "repair_precision", "repair_recall")
        contaminated = (v.get("dcr_detail") or {}).get("n_contaminated")
        figures = {**{k: v.get(k) for k in keys}, "dcr_n": dcr_n(v), "dcr_contaminated": contaminated}
        if name in paired:
            keys = ("turn_accuracy_diff", "ci95", "p_nonpositive", "task_macro_diff")
            figures["vs_baseline"] = {k: paired[name].get(k) for k in keys}
        variants[name] = figures
    episodes = results["variants"][baseline]["n_episodes"] if baseline is not None else 0
    return {"baseline": baseline, "variants": variants, "episodes": episodes}


def write_eval_suite(suite: str, cache: Path) -> None:
    """Synthesize the named suite ``suite`` into ``cache`` when it is a synthesized one not written there yet
    (:func:`harness.evaluation.suite.missing_synthesized_suite`): what ``stateguard synthesize --config
    configs/synthesis/<its config> --out CACHE/NAME`` writes. The evaluation itself only reads task folders."""
    from harness.evaluation.suite import missing_synthesized_suite
    from synthesis.config import SynthesisConfig
    from synthesis.driver import synthesize

    missing = missing_synthesized_suite(suite, cache)
    if missing is None:
        return
    config_path, folder = missing
    logger.info("writing suite %s into %s (stateguard synthesize --config %s)", suite, folder, config_path)
    folder.mkdir(parents=True, exist_ok=True)
    synthesize(SynthesisConfig.from_yaml(config_path), folder, progress=False)


def stage_evaluate(ctx: Context) -> dict[str, Any]:
    from harness.evaluation.evaluate import run_evaluation
    from harness.serving import ServeConfig, serve_in_background

    out = ctx.stage_dir("evaluate")
    write_eval_suite(ctx.config.eval_suite, ctx.out / "eval-suites")
    serve = ServeConfig(checkpoint=str(ctx.stage_dir("rl")), port=ctx.config.serve_port)
    print(f"  serving {serve.checkpoint} on {serve.base_url} (transformers serve, the CPU stand-in for vLLM)")
    with serve_in_background(serve, cpu=True, log_path=out / "serve.log") as url:
        config = evaluation_config(
            ctx.config,
            out,
            managers=["none", "rule", f"llm-hf:{ctx.stage_dir('sft')}", f"llm:{url}"],
            labels=["none", "rule", "llm(SFT)", RL_LABEL],
            cache=ctx.out / "eval-suites",
        )
        results = run_evaluation(config)
    errored = {name: n for name, n in results["errored"].items() if n}
    if errored:
        raise RuntimeError(
            f"stage evaluate: episodes errored ({', '.join(f'{k}: {n}' for k, n in errored.items())}); see 'error' in "
            f"{out}/episodes/*.jsonl (a re-run plays them again)"
        )
    return {"report": str(out / "report.md"), **evaluation_figures(results), "simulated": True}


STAGE_FUNCTIONS: dict[str, Callable[[Context], dict[str, Any]]] = {
    "model": stage_model,
    "synthesize": stage_synthesize,
    "sft": stage_sft,
    "rl": stage_rl,
    "evaluate": stage_evaluate,
}


def _done(ctx: Context, stage: str) -> dict[str, Any]:
    """The figures of the finished ``stage`` (checked against its fingerprint before the first stage ran)."""
    return json.loads((ctx.stage_dir(stage) / MARKER).read_text())


# ---------------------------------------------------------------- driver
def run_pipeline(
    config: PipelineConfig, out: str | Path | None = None, *, from_stage: str | None = None, flag: str = "--out"
) -> dict[str, Any]:
    """Run (or resume) every stage; returns ``{"stages": {stage: figures}, "total_s": ...}``.

    Before the first stage, with ``OUT`` locked (a second run on it is refused): ``from_stage`` discards that stage
    and the later ones, every stage marker must match its fingerprint, and every file the stages still to run read
    must exist (:mod:`training.pipeline_guard`); each problem is one :class:`PipelineStateError` line."""
    ctx = Context(config, Path(out or config.path(config.out)))
    with OutLock(ctx.out, flag):
        if from_stage is not None:
            discard_from(ctx.out, STAGES, from_stage)
        prints = stage_fingerprints(config, STAGES)
        done = read_markers(ctx.out, STAGES, prints, flag)
        check_inputs(config, [s for s in STAGES if s not in done])
        return _run_stages(ctx, prints, done)


def _run_stages(ctx: Context, prints: dict[str, dict[str, Any]], done: dict[str, dict[str, Any]]) -> dict[str, Any]:
    figures: dict[str, dict[str, Any]] = {}
    start = time.perf_counter()
    for index, stage in enumerate(STAGES, 1):
        marker = ctx.stage_dir(stage) / MARKER
        if stage in done:
            figures[stage] = {**done[stage], "skipped": True}
            print(f"[{index}/{len(STAGES)}] {stage}: done already ({marker}), skipped", flush=True)
            continue
        print(f"[{index}/{len(STAGES)}] {stage} ...", flush=True)
        ctx.stage_dir(stage).mkdir(parents=True, exist_ok=True)
        began = time.perf_counter()
        result = STAGE_FUNCTIONS[stage](ctx)
        result["seconds"] = round(time.perf_counter() - began, 1)
        marker.write_text(json.dumps({**result, "fingerprint": prints[stage]}, indent=2, sort_keys=True) + "\n")
        figures[stage] = result
        print(f"[{index}/{len(STAGES)}] {stage}: {result['seconds']} s", flush=True)
    return {"out": str(ctx.out), "stages": figures, "total_s": round(time.perf_counter() - start, 1)}


def summary_table(summary: dict[str, Any]) -> str:
    from rich.console import Console
    from rich.table import Table

    stages = summary["stages"]
    table = Table(title=f"StateGuard pipeline — {summary['out']}")
    table.add_column("stage")
    table.add_column("seconds", justify="right")
    table.add_column("result")
    rows = stage_rows(stages)
    for stage in STAGES:
        s = stages.get(stage, {})
        seconds = "skipped" if s.get("skipped") else summary_number(s.get("seconds"))
        table.add_row(stage, seconds, rows[stage])
    console = Console(width=160, record=True)
    with console.capture() as capture:
        console.print(table)
    return capture.get()


def summary_number(value: Any) -> str:
    """A figure as the summary prints it: floats to 3 decimals, None as n/a."""
    return "n/a" if value is None else f"{value:.3f}" if isinstance(value, float) else str(value)


def stage_rows(stages: dict[str, dict[str, Any]], fmt: Callable[[Any], str] = summary_number) -> dict[str, str]:
    """The ``result`` cell of each stage in the summary table, from the stages' figures (a missing stage's figures
    read as n/a)."""
    synth, sft, rl, ev = (stages.get(s, {}) for s in ("synthesize", "sft", "rl", "evaluate"))
    return {
        "model": f"tiny Qwen3 at {stages.get('model', {}).get('checkpoint')}",
        "synthesize": f"{synth.get('trajectories')} trajectories, {synth.get('samples')} samples",
        "sft": f"train loss {fmt(sft.get('train_loss_first'))} -> {fmt(sft.get('train_loss_last'))}, "
        f"eval loss {fmt(sft.get('eval_loss'))}",
        "rl": f"reward {fmt(rl.get('reward_first_step'))} (step 1) -> {fmt(rl.get('reward_last_step'))} "
        f"(step {rl.get('steps')})",
        "evaluate": evaluate_row(ev, fmt),
    }


def evaluate_row(ev: dict[str, Any], fmt: Callable[[Any], str] = summary_number) -> str:
    """The ``evaluate`` cell of the summary: one line per manager (turn accuracy, the paired difference versus the
    baseline with its 95 % CI and P(diff <= 0), DCR with its n and how many of those are contaminated), then the
    number of episodes and the report's path."""
    lines = []
    for name, v in ev.get("variants", {}).items():
        line = f"{name}: turn acc {fmt(v.get('turn_accuracy'))}"
        diff = v.get("vs_baseline")
        if diff is not None:
            low, high = diff.get("ci95") or (None, None)
            line += (
                f" ({_signed(diff.get('turn_accuracy_diff'))} vs {ev.get('baseline')}, 95% CI [{fmt(low)}, "
                f"{fmt(high)}], P(diff<=0) {fmt(diff.get('p_nonpositive'))})"
            )
        n = v.get("dcr_n")
        groups = "n/a" if n is None else f"{n}, {v.get('dcr_contaminated')} contaminated"
        lines.append(line + f", DCR {fmt(v.get('dcr'))} (n={groups})")
    episodes = f"{ev['episodes']} episodes, " if ev.get("episodes") is not None else ""
    return "\n".join([*lines, f"({episodes}SIMULATED worker) report {ev.get('report')}"])


def _signed(value: Any) -> str:
    return "n/a" if value is None else f"{value:+.3f}"


def next_steps(config: PipelineConfig, out: Path) -> str:
    """What the run wrote and the commands to try next, exactly as they run from the current folder: view the
    latest evaluated episode of the RL checkpoint, serve it, and evaluate it on the demo's episodes (the same suite,
    selection and runtime as the ``evaluate`` stage) against ``none``."""
    from harness.evaluation.evaluate import variant_file

    sft, rl = out / "sft", out / "rl"
    episodes = variant_file(out / "evaluate", RL_LABEL)
    evaluate = ["stateguard", "evaluate", "--suite", config.eval_suite, "--cache", str(out / "eval-suites")]
    for flag, value in (
        ("--limit", config.eval_limit),
        ("--fault-limit", config.eval_fault_limit),
        ("--fault-order", config.eval_fault_order),
        ("--manager-max-tokens", config.eval_max_tokens),
    ):
        if value is not None:
            evaluate += [flag, str(value)]
    if config.eval_max_actions:
        evaluate += ["--runtime", json.dumps({"max_actions": config.eval_max_actions})]
    if config.isolation != "bwrap":
        evaluate += ["--isolation", config.isolation]
    evaluate += ["--managers", "none", f"llm-hf:{rl}", "--out", str(out / "eval-rl")]
    commands = [
        ("view the latest evaluated episode of the RL checkpoint (open the page in a browser)",
         ["stateguard", "view", str(episodes), "--out", str(out / "episode.html")]),
        ("serve the RL checkpoint (OpenAI-compatible; --manager llm:http://127.0.0.1:8000/v1; drop --cpu on a GPU)",
         ["stateguard", "serve", "--checkpoint", str(rl), "--cpu", "--port", "8000"]),
        ("evaluate the RL checkpoint in process against no manager on the demo's episodes (any checkpoint folder "
         "works: llm-hf:PATH)", evaluate),
    ]  # fmt: skip
    lines = [f"Checkpoints: SFT {sft}, SFT+RL {rl} (the tiny base model: {out / 'model' / 'tiny-qwen3'})", "Next:"]
    for what, command in commands:
        lines += [f"  # {what}", f"  {shlex.join(command)}"]
    return "\n".join(lines)


DEFAULT_CONFIG = "configs/pipeline/demo.yaml"


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "pipeline",
        help="the main job end to end: tiny model, synthesis, SFT, DAPO, serve, evaluate (resumable)",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_config_arguments(
        parser, PipelineConfig, what="pipeline", example=DEFAULT_CONFIG, default_config=DEFAULT_CONFIG
    )
    parser.add_argument(
        "--from-stage",
        default=None,
        metavar="STAGE",
        help=f"discard STAGE and every later stage of --out, then run from STAGE on (one of: {', '.join(STAGES)})",
    )
    parser.set_defaults(func=pipeline_command)


def pipeline_command(args: argparse.Namespace) -> int:
    try:
        (config,) = parse_config(args)
    except (OSError, ValueError) as exc:
        print(f"stateguard pipeline: {exc}", file=sys.stderr)
        return 2
    flag = given_flag(args, "out")  # a flag's path is the user's (relative to here); the file's, the repository's
    where = flag or (f"out (of {args.config})" if args.config else "--out")
    out = prepare_out_dir(config.out if flag else config.path(config.out), where)
    try:
        summary = run_pipeline(config, out, from_stage=getattr(args, "from_stage", None), flag=where)
    except ValueError as exc:
        print(f"stateguard pipeline: {exc}", file=sys.stderr)
        return 2
    except RuntimeError as exc:
        print(f"stateguard pipeline: {exc}\nRe-run the same command to resume from this stage.", file=sys.stderr)
        return 1
    print(summary_table(summary))
    print(next_steps(config, Path(summary["out"])))
    line = {"total_s": summary["total_s"], **{f"{s}_s": summary["stages"][s].get("seconds") for s in STAGES}}
    print(json.dumps(line))
    return 0
