"""The study's ``report.md`` (:func:`render_report`) and :func:`write_outputs`, which writes it with ``results.json``
and the plots; the numbers come from :func:`training.study.report.collect`.
All worker numbers are SIMULATED: the scripted worker replays reference or faulty programs.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from harness.evaluation.report import fmt, interval, markdown_table
from training.study.metrics import metric_entry
from training.study.plots import write_plots
from training.study.report import DAPO_ARMS


def decoding_line(config: dict[str, Any]) -> str:
    """How the model arms decode (the report states it: under the action grammar a reply is always well formed, so
    a legal-action rate then counts the actions the protocol refuses, not malformed text)."""
    if config.get("constrained_decoding"):
        line = (
            "Decoding: greedy under the action grammar (constrained_decoding): every reply of the flat and hier arms "
            "is one well-formed action (unless cut by the reply cap); illegal actions are those the protocol "
            "refuses at that point."
        )
        if config.get("legal_actions_only") or config.get("decide_after_probe"):
            line += (
                " The flat arms' grammar allows only the actions legal now (legal_actions_only: a refusal is then an "
                "argument that breaks a rule)"
                + (", and neither decision before a probe of the activation ran (decide_after_probe)" if
                   config.get("decide_after_probe") else "")
                + "."
            )  # fmt: skip
        return line + "\n"
    return "Decoding: greedy, free (no grammar): a malformed reply counts as an illegal action.\n"


def write_outputs(out: Path, results: dict[str, Any]) -> None:
    """``results.json``, ``report.md`` and the plots into ``out``."""
    (out / "results.json").write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
    write_plots(out, results)
    (out / "report.md").write_text(render_report(results), encoding="utf-8")


def _metric(name: str, digits: int = 3) -> Callable[[tuple[str, dict]], str]:
    def get(row: tuple[str, dict]) -> str:
        entry = metric_entry(row[1]["metrics"], name)
        if not isinstance(entry, dict):
            return fmt(entry, digits)
        ci = f" {interval(entry['ci95'])}" if entry.get("ci95") else ""
        return fmt(entry["value"], digits) + ci

    return get


RESULT_COLUMNS = [
    ("arm", lambda r: r[0]),
    ("legal-action rate [95% CI]", _metric("legal_action_rate")),
    ("exact match [95% CI]", _metric("exact_match")),
    ("repair P", lambda r: r[1]["metrics"]["repair_precision"]),
    ("repair R", lambda r: r[1]["metrics"]["repair_recall"]),
    ("repair F1 [95% CI]", _metric("repair_f1")),
    ("repair F1, teacher-forced [95% CI]", _metric("repair_f1_exact")),
    ("false-repair rate [95% CI]", _metric("false_repair_rate")),
    ("turn acc [95% CI]", _metric("turn_accuracy")),
    ("downstream turn acc", lambda r: r[1]["metrics"]["downstream_turn_accuracy"]["value"]),
    ("DCR", lambda r: r[1]["metrics"]["dcr"]),
    ("reward [95% CI]", _metric("reward_total")),
    ("model tokens/episode", lambda r: _episode_tokens(r[1]["metrics"].get("manager"))),
]


def _episode_tokens(manager: dict[str, Any] | None) -> str:
    """The manager's model tokens (prompt + completion) per episode in the episodes, n/a without a model."""
    tokens = (manager or {}).get("manager_tokens") or {}
    if not manager or not manager.get("episodes") or not (tokens.get("prompt") or tokens.get("completion")):
        return "n/a"
    return fmt((tokens.get("prompt", 0) + tokens.get("completion", 0)) / manager["episodes"], 0)


def _diff(name: str) -> Callable[[dict[str, Any]], str]:
    def get(row: dict[str, Any]) -> str:
        entry = row.get(name)
        return "n/a" if entry is None else f"{entry['diff']:+.3f} {interval(entry['ci95'])}"

    return get


COMPARISON_COLUMNS = [
    ("a", lambda c: c["a"]),
    ("b", lambda c: c["b"]),
    ("exact match b-a", _diff("exact_match")),
    ("legal rate b-a (per episode)", _diff("legal_action_rate")),
    ("turn acc b-a", _diff("turn_accuracy")),
    ("reward b-a", _diff("reward_total")),
    ("decision control=gold b-a", _diff("decision_match")),
    ("decision repair F1 b-a", _diff("decision_f1")),
    ("decision reward b-a", _diff("decision_reward")),
    ("decision model calls/point b-a", _diff("decision_model_calls")),
    ("decision model tokens/point b-a", _diff("decision_model_tokens")),
]


def _target_value(value: Any) -> str:
    """A target's number, a paired difference (``{diff, ci95}``), or several named ones (a difference, a number or
    a name each), one by one."""
    if not isinstance(value, dict):
        return fmt(value) if not isinstance(value, str) else value
    if "diff" in value:
        return f"{value['diff']:+.3f} {interval(value['ci95'])}"
    shown = [f"{name} {_target_value(v)}" for name, v in value.items() if v is not None]
    return "; ".join(shown) or "n/a (nothing both arms share)"


def render_report(results: dict[str, Any]) -> str:
    arms = results["arms"]
    terms = sorted({t for a in arms.values() for t in a["metrics"]["reward"]} - {"total"})
    reward_columns = [("arm", lambda r: r[0])] + [
        (term, lambda r, t=term: r[1]["metrics"]["reward"].get(t)) for term in [*terms, "total"]
    ]
    held = results["heldout"]
    fault_limit = results.get("config", {}).get("eval_fault_limit")
    played = "clean + one per fault" if fault_limit is None else f"clean + the first {fault_limit} faulted"
    if (turns := results.get("config", {}).get("eval_turns")) is not None:
        played += f"; each task cut to its first {turns} turns"
    lines = [
        "# Small-model study: SmolLM2-135M-Instruct as the manager (SIMULATED worker)\n",
        f"Held-out split: the held-out domain; fault types never in training: "
        f"{', '.join(held['fault_types_unseen_in_training'])}. Episodes: {held['tasks']} task(s), "
        f"{held['episodes']} episode(s) ({played}). "
        f"Exact match on {held['exact_match_samples']} held-out atomic samples per model arm. Training data: "
        f"{results['data']['train']['samples']} samples. Worker: scripted (replays reference or faulty programs), "
        "so turn accuracy, DCR and rewards are SIMULATED.\n",
        decoding_line(results.get("config", {})),
        "## Results\n",
        markdown_table(RESULT_COLUMNS, list(arms.items())),
        "\n![metrics](metrics.png)\n",
        *decision_section(results),
        *margin_section(results),
        "## Reward by term (mean over episodes)\n",
        markdown_table(reward_columns, list(arms.items())),
        "\n![rewards](rewards.png)\n",
        "## Paired comparisons (b - a, task-clustered bootstrap 95% CI)\n",
        markdown_table(COMPARISON_COLUMNS, results["comparisons"]) if results["comparisons"] else "(none)",
        "\n## Targets\n",
        *(
            f"- **{t['status']}**: {t['target']}: {_target_value(t['value'])}"
            + (f" {t.get('note')}" if t.get("note") else "")
            for t in results["targets"]
        ),  # fmt: skip
        "",
        *scale_notes(results),
        "## Training curves\n",
        "![SFT loss](training_sft.png)" + (" ![RL](training_rl.png)" if set(DAPO_ARMS) & set(arms) else "") + "\n",
        markdown_table(TRAINING_COLUMNS, [(a, v) for a, v in arms.items() if v["training"]]),
        "\n## Arms not run\n",
        "\n".join(f"- {arm}: {reason}" for arm, reason in results["unavailable"].items()) or "(every arm ran)",
        "\n## Time per stage (s; summed over the invocations that ran it, a training stage is its launch's)\n",
        markdown_table([("stage", lambda r: r[0]), ("seconds", lambda r: r[1])], list(results["timing"].items())),
        "",
    ]
    return "\n".join(lines)


DECISION_COLUMNS = [
    ("arm", lambda r: r[0]),
    ("points (REPAIR)", lambda r: "{points} ({repair_points})".format(**r[1]["metrics"]["decisions"])),
    ("legal-action rate [95% CI]", _metric("decisions.legal_action_rate")),
    ("control = gold [95% CI]", _metric("decisions.control_match")),
    ("decided [95% CI]", _metric("decisions.decided")),
    ("harness-confirmed", lambda r: r[1]["metrics"]["decisions"].get("harness_confirmed")),
    ("repair P", _metric("decisions.repair_precision")),
    ("repair R", _metric("decisions.repair_recall")),
    ("repair F1 [95% CI]", _metric("decisions.repair_f1")),
    ("false-repair rate [95% CI]", _metric("decisions.false_repair_rate")),
    ("reward [95% CI]", _metric("decisions.reward_total")),
    ("controls taken", lambda r: ", ".join(f"{k} {v}" for k, v in r[1]["metrics"]["decisions"]["controls"].items())),
    ("model calls/point", lambda r: _usage(r, "model_calls", 2)),
    ("model tokens/point (prompt + completion)", lambda r: _usage(r, "model_tokens", 0)),
    ("calls/point by gold", lambda r: _usage_by_gold(r)),
]


def _usage(row: tuple[str, dict], name: str, digits: int) -> str:
    """A decision row's mean per point of a usage figure (n/a without a model)."""
    usage = row[1]["metrics"]["decisions"].get("usage")
    return "n/a" if not usage else fmt(usage["per_point"][name], digits)


def _usage_by_gold(row: tuple[str, dict]) -> str:
    usage = row[1]["metrics"]["decisions"].get("usage")
    if not usage:
        return "n/a"
    return ", ".join(f"{gold} {fmt(m['model_calls'], 2)}" for gold, m in usage["per_point_by_gold"].items())


def decision_section(results: dict[str, Any]) -> list[str]:
    """The decision-point table (closed loop at the commit-or-repair activations), when any arm played them."""
    rows = [(arm, a) for arm, a in results["arms"].items() if a["metrics"].get("decisions")]
    if not rows:
        return []
    held = results["heldout"]
    takeover = held.get("decision_takeover", "activation")
    handover = (
        "the gold manager runs its verification procedure (check_execution and the probes it writes from the turn's "
        "stated requirements), then the arm gets the request where the gold decides: it reads the same results and "
        "decides (repair, naming the variable and quoting the evidence, or confirm)"
        if takeover == "decision"
        else "the arm plays the whole activation (its own checks, then the decision)"
    )
    groups = held.get("decision_points_by_group") or {}
    lines = [
        "## Decision points: repair or confirm, closed loop\n",
        f"{held['decision_points']} held-out check activations ({', '.join(f'{g}: {n}' for g, n in groups.items())}) "
        "where the gold manager repairs (its checks show a violation) or confirms (repairing there is a false "
        "repair), drawn across tasks (seeded). The gold manager plays the episode up to the point and after it; at "
        f"the point {handover}, in the real manager env (tool calls run in the sandbox, at most "
        f"{held['decision_max_responses']} model responses). `heldout`: the held-out domain with the fault types "
        "never seen in training (generalization across fault types); `heldout-seen`: other held-out tasks with the "
        "training fault types (across tasks). The reward is the whole episode's (SIMULATED worker). An arm that "
        "ends its part without a legal control action has not decided (`decided`): the harness confirms in its "
        "place (`harness-confirmed`), so the point scores as a confirmation, never as the gold's later decision at "
        "that pause. The `hier` arm "
        "is the hierarchical manager: its tier 0 (no model) writes checks and bookkeeping, left out of its "
        "legal-action rate. Model calls and tokens are per point (prompt + completion); the paired differences "
        "(F1 included) are in the comparisons below. Module: `training/study/decisions.py`.\n",
        "### All points\n",
        markdown_table(DECISION_COLUMNS, rows),
        "",
    ]
    for group in groups:
        grouped = [
            (arm, {"metrics": {"decisions": a["metrics"]["decisions_by_group"][group]}})
            for arm, a in rows
            if group in (a["metrics"].get("decisions_by_group") or {})
        ]
        lines += [f"### {group}\n", markdown_table(DECISION_COLUMNS, grouped), ""]
    return lines


MARGIN_COLUMNS = [
    ("arm", lambda r: r[0]),
    ("rows (REPAIR / confirm)", lambda r: f"{r[1]['n_REPAIR']} / {r[1]['n_FINALIZE_RELATIONS']}"),
    ("AUC", lambda r: fmt(r[1]["auc"], 2)),
    ("mean margin at REPAIR rows", lambda r: fmt(r[1]["mean_margin_REPAIR"], 2)),
    ("mean margin at confirm rows", lambda r: fmt(r[1]["mean_margin_FINALIZE_RELATIONS"], 2)),
    ("prefer REPAIR: REPAIR rows", lambda r: r[1]["prefers_repair_REPAIR"]),
    ("prefer REPAIR: confirm rows", lambda r: r[1]["prefers_repair_FINALIZE_RELATIONS"]),
]


CALIBRATION_COLUMNS = [
    ("arm", lambda r: r[0]),
    ("decision bias served", lambda r: fmt(r[1]["bias"], 3)),
    ("balanced accuracy unbiased", lambda r: fmt(r[1]["balanced_accuracy_unbiased"], 2)),
    ("balanced accuracy at the bias", lambda r: fmt(r[1]["balanced_accuracy"], 2)),
]


def margin_section(results: dict[str, Any]) -> list[str]:
    """The decision margins of the flat model arms on the training data (when scored), and the decision bias each
    is served with when the study calibrates."""
    rows = [(arm, a["margins"]) for arm, a in results["arms"].items() if a.get("margins")]
    if not rows:
        return []
    split = rows[0][1]["split"]
    biased = [(arm, a["calibration"]) for arm, a in results["arms"].items() if a.get("calibration")]
    calibration = [
        "### The decision bias (calibrate_decisions: chosen on these training rows)\n",
        "Each flat model arm is served with the constant that, added to every margin above, best separates the rows "
        "(balanced accuracy; the smallest such shift): it is added to REPAIR's branching token's logit at the "
        "decision points and in the episodes (`training.study.margin.calibrate`). 0: the model's own threshold.\n",
        markdown_table(CALIBRATION_COLUMNS, biased),
        "",
    ]
    return [
        f"## Decision margins on the training data ({split} split; a check of the recipe, not a held-out result)\n",
        f"At each flat {split} sample whose gold decision is REPAIR or FINALIZE_RELATIONS the model reads the gold "
        "context; the margin is log P(REPAIR) - log P(FINALIZE_RELATIONS) of the decision's first tokens "
        "(`training/study/margin.py`). AUC: the chance a REPAIR row's margin exceeds a confirm row's (0.5: the "
        "evidence is not read). A row prefers REPAIR when its margin is positive (where greedy decoding starts).\n",
        markdown_table(MARGIN_COLUMNS, rows),
        "",
        *(calibration if biased else []),
    ]


def scale_notes(results: dict[str, Any]) -> list[str]:
    """Why a missed target may be missed at this scale: the numbers that bound it, stated plainly."""
    missed = [t for t in results["targets"] if t["status"] == "missed"]
    if not missed:
        return []
    train = results["data"]["train"]["samples"]
    steps = {
        arm: (a["training"] or {}).get("results", {}).get("steps")
        for arm, a in results["arms"].items()
        if a["training"]
    }
    steps_text = ", ".join(f"{arm} {n}" for arm, n in steps.items()) or "no"
    return [
        f"Missed at this scale ({len(missed)} target(s)): the model has 135 M parameters; SFT had {train} "
        f"synthesized samples to draw from and ran {steps_text} optimizer steps (batch 1) on CPU; whole-episode "
        "samples exceed the 8,192-token context and are dropped; the episodes cap the manager's actions and reply "
        "length (see the config). Nothing was tuned on the held-out split.\n"
    ]


TRAINING_COLUMNS = [
    ("arm", lambda r: r[0]),
    ("train samples", lambda r: r[1]["training"]["results"].get("data/train_samples")),
    ("of which by control action", lambda r: _strata(r[1]["training"]["results"], "data/train_control/")),
    ("steps", lambda r: r[1]["training"]["results"].get("steps")),
    ("first loss", lambda r: (r[1]["training"]["curves"].get("loss") or [[None, None]])[0][1]),
    ("last loss", lambda r: (r[1]["training"]["curves"].get("loss") or [[None, None]])[-1][1]),
    ("eval loss", lambda r: r[1]["training"]["results"].get("eval/loss")),
    ("sampling temperature (probe: legal rate per T)", lambda r: _temperature(r[1]["training"])),
    ("seconds", lambda r: r[1]["training"].get("seconds")),
]


def _temperature(training: dict[str, Any]) -> str | None:
    """A DAPO arm's sampling temperature and, when it was chosen on the training split, the probe's legal rates."""
    temperature = training["results"].get("rl/temperature")
    probe = training.get("temperature_probe")
    if probe is None:
        return None if temperature is None else fmt(temperature, 2)
    rates = ", ".join(f"{row['temperature']:g}: {row['legal_rate']:.2f}" for row in probe["table"])
    return f"{probe['chosen']:g} ({rates}; rule: highest with >= {probe['min_legal']:g})"


def _strata(results: dict[str, Any], prefix: str) -> str | None:
    """``"COMMIT_STATE 12, REPAIR 11, ..."``: an SFT's stratified subset counts (None: not stratified)."""
    parts = [f"{key.removeprefix(prefix)} {n}" for key, n in results.items() if key.startswith(prefix)]
    return ", ".join(parts) or None
