"""The study's ``hier`` arm, wired without training SmolLM2: its SFT launch (sft-lora's budget on the hier rows), its
served policy (:class:`~harness.manager.hier.HierPolicy` over a checkpoint, bare view), decision points played with
it over the tiny random Qwen3 (legal rows, counted model calls and tokens, F1), and the paired hier - sft-lora
figures of the report."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from training.study.decisions import decision_points, play_decision, point_key
from training.study.driver import ARMS, Study, StudyConfig
from training.study.metrics import comparisons, decision_metrics, paired_f1

SFT_ARGS = ["--max_steps", "56", "--max_train_samples", "56", "--stratify_by", "control"]


def _launches(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, arm: str) -> tuple[dict, list[tuple]]:
    import training.study.arms as study_arms

    study = Study(StudyConfig(arms=["sft-lora", "hier"], sft_args=SFT_ARGS, prompt_view="bare"), tmp_path)
    launched: list[tuple] = []
    monkeypatch.setattr(study_arms, "sft_dataset", lambda s: tmp_path / "data" / "train-bare")
    monkeypatch.setattr(study_arms, "merge_lora", lambda adapter, out: out)
    monkeypatch.setattr(Study, "launch", lambda self, *args: launched.append(args))
    return study_arms.train_sft(study, arm), launched


def test_hier_trains_like_sft_lora_on_the_hier_rows(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    lora_result, [(arm, script, config, lora_args)] = _launches(monkeypatch, tmp_path, "sft-lora")
    hier_result, [(hier_arm, hier_script, hier_config, hier_args)] = _launches(monkeypatch, tmp_path, "hier")
    assert (hier_arm, hier_script, hier_config) == ("hier", script, config) == ("hier", "training.study.sft", config)
    assert config == StudyConfig().sft_lora_config and "--formats" not in lora_args  # flat arms: the default
    assert hier_args == [a.replace("sft-lora", "hier") for a in lora_args] + ["--formats", "hier"]
    assert all(a in hier_args for a in SFT_ARGS)  # the same budget
    view = lora_args.index("--prompt_view")  # the checkpoints' manager.json says how the study serves them
    assert lora_args[view : view + 4] == ["--prompt_view", "bare", "--serve_max_new_tokens", "160"]
    assert hier_result["checkpoint"].endswith("arms/hier/merged") and "adapter" in hier_result
    assert lora_result["checkpoint"].endswith("arms/sft-lora/merged")


def test_the_study_config_needs_hier_samples_for_the_hier_arm() -> None:
    with pytest.raises(ValueError, match=r"train_synthesis.formats=\['flat'\].*\['hier'\]"):
        StudyConfig(arms=["hier"], train_synthesis={"formats": ["flat"]})
    StudyConfig(arms=["sft-lora"], train_synthesis={"formats": ["flat"]})  # flat arms only: fine
    assert ["sft-lora", "hier"] in StudyConfig().comparisons


def test_hier_serves_a_hier_policy_in_the_bare_view(tiny_model_dir: Path) -> None:
    from harness.manager.hier import HierPolicy

    policy = ARMS["hier"].serve(tiny_model_dir, 8, "bare")
    assert isinstance(policy, HierPolicy) and policy.tools is None
    assert policy.tier1.max_new_tokens == 8 and policy.tier1.prefix_cache
    assert (policy.calls, policy.prompt_tokens, policy.completion_tokens) == (0, 0, 0)
    full = ARMS["hier"].serve(tiny_model_dir, 8, "full")
    assert full.tools and ARMS["sft-lora"].format == "flat" and not isinstance(ARMS["sft-lora"], HierPolicy)


def test_constrained_arms_decode_under_the_action_grammar(tiny_model_dir: Path) -> None:
    from harness.evaluation.evaluate import decodes_under_grammar

    flat = ARMS["sft-lora"].serve(tiny_model_dir, 8, "bare", constrained=True)
    hier = ARMS["hier"].serve(tiny_model_dir, 8, "bare", constrained=True)
    assert decodes_under_grammar(flat) and decodes_under_grammar(hier)
    # the tiny model's tokenizer is Qwen3's: the tags are single added tokens, so the grammar names them as tokens
    assert flat.backend.grammar.grammar.startswith('start: <tool_call> "\\n" call')
    assert not decodes_under_grammar(ARMS["sft-lora"].serve(tiny_model_dir, 8, "bare"))
    assert not decodes_under_grammar(ARMS["windowed"].serve(tiny_model_dir, 8, "bare", constrained=True))  # prose


def test_decision_points_with_the_hier_policy(pool, env, tiny_model_dir: Path) -> None:
    from training.study.arms import model_policy

    points = decision_points(pool, 4, seed=0)
    hier = ARMS["hier"].serve(tiny_model_dir, 8, "bare")
    rows = [play_decision(env, p, hier, max_responses=1) for p in points]
    for point, row in zip(points, rows, strict=True):
        assert row["key"] == point_key(point) and not row["truncated"]
        assert row["actions"] and all(a["actor"] in ("harness", "policy") for a in row["actions"])
        # the random model's replies are rejected and tier 0 confirms (or repairs a failed execution): every action is
        # legal, and the decision is the harness's, not the model's
        assert all(a["legal"] for a in row["actions"]) and row["control"] is None
        assert row["harness_confirmed"] or row["repaired"]
        assert row["model_calls"] <= 1  # one model response per point; tier 0's checks are free
        assert (row["prompt_tokens"] > 0) == (row["model_calls"] > 0)
    confirms = [r for r in rows if r["gold"] == "FINALIZE_RELATIONS"]
    assert confirms and all(r["model_calls"] == 1 for r in confirms)  # a clean check: tier 1 decides
    assert sum(r["model_calls"] for r in rows) == hier.stats.calls
    assert sum(r["prompt_tokens"] + r["completion_tokens"] for r in rows) == (
        hier.stats.prompt_tokens + hier.stats.completion_tokens
    )
    m = decision_metrics(rows, seed=0, n=50)
    assert m["repair_f1"]["value"] is not None and 0.0 <= m["repair_f1"]["value"] <= 1.0
    assert m["usage"]["points"] == 4 and m["usage"]["model_calls"] == hier.stats.calls
    assert m["usage"]["per_point_by_gold"]["FINALIZE_RELATIONS"]["model_calls"] == 1.0
    # taking over at the gold's decision: tier 1 reads the gold's checks (as its own calls) and decides once
    row = play_decision(env, confirms_point := points[1], hier, max_responses=1, takeover="decision")
    assert confirms_point.gold_control == "FINALIZE_RELATIONS" and row["context"] and row["model_calls"] == 1
    assert row["control"] is None and row["harness_confirmed"] and all(a["legal"] for a in row["actions"])
    # a flat model arm at the same points: every response is a model call, counted the same way
    flat = model_policy(tiny_model_dir, 8, "bare")
    flat_rows = [play_decision(env, p, flat, max_responses=1) for p in points[:2]]
    assert [r["model_calls"] for r in flat_rows] == [1, 1] and all(r["completion_tokens"] > 0 for r in flat_rows)
    assert sum(r["prompt_tokens"] for r in flat_rows) == flat.prompt_tokens
    [row] = comparisons([["sft-lora", "hier"]], {"sft-lora": [], "hier": []}, {}, seed=0, n=50,
                        decisions={"sft-lora": flat_rows, "hier": rows})  # fmt: skip
    assert row["decision_model_calls"]["n"] == 2 and row["decision_f1"] is not None
    json.dumps(row)  # results.json holds it


def _row(key: str, task: str, gold: str, repaired: bool, calls: int | None = None) -> dict:
    usage = {"model_calls": calls, "prompt_tokens": 10 * (calls or 0), "completion_tokens": calls or 0}
    return {"key": key, "task_id": task, "gold": gold, "repaired": repaired, "control": None, "reward": 0.0,
            "actions": [], **(usage if calls is not None else {})}  # fmt: skip


def test_paired_f1_by_hand() -> None:
    a = [_row("1", "t1", "REPAIR", False), _row("2", "t1", "COMMIT_STATE", True), _row("3", "t2", "REPAIR", True)]
    b = [_row("1", "t1", "REPAIR", True), _row("2", "t1", "COMMIT_STATE", False), _row("3", "t2", "REPAIR", True)]
    out = paired_f1(a, b, seed=0, n=200)
    # a: TP 1, FP 1, FN 1 -> 2/4; b: TP 2 -> 1
    assert out["diff"] == pytest.approx(0.5) and out["n"] == 3 and out["tasks"] == 2
    low, high = out["ci95"]
    assert 0.0 <= low <= 0.5 <= high <= 1.0
    assert paired_f1(a, [_row("9", "t9", "REPAIR", True)], seed=0, n=10) is None  # nothing shared
    commits = [_row("2", "t1", "COMMIT_STATE", False)]
    assert paired_f1(commits, commits, seed=0, n=10) is None  # F1 undefined on both sides


def test_the_report_shows_calls_tokens_and_the_hier_pair() -> None:
    from training.study.render import DECISION_COLUMNS
    from training.study.report import targets

    rows = [_row("1", "t1", "REPAIR", True, calls=2), _row("2", "t1", "COMMIT_STATE", False, calls=0)]
    m = decision_metrics(rows, seed=0, n=20)
    assert m["usage"]["per_point"] == {"model_calls": 1.0, "model_tokens": 11.0, "prompt_tokens": 10.0,
                                       "completion_tokens": 1.0}  # fmt: skip
    cells = {name: get(("hier", {"metrics": {"decisions": m}})) for name, get in DECISION_COLUMNS}
    assert cells["model calls/point"] == "1.00" and cells["model tokens/point (prompt + completion)"] == "11"
    assert decision_metrics([_row("1", "t1", "REPAIR", False)], seed=0, n=20)["usage"] is None  # no model
    pair = {"a": "sft-lora", "b": "hier", "decision_f1": {"diff": 0.5, "ci95": [0.0, 1.0]}}
    results = {
        "arms": {"sft-lora": {"metrics": {}}, "hier": {"metrics": {}}},
        "comparisons": [pair],
        "unavailable": {},
    }
    *others, hier = targets(results)
    assert hier["status"] == "measured" and hier["value"]["decision_f1"]["diff"] == 0.5
    assert {t["status"] for t in others} == {"n/a"}  # nothing else measured
    pair = {"a": "hier", "b": "sft-lora", "decision_f1": {"diff": 0.5, "ci95": [0.25, 1.0]}}  # the other order
    *_, hier = targets({**results, "comparisons": [pair]})
    assert hier["value"]["decision_f1"] == {"diff": -0.5, "ci95": [-1.0, -0.25]}
