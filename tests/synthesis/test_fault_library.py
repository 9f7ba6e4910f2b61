"""The fault library on the built-in retail task and on a small hand-made TaskSpec: every type yields valid code that
changes the turn's answer (benign: does not), its evidence probe fails on the faulty run and passes on the clean
run in a real sandbox, the gold hint localizes it, candidates are deterministic, and faults files replay."""

import json
import random
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from harness.sandbox import Sandbox, SandboxConfig
from harness.worker import ScriptedWorker
from synthesis.domains.base import TaskSpec, TurnSpec
from synthesis.faults import (
    BENIGN_TYPES,
    FAULT_TYPES,
    InjectedFault,
    candidate_faults,
    clean_answers,
    faults_from_file,
    hint_localizes,
    task_spec_from_folder,
    verify_fault,
    verify_faults,
    write_injected,
)

RETAIL = Path(__file__).resolve().parents[2] / "harness" / "builtin_tasks" / "retail-sales"
ISOLATION = "bwrap" if shutil.which("bwrap") else "none"
REQUIRED = {
    "wrong_column",
    "wrong_threshold",
    "wrong_aggregation",
    "rounding",
    "unit_slip",
    "stale_variable",
    "wrong_join_key",
    "dropped_rows",
    "nan_mishandling",
    "reversed_sort",
    "wrong_topk",
    "execution_error",
    "claimed_without_execution",
    "benign_rewrite",
}


def shop_task() -> TaskSpec:
    """Seven turns over two joinable tables with NaNs, a threshold value present in the data, a unit factor, a
    top-k, a revised tax rate (invalidate) and a turn that combines it."""
    rng = np.random.default_rng(7)
    n = 40
    amount = rng.uniform(10, 200, n).round(2)
    amount[[3, 11, 19, 27]] = np.nan
    orders = pd.DataFrame(
        {
            "order_id": np.arange(1, n + 1),
            "store_id": rng.integers(1, 6, n),  # store 5 is not in the stores table
            "zone": rng.integers(1, 3, n),
            "amount": amount,
            "qty": rng.integers(1, 9, n),
            "score": rng.choice([4.0, 5.5, 6.0, 6.0, 7.5, 8.0, 9.0], n),
        }
    )
    stores = pd.DataFrame(
        {"store_id": [1, 2, 3, 4], "zone": [2, 1, 2, 1], "region": ["North", "South", "East", "West"]}
    )

    def turn(tid, question, code, deps, relation, **kw):
        return TurnSpec(tid, question, kw.pop("context", ""), code, deps, relation, **kw)

    turns = (
        turn(
            "1",
            "How many orders are there, what is the total amount and the total net of a 10% tax?",
            "import pandas as pd\n"
            "orders = pd.read_csv(f'{BASE_PATH}/data/orders.csv')\n"
            "stores = pd.read_csv(f'{BASE_PATH}/data/stores.csv')\n"
            "tax_rate = 0.1\n"
            "net_total = round(float(orders['amount'].sum()) * (1 - tax_rate), 2)\n"
            "result = {'n_orders': int(len(orders)), 'total_amount': round(float(orders['amount'].sum()), 2),\n"
            "          'net_total': net_total}\n"
            "print_result(result)",
            (),
            "init",
            precision=2,
            writes=("orders", "stores", "tax_rate", "net_total", "result"),
        ),
        turn(
            "2",
            "How many orders have a score above 6, and what is their mean amount?",
            "high = orders[orders['score'] > 6.0]\n"
            "result = {'n_high': int(len(high)), 'mean_amount_high': round(float(high['amount'].mean()), 2)}\n"
            "print_result(result)",
            ("1",),
            "progress",
            context="Round to 2 decimals. Orders without an amount are ignored.",
            precision=2,
            writes=("high", "result"),
            slots={"filter": {"var": "high", "column": "score", "op": ">", "value": 6.0}, "agg": "mean", "round": 2},
        ),
        turn(
            "3",
            "Join orders with stores (keep every order): how many rows, and the total amount per region?",
            "merged = orders.merge(stores, on='store_id', how='left')\n"
            "by_region = merged.groupby('region')['amount'].sum().round(2)\n"
            "result = {'n_rows': int(len(merged)), 'amount_by_region': {k: float(v) for k, v in by_region.items()}}\n"
            "print_result(result)",
            ("1",),
            "branch",
            precision=2,
            writes=("merged", "by_region", "result"),
            slots={"join": {"var": "merged", "left": "orders", "right": "stores", "on": "store_id", "how": "left"}},
        ),
        turn(
            "4",
            "Dropping orders without an amount, what is the amount per region in thousands?",
            "clean = merged.dropna(subset=['amount'])\n"
            "amount_k = clean.groupby('region')['amount'].sum() / 1000\n"
            "result = {'n_clean': int(len(clean)), 'amount_k': {k: round(float(v), 4) for k, v in amount_k.items()}}\n"
            "print_result(result)",
            ("3",),
            "progress",
            context="Amounts in thousands, 4 decimals.",
            precision=4,
            writes=("clean", "amount_k", "result"),
            slots={"unit": {"var": "amount_k", "factor": 1000}, "dropna": {"var": "clean", "subset": ["amount"]}},
        ),
        turn(
            "5",
            "Which two regions have the largest amount?",
            "top = amount_k.sort_values(ascending=False).head(2)\n"
            "result = {'top_regions': list(top.index)}\n"
            "print_result(result)",
            ("4",),
            "progress",
            writes=("top", "result"),
            slots={"sort": {"var": "top", "source": "amount_k", "ascending": False, "k": 2}},
        ),
        turn(
            "6",
            "The tax rate is revised to 20%. What is the total net amount now?",
            "tax_rate = 0.2\n"
            "net_total = round(float(orders['amount'].sum()) * (1 - tax_rate), 2)\n"
            "result = {'net_total': net_total}\n"
            "print_result(result)",
            ("1",),
            "invalidate",
            context="Correction: the tax rate is 20%, not 10%; earlier net figures are stale.",
            precision=2,
            writes=("tax_rate", "net_total", "result"),
            slots={"param": {"var": "tax_rate", "old": 0.1, "new": 0.2}, "recompute": ["tax_rate", "net_total"]},
        ),
        turn(
            "7",
            "What is the net amount (in thousands) of each of the two top regions?",
            "net_top = {r: round(float(amount_k[r]) * (1 - tax_rate), 4) for r in top.index}\n"
            "result = {'net_top_k': net_top}\n"
            "print_result(result)",
            ("5", "6"),
            "combine",
            precision=4,
            writes=("net_top", "result"),
        ),
    )
    return TaskSpec("shop-test", "commerce", 7, "Shop", "A small shop.", {"orders": orders, "stores": stores}, turns)


@pytest.fixture(scope="module")
def sandbox():
    with Sandbox(SandboxConfig(isolation=ISOLATION)) as sb:
        yield sb


@pytest.fixture(scope="module")
def shop(sandbox):
    spec = shop_task()
    answers = clean_answers(spec, sandbox.new_kernel)
    faults = candidate_faults(spec, random.Random(0), answers=answers)
    return spec, answers, faults, verify_faults(faults, spec, sandbox.new_kernel)


@pytest.fixture(scope="module")
def retail(sandbox):
    spec = task_spec_from_folder(RETAIL)
    answers = clean_answers(spec, sandbox.new_kernel)
    faults = candidate_faults(spec, random.Random(1), answers=answers)
    return spec, answers, faults, verify_faults(faults, spec, sandbox.new_kernel)


def test_the_registry_has_every_required_type_and_rejects_unknown_names():
    assert REQUIRED <= set(FAULT_TYPES)
    assert sum(not t.benign for t in FAULT_TYPES.values()) >= 10 and BENIGN_TYPES == ("benign_rewrite",)
    with pytest.raises(ValueError, match=r"unknown fault types \['typo'\].*valid fault types: \["):
        candidate_faults(shop_task(), random.Random(0), types=["wrong_column", "typo"])


def test_every_fault_has_valid_code_and_a_localizing_gold_hint(shop, retail):
    for spec, _answers, faults, _ in (shop, retail):
        references = {t.turn_id: t.code for t in spec.turns}
        for fault in faults:
            assert fault.code != references[fault.turn_id]
            if fault.fault_type != "execution_error":
                compile(fault.code, "<fault>", "exec")  # valid Python
            assert fault.error_variable in fault.variables
            assert hint_localizes(fault.repair_hint(), fault.variables)
            assert "\n" not in fault.faulty_reasoning and "print_result" not in fault.faulty_reasoning
            assert fault.benign == (fault.fault_type in BENIGN_TYPES)
            as_fault = fault.to_fault()
            assert (as_fault.task_id, as_fault.turn_id, as_fault.code) == (spec.task_id, fault.turn_id, fault.code)
            assert as_fault.corrupted_variables(references[fault.turn_id]) == fault.variables


def test_on_the_hand_made_task_every_type_verifies_in_the_sandbox(shop):
    spec, answers, faults, verdicts = shop
    ok_types = {v.fault.fault_type for v in verdicts if v.ok}
    assert ok_types == set(FAULT_TYPES), sorted(set(FAULT_TYPES) - ok_types)
    precision = {t.turn_id: t.precision for t in spec.turns}
    for verdict in verdicts:
        fault = verdict.fault
        assert verdict.ok == (not verdict.reasons)
        if not verdict.ok:
            continue
        assert verdict.clean_answer == answers[fault.turn_id]
        if fault.benign:
            assert not verdict.answer_changed and verdict.faulty_answer == verdict.clean_answer
            assert verdict.evidence_failed_on_faulty is False and verdict.evidence_passed_on_clean is True
        elif fault.evidence_tool == "check_execution":
            assert not verdict.faulty_ran and verdict.faulty_error and verdict.faulty_answer is None
        else:
            assert verdict.faulty_ran and verdict.faulty_answer != verdict.clean_answer, precision[fault.turn_id]
            assert verdict.evidence_failed_on_faulty and verdict.evidence_passed_on_clean
            assert verdict.evidence_message.startswith("AssertionError: `")
            assert "recomputing it from the task data gives" in verdict.evidence_message


def test_slots_choose_the_site_and_off_by_one_is_used_when_a_value_sits_on_the_threshold(shop):
    spec, _, faults, verdicts = shop
    by_type = {(f.turn_id, f.fault_type): f for f in faults}
    threshold = by_type[("2", "wrong_threshold")]
    assert "orders['score'] >= 6.0" in threshold.code or "orders['score'] > 7.5" in threshold.code
    assert by_type[("4", "unit_slip")].code.count("/ 1000") == 0
    assert "'zone'" in by_type[("3", "wrong_join_key")].code
    assert "how='inner'" in by_type[("3", "dropped_rows")].code
    assert "ascending=True" in by_type[("5", "reversed_sort")].code
    stale_invalidate, stale_dependent = by_type[("6", "stale_variable")], by_type[("7", "stale_variable")]
    assert stale_invalidate.error_variable == "net_total" and "tax_rate = 0.2" not in stale_invalidate.code
    assert stale_dependent.code.startswith("tax_rate = 0.1\n") and stale_dependent.error_variable == "tax_rate"
    ok = {(v.fault.turn_id, v.fault.fault_type) for v in verdicts if v.ok}
    assert {("6", "stale_variable"), ("7", "stale_variable"), ("2", "wrong_threshold")} <= ok


def test_on_the_retail_task_the_applicable_types_verify(retail):
    spec, answers, faults, verdicts = retail
    ok = {(v.fault.turn_id, v.fault.fault_type) for v in verdicts if v.ok}
    expected = {
        ("1", "wrong_aggregation"),
        ("1", "claimed_without_execution"),
        ("2", "rounding"),
        ("3", "wrong_column"),
        ("4", "stale_variable"),
        ("5", "reversed_sort"),
        ("5", "unit_slip"),
        ("5", "execution_error"),
        ("5", "benign_rewrite"),
    }
    assert expected <= ok, sorted(expected - ok)
    stale = next(v for v in verdicts if (v.fault.turn_id, v.fault.fault_type) == ("4", "stale_variable"))
    assert stale.faulty_answer == answers["2"]  # the pre-revision values were reused
    assert "`by_region` =" in stale.evidence_message
    # a fault that does not bite is reported with a reason, never silently kept
    rejected = [v for v in verdicts if not v.ok]
    assert all("changes nothing" in " ".join(v.reasons) for v in rejected)


def test_candidates_are_deterministic_for_the_seed():
    spec = shop_task()
    answers = {"1": {"n_orders": 40, "total_amount": 1.0, "net_total": 0.9}}
    first = candidate_faults(spec, random.Random(3), answers=answers)
    again = candidate_faults(spec, random.Random(3), answers=answers)
    assert first == again and len(first) >= len(REQUIRED)
    only = candidate_faults(spec, random.Random(3), types=["rounding", "wrong_topk"])
    assert {f.fault_type for f in only} == {"rounding", "wrong_topk"}
    assert not [f for f in first if f.fault_type == "claimed_without_execution" and f.turn_id != "1"]


def test_the_scripted_worker_plays_a_fault_and_the_gold_hint_repairs_it(sandbox, shop):
    spec, answers, faults, verdicts = shop
    fault = next(v.fault for v in verdicts if v.ok and v.fault.fault_type == "wrong_threshold")
    verdict = next(v for v in verdicts if v.fault == fault)
    with sandbox.new_kernel(_public(spec, sandbox)) as kernel:
        worker = ScriptedWorker(kernel, {t.turn_id: t.code for t in spec.turns}, {fault.turn_id: fault.to_fault()})
        for turn in spec.turns[: int(fault.turn_id)]:
            worker.run_turn(turn.turn_id)
        assert worker.answers[fault.turn_id] == verdict.faulty_answer
        (step,) = worker.repair(fault.turn_id, fault.repair_hint())
        assert step.meta["repair"] == "localized" and worker.answers[fault.turn_id] == answers[fault.turn_id]


_PUBLIC: dict[str, Path] = {}


def _public(spec, sandbox) -> Path:
    import tempfile

    if spec.task_id not in _PUBLIC:
        root = Path(tempfile.mkdtemp(prefix="faults-test-")) / "public" / "data"
        root.mkdir(parents=True)
        for name, table in spec.tables.items():
            table.to_csv(root / f"{name}.csv", index=False)
        _PUBLIC[spec.task_id] = root.parent
    return _PUBLIC[spec.task_id]


def test_faults_from_file_replays_good_lines_and_names_the_bad_ones(tmp_path, sandbox, shop):
    spec, _, faults, verdicts = shop
    good = [
        next(v.fault for v in verdicts if v.ok and (v.fault.turn_id, v.fault.fault_type) == key)
        for key in (("6", "rounding"), ("4", "execution_error"))
    ]
    path = tmp_path / "faults.jsonl"
    write_injected(path, good)
    extra = [
        {"task_id": "nope", "turn_id": "1", "fault_type": "x", "code": "result = 1"},
        {"task_id": spec.task_id, "turn_id": "99", "fault_type": "x", "code": "result = 1"},
        {"task_id": spec.task_id, "turn_id": "2", "fault_type": "x"},
        good[0].to_fault().to_dict(),
    ]
    with path.open("a") as fh:
        fh.write("{not json\n")
        fh.writelines(json.dumps(row) + "\n" for row in extra)
    replayed, skipped = faults_from_file(path, {spec.task_id: spec})
    assert [(f.turn_id, f.fault_type, f.code) for f in replayed] == [(f.turn_id, f.fault_type, f.code) for f in good]
    assert len(skipped) == 5
    assert f"{path}:3: not JSON" in skipped[0]
    assert ":4: task 'nope' (turn '1') is not among" in skipped[1]
    assert f":5: task '{spec.task_id}' has no turn '99' (turns: 1, 2, 3, 4, 5, 6, 7)" in skipped[2]
    assert ":6:" in skipped[3] and "missing field 'code'" in skipped[3]
    assert ":7: repeats an earlier fault" in skipped[4]
    replay_verdicts = verify_faults(replayed, spec, sandbox.new_kernel)
    assert [v.ok for v in replay_verdicts] == [True, True], [v.reasons for v in replay_verdicts]
    assert [f.evidence_tool for f in replayed] == [f.evidence_tool for f in good]


def test_an_injected_fault_rejects_inconsistent_fields():
    base = dict(task_id="t", turn_id="1", fault_type="x", code="a = 1", variables=("a",), violated="v")
    with pytest.raises(ValueError, match="error_variable 'b' is not among the corrupted variables"):
        InjectedFault(
            **base, evidence_tool="check_execution", evidence_code=None, error_variable="b", faulty_reasoning="r"
        )
    with pytest.raises(ValueError, match="needs evidence_code"):
        InjectedFault(**base, evidence_tool="run_probe", evidence_code=None, error_variable="a", faulty_reasoning="r")
    with pytest.raises(ValueError, match="use one of"):
        InjectedFault(**base, evidence_tool="grep", evidence_code=None, error_variable="a", faulty_reasoning="r")


def test_probes_use_only_public_inputs_and_never_print_answers(shop):
    spec, answers, faults, _ = shop
    for fault in faults:
        if fault.evidence_tool == "check_execution":
            assert fault.evidence_code is None and fault.fault_type == "execution_error"
            continue
        probe = fault.evidence_code
        compile(probe, "<probe>", "exec")
        assert "print_result" not in probe and "private" not in probe and "reference" not in probe
        assert "{BASE_PATH}/data/" in probe  # recomputed from the public data
        assert f"assert _same({fault.error_variable}, chk_{fault.error_variable})" in probe or (
            fault.fault_type == "claimed_without_execution" and "assert _same(result, chk_result)" in probe
        )
        if fault.fault_type == "claimed_without_execution":  # the claimed numbers are in the code, not the probe
            assert json.dumps(answers[fault.turn_id]) not in probe


def test_a_claimed_result_passes_check_execution_but_its_code_reads_no_data(sandbox, shop):
    from harness.manager.tools import ExecutedStep, check_execution, inspect_python

    spec, answers, _, verdicts = shop
    claim = next(v for v in verdicts if v.ok and v.fault.fault_type == "claimed_without_execution").fault
    with sandbox.new_kernel(_public(spec, sandbox)) as kernel:
        for turn in spec.turns[: int(claim.turn_id) - 1]:
            assert kernel.execute(turn.code).ok
        result = kernel.execute(claim.code)
        record = check_execution(0, claim.code, {0: ExecutedStep.from_result(0, claim.code, result)})
        assert record.content["verdict"] == "verified" and record.content["results"] != [answers[claim.turn_id]]
        assert inspect_python(claim.code).content["inputs"] == ["print_result"]  # no data or variable is read
        probe = kernel.probe(claim.evidence_code)
        assert probe.error_type == "AssertionError" and "`result` =" in probe.error_message


def test_a_hint_naming_another_variable_does_not_localize(shop):
    _, _, faults, _ = shop
    fault = next(f for f in faults if f.fault_type == "wrong_topk")
    assert "orders" not in fault.variables
    assert not hint_localizes("The variable `orders` looks wrong.", fault.variables)
    assert hint_localizes(fault.repair_hint(), fault.variables)


def test_a_latent_fault_is_rejected_by_default_and_accepted_on_request(sandbox, retail):
    spec, _, _, verdicts = retail
    latent = [v for v in verdicts if not v.answer_changed and v.evidence_failed_on_faulty and not v.fault.benign]
    assert latent, "expected a fault that corrupts an intermediate variable without changing the turn's answer"
    for verdict in latent:
        assert not verdict.ok and verdict.latent and "changes nothing" in " ".join(verdict.reasons)
    again = verify_fault(latent[0].fault, RETAIL, sandbox.new_kernel, require_answer_change=False)  # a task folder
    assert again.ok and again.latent and again.evidence_passed_on_clean, again.reasons
