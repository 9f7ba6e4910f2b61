"""The leakage audit (synthesis.audit): each part on hand-built rows with exact values, and once over a real smoke
synthesis (its numbers are recorded and printed, not judged)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from synthesis.audit import summary_lines
from synthesis.audit.decisions import classifier_section, evidence_section, twins_section
from synthesis.audit.markers import (
    TaskSecrets,
    evidence_code_strings,
    find_markers,
    markers_section,
    private_markers,
    text_marker,
)

ROOT = Path(__file__).resolve().parents[2]
SECRET = "the threshold was silently raised to 42 units"


def call(name: str, **arguments) -> dict[str, str]:
    text = json.dumps({"name": name, "arguments": arguments})
    return {"role": "assistant", "content": f"<tool_call>\n{text}\n</tool_call>"}


def result(**fields) -> dict[str, str]:
    return {"role": "user", "content": "<tool_response>\n" + json.dumps({"ok": True, **fields}) + "\n</tool_response>"}


def activation(seen: int | None) -> dict[str, str]:
    obs = {"event_type": "turn_end", "pending_end_step": seen, "current_draft": None, "committed_state_index": []}
    return {
        "role": "user",
        "content": f"# Activation: turn_end\n## Observation\n{json.dumps(obs)}\n## Legal actions now",
    }


def row(messages, *, task="t1", turn="2", fault_id="", control="FINALIZE_RELATIONS", label="clean", kind="atomic"):
    system = {"role": "system", "content": "You are the state manager."}
    return {"messages": [system, *messages], "task_id": task, "turn_id": turn, "fault_id": fault_id,
            "control": control, "label": label, "kind": kind, "fault_type": "x" if fault_id else "none"}  # fmt: skip


FAILED_PROBE = result(
    succeeded=False, error_type="AssertionError", error_message="`total` = 3 but recomputing gives 4"
)
PASSED_PROBE = result(succeeded=True, error_type=None, error_message=None)
FINALIZE = call("FINALIZE_RELATIONS", mode="confirm", relations=[], conflict_evidence="")


def repair(hint: str = "it looks wrong") -> dict[str, str]:
    return call("REPAIR", analytical_evidence="see the probe",
                error_hint={"error_variable": "total", "faulty_reasoning": hint})  # fmt: skip


# ---------------------------------------------------------------- (a) markers
def test_a_planted_marker_in_a_gold_message_is_found_and_located():
    rows = [
        row([activation(1), call("run_probe", code="assert total == 4"), PASSED_PROBE, FINALIZE]),
        row([activation(1), call("run_probe", code="assert total == 4"), FAILED_PROBE, repair(SECRET)],
            fault_id="f1", control="REPAIR", label="repair"),
    ]  # fmt: skip
    out = find_markers(rows, [SECRET])
    assert (out["markers_found"], out["samples_with_markers"], out["in_assistant"]) == (1, 1, 1)
    assert out["by_kind"] == {"planted": 1} and out["by_role"] == {"assistant": 1}
    example = out["examples"][0]
    assert (example["sample"], example["message"], example["role"], example["string"]) == (1, 4, "assistant", SECRET)
    assert find_markers(rows, ["a string that no sample holds anywhere"])["markers_found"] == 0


def test_a_marker_the_worker_showed_is_not_a_leak_until_it_is_shown():
    """In the worker's code of a step the observation has reached: visible. Of a later step: still a leak."""
    messages = [activation(1), call("run_probe", code=f"# {SECRET}\nassert x"), PASSED_PROBE, FINALIZE]
    worker = {"": [(0, "x = 1"), (1, f"y = 2  # {SECRET}")], "f1": [(0, "x = 1"), (3, f"y = 2  # {SECRET}")]}
    secrets = {"t1": TaskSecrets("t1", [text_marker("planted", SECRET)], visible=worker)}
    assert markers_section([row(messages)], secrets)["markers_found"] == 0
    assert markers_section([row(messages, fault_id="f1")], secrets)["markers_found"] == 1
    # public text (the question, constraints) is visible too
    assert find_markers([row(messages)], [SECRET], visible=f"Question: is {SECRET}?")["markers_found"] == 0


def test_a_reference_line_is_found_renamed_and_not_when_the_worker_ran_it():
    reference = {"2": "revenue_by_format = orders.groupby('format')['revenue'].sum().round(2)\nprint(x)"}
    markers = private_markers(reference, [])
    assert [(m.kind, m.needle) for m in markers] == [
        ("reference_code", "V = V.groupby('format')['revenue'].sum().round(2)")
    ]
    probe = "chk_revenue_by_format = chk_orders.groupby('format')['revenue'].sum().round(2)\nassert ok"
    messages = [activation(0), call("run_probe", code=probe), FAILED_PROBE, repair()]
    faulty = "revenue_by_format = orders.groupby('format')['revenue'].mean().round(2)"
    secrets = {"t1": TaskSecrets("t1", markers, visible={"": [(0, reference["2"])], "f1": [(0, faulty)]})}
    assert markers_section([row(messages)], secrets)["markers_found"] == 0  # the clean worker ran that very line
    out = markers_section([row(messages, fault_id="f1", control="REPAIR", label="repair")], secrets)
    assert out["markers_found"] == 1 and out["by_kind"] == {"reference_code": 1}


def test_a_fault_type_names_texts_and_evidence_strings_are_markers():
    evidence = (
        "# Turn 2 asks: what is the total? Check:\n# `total` must be the sum the question asks for\n"
        "chk = 4\nassert total == chk, f'`total` = {total} but recomputing it from the task data gives {chk}'\n"
    )
    assert evidence_code_strings(evidence) == (
        "Turn 2 asks: what is the total? Check:",
        "`total` must be the sum the question asks for",
        "`total` = ",
        " but recomputing it from the task data gives ",
    )
    fault = {"faulty_reasoning": "it takes the mean where the question asks for the sum", "violated": "short",
             "evidence_code": evidence}  # fmt: skip
    markers = private_markers({}, [fault], ["wrong_aggregation", "rounding"])
    kinds = {(m.kind, m.needle) for m in markers}
    assert ("fault_type", "wrong aggregation") in kinds and ("fault_text", fault["faulty_reasoning"]) in kinds
    assert ("evidence_code", "but recomputing it from the task data gives") in kinds
    assert not any(m.needle in ("short", "`total` =") for m in markers)  # too short to be a marker
    secrets = {"t1": TaskSecrets("t1", markers)}
    hint = row([activation(0), repair("a wrong_aggregation: it takes the mean where the question asks for the sum")])
    out = markers_section([hint], secrets)
    assert out["by_kind"] == {"fault_text": 1, "fault_type": 1}
    grounding = row([activation(0), repair("grounding is fine; Rounding to 2 decimals is required")])
    assert markers_section([grounding], secrets)["by_kind"] == {"fault_type": 1}  # whole words, any case


# ---------------------------------------------------------------- (b) evidence
def test_b_repair_samples_with_and_without_visible_evidence():
    failed_step = result(step_id=3, verdict="failed", error_type="SyntaxError", error_message="bad")
    rows = [
        row([activation(1), call("run_probe", code="assert a"), FAILED_PROBE, repair()], control="REPAIR"),
        row([activation(1), call("check_execution", step_id=3), failed_step, repair()], control="REPAIR"),
        row([activation(1), call("run_probe", code="assert a"), PASSED_PROBE, repair()], control="REPAIR", turn="4"),
        row([activation(1), repair()], control="REPAIR", turn="5"),  # no tool call at all
        row([activation(1), call("run_probe", code="assert a"), FAILED_PROBE, FINALIZE]),  # not a REPAIR
    ]
    out = evidence_section(rows)
    assert (out["repair_samples"], out["repair_with_visible_evidence"], out["share"]) == (4, 2, 0.5)
    assert [e["turn_id"] for e in out["examples_without"]] == ["4", "5"]


# ---------------------------------------------------------------- (c) twins
def test_c_identical_and_different_twin_calls():
    checks = [call("check_execution", step_id=3), result(verdict="verified"), call("run_probe", code="assert c")]
    clean = row([activation(3), *checks, PASSED_PROBE, FINALIZE])
    same = row([activation(3), *checks, FAILED_PROBE, repair()], fault_id="f1", control="REPAIR", label="repair")
    probe = call("run_probe", code="# the fault's own probe\nassert x")
    other = row([activation(3), probe, FAILED_PROBE, repair()], fault_id="f2", control="REPAIR", label="repair")
    recheck = row([activation(3), *checks, PASSED_PROBE, FINALIZE], fault_id="f2", label="post_repair")
    lonely = row([activation(5), probe, FAILED_PROBE, repair()], turn="9", fault_id="f3", control="REPAIR",
                 label="repair")  # fmt: skip
    out = twins_section([clean, same, other, recheck, lonely])
    assert (out["pairs"], out["identical"], out["identical_share"], out["same_tool_names"]) == (2, 1, 0.5, 1)
    assert (out["unpaired"], out["post_repair_pairs"], out["post_repair_identical"]) == (1, 1, 1)
    (difference,) = out["differences"]
    assert difference["fault_id"] == "f2" and difference["call"] == 0
    assert difference["clean"] == 'check_execution({"step_id": 3})'
    assert difference["faulted"].startswith('run_probe({"code": "# the fault')


# ---------------------------------------------------------------- (d) classifier
def _decisions(n_tasks: int, repairs: int, finalizes: int, *, separable: bool) -> list[dict]:
    rows = []
    for t in range(n_tasks):
        for k in range(repairs + finalizes):
            is_repair = k < repairs
            calls = [call("check_execution", step_id=1)]
            if separable and is_repair:
                calls = [call("run_probe", code="assert recomputed_total == total")]
            end = repair() if is_repair else FINALIZE
            rows.append(row([activation(k), *calls, PASSED_PROBE, end], task=f"t{t}", turn=str(k),
                            fault_id="f" if is_repair else "", control="REPAIR" if is_repair else "FINALIZE_RELATIONS",
                            label="repair" if is_repair else "clean"))  # fmt: skip
    return rows


def test_d_the_classifier_separates_a_separable_set_and_not_a_non_separable_one():
    out = classifier_section(_decisions(6, 2, 3, separable=True), seed=0)
    assert (out["instances"], out["repair"], out["tasks"], out["folds"]) == (30, 12, 6, 5)
    assert out["accuracy"] == 1.0 and out["majority_accuracy"] == pytest.approx(0.6)
    assert out["gap_points"] == pytest.approx(40.0)
    same = classifier_section(_decisions(4, 1, 3, separable=False), seed=0)
    assert same["accuracy"] == same["majority_accuracy"] == 0.75 and same["gap_points"] == 0.0
    # one task is too few to hold one out
    assert classifier_section(_decisions(1, 1, 3, separable=True))["accuracy"] is None


# ---------------------------------------------------------------- a real synthesis
@pytest.fixture(scope="module")
def smoke(tmp_path_factory):
    from synthesis.config import SynthesisConfig
    from synthesis.driver import synthesize

    config = SynthesisConfig.from_yaml(
        ROOT / "configs" / "synthesis" / "smoke.yaml",
        count_tokens=False,  # no length filter: the tokenizer is not needed for the audit
        isolation="bwrap" if shutil.which("bwrap") else "none",
    )
    out = tmp_path_factory.mktemp("audit") / "out"
    synthesize(config, out, progress=False)
    return out


def test_the_smoke_synthesis_records_a_consistent_audit(smoke):
    from datasets import load_from_disk

    stats = json.loads((smoke / "stats.json").read_text())
    audit = stats["audit"]
    rows = [r for split in load_from_disk(str(smoke / "dataset")).values() for r in split]
    assert audit["markers"]["samples"] == stats["samples"]["total"] == len(rows)
    assert audit["markers"]["samples_with_markers"] <= audit["markers"]["markers_found"]
    assert sum(audit["markers"]["by_kind"].values()) == audit["markers"]["markers_found"]
    decided = [r for r in rows if r["control"] == "REPAIR" and r["format"] != "hier_checks"]  # its target: checks
    assert audit["evidence"]["repair_samples"] == len(decided) > 0
    first = [
        r
        for r in rows
        if r["kind"] == "atomic"
        and r["fault_id"]
        and r["label"] in ("repair", "benign", "undetectable")
        and r["control"] in ("REPAIR", "FINALIZE_RELATIONS")
    ]
    assert audit["twins"]["pairs"] + audit["twins"]["unpaired"] == len(first) > 0
    checks = [r for r in rows if r["kind"] == "atomic" and r["control"] in ("REPAIR", "FINALIZE_RELATIONS")]
    assert audit["classifier"]["instances"] == len([r for r in checks if r["label"] != "post_repair"])
    assert audit["classifier"]["tasks"] == 2 and audit["classifier"]["accuracy"] is not None
    assert "Leakage audit" in (smoke / "README.md").read_text()
    print("\n".join(["", "smoke synthesis audit:", *summary_lines(audit)]))


def test_the_gold_policy_passes_the_audit_on_the_smoke_synthesis(smoke):
    """The thresholds the dataset must meet: no private string, every REPAIR shows its evidence, the faulted turns
    get their clean twins' checks, and the checks alone predict the decision no better than majority + 3 points."""
    audit = json.loads((smoke / "stats.json").read_text())["audit"]
    assert audit["markers"]["markers_found"] == 0, audit["markers"]["examples"]
    assert audit["evidence"]["share"] == 1.0
    assert audit["twins"]["identical_share"] >= 0.95, audit["twins"]["differences"]
    assert audit["classifier"]["gap_points"] <= 3.0
    detectability = json.loads((smoke / "stats.json").read_text())["faults"]["detectability_by_type"]
    assert sum(row["detectable"] for row in detectability.values()) > 0
    card = (smoke / "README.md").read_text()
    assert "Kept faults: detectable from the manager's own checks" in card and "| **all** |" in card


def test_a_prose_marker_needle_reaches_past_long_backticked_names():
    name = "`share_of_transactions_amount_eur_over_1000_in_top3_amount_usd_mean_by_channel`"
    marker = text_marker("fault_text", f"{name} must be computed from the rows the question names, not others")
    assert marker.needle.startswith(name) and marker.needle.endswith("not others")  # 80 characters besides the name
    secrets = {"t1": TaskSecrets("t1", [marker])}
    about_the_variable = row([activation(0), repair(f"{name} must be computed from the data")])
    assert markers_section([about_the_variable], secrets)["markers_found"] == 0
    leaked = row([activation(0), repair(f"{name} must be computed from the rows the question names, not others")])
    assert markers_section([leaked], secrets)["markers_found"] == 1
