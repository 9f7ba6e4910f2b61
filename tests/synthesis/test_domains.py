"""Relation-graph task generators: determinism, loadable folders whose answers re-execute, relation coverage,
dependency validity, data quirks and the bad-input errors."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pandas as pd
import pytest

from harness.sandbox import Sandbox
from harness.tasks import load_task
from synthesis.domains import (
    DOMAINS,
    RELATIONS,
    SLOT_KEYS,
    SynthesisError,
    TaskSpec,
    generate_task,
    graph_problems,
    write_task_folder,
)
from synthesis.domains.catalog import DOMAIN_DEFS
from synthesis.domains.writer import open_sandbox, rerun_task_folder, write_public

EXPECTED_DOMAINS = {"commerce", "energy", "education", "sports", "finance", "healthcare", "logistics"}


@pytest.fixture(scope="module")
def sandbox() -> Iterator[Sandbox]:
    box = open_sandbox()
    yield box
    box.close()


def folder_bytes(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def batch(n: int = 36) -> list[TaskSpec]:
    names = sorted(DOMAINS)
    return [generate_task(names[i % len(names)], seed=100 + i, n_turns=6 + (i * 7) % 25) for i in range(n)]


# ---- bad input ------------------------------------------------------------------------------------------------------


def test_unknown_domain_lists_the_valid_names() -> None:
    with pytest.raises(ValueError, match="unknown domain 'space'") as info:
        generate_task("space", 0, 10)
    for name in EXPECTED_DOMAINS:
        assert name in str(info.value)


@pytest.mark.parametrize("n_turns", [5, 31, 0, -3])
def test_n_turns_outside_range_is_rejected_with_the_range(n_turns: int) -> None:
    with pytest.raises(ValueError, match=r"6\.\.30"):
        generate_task("energy", 0, n_turns)


def test_negative_seed_is_rejected() -> None:
    with pytest.raises(ValueError, match="seed=-1"):
        generate_task("energy", -1, 8)


def test_failing_turn_raises_synthesis_error_naming_task_turn_and_error(tmp_path: Path, sandbox: Sandbox) -> None:
    spec = generate_task("finance", 3, 8)
    turns = list(spec.turns)
    turns[3] = dataclasses.replace(turns[3], code="ratio = 1 / 0\nprint_result({'ratio': ratio})")
    broken = dataclasses.replace(spec, turns=tuple(turns))
    with pytest.raises(SynthesisError) as info:
        write_task_folder(broken, tmp_path / "t", sandbox)
    message = str(info.value)
    assert spec.task_id in message and "turn 4" in message and "ZeroDivisionError" in message


def test_reference_that_violates_its_constraint_is_rejected(tmp_path: Path, sandbox: Sandbox) -> None:
    spec = generate_task("commerce", 1, 6)
    turns = list(spec.turns)
    turns[0] = dataclasses.replace(turns[0], constraints=(("orders are never empty", "assert len(orders) == 0"),))
    with pytest.raises(SynthesisError, match="violates its constraint 'orders are never empty'"):
        write_task_folder(dataclasses.replace(spec, turns=tuple(turns)), tmp_path / "t", sandbox)


def test_kernel_on_another_public_folder_is_refused(tmp_path: Path, sandbox: Sandbox) -> None:
    spec = generate_task("sports", 2, 6)
    other = write_public(spec, tmp_path / "other")
    with sandbox.new_kernel(other) as kernel, pytest.raises(ValueError, match="is not"):
        write_task_folder(spec, tmp_path / "task", kernel)


# ---- determinism ----------------------------------------------------------------------------------------------------


def test_same_seed_gives_identical_spec_and_identical_folder_bytes(tmp_path: Path, sandbox: Sandbox) -> None:
    a, b = generate_task("healthcare", 7, 14), generate_task("healthcare", 7, 14)
    assert a == b and a.turns == b.turns
    assert a.tables.keys() == b.tables.keys()
    for name in a.tables:
        pd.testing.assert_frame_equal(a.tables[name], b.tables[name])
    first = write_task_folder(a, tmp_path / "a", sandbox)
    second = write_task_folder(b, tmp_path / "b", sandbox)
    assert folder_bytes(first) == folder_bytes(second)
    assert len(folder_bytes(first)) == 6  # config, description, 2 tables, reference, synthesis


def test_specs_do_not_depend_on_the_hash_seed() -> None:
    script = (
        "import hashlib, json; from synthesis.domains import generate_task; "
        "s = generate_task('commerce', 3, 30); "
        "print(hashlib.sha256(json.dumps([[t.code, t.question, t.context, t.constraints, t.writes, "
        "dict(t.slots)] for t in s.turns], default=str).encode()).hexdigest())"
    )
    root = Path(__file__).resolve().parents[2]
    digests = {
        subprocess.run(
            [sys.executable, "-c", script],
            cwd=root,
            env={**os.environ, "PYTHONHASHSEED": seed},
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        for seed in ("1", "2")
    }
    assert len(digests) == 1 and len(next(iter(digests))) == 64


def test_kernel_argument_gives_the_same_bytes_as_a_sandbox(tmp_path: Path, sandbox: Sandbox) -> None:
    spec = generate_task("education", 5, 9)
    write_task_folder(spec, tmp_path / "a", sandbox)
    public = write_public(spec, tmp_path / "b")
    with sandbox.new_kernel(public) as kernel:
        write_task_folder(spec, tmp_path / "b", kernel)
    assert folder_bytes(tmp_path / "a") == folder_bytes(tmp_path / "b")


def test_different_seeds_differ() -> None:
    a, b = generate_task("commerce", 1, 12), generate_task("commerce", 2, 12)
    assert not a.tables["orders"].equals(b.tables["orders"])
    assert [t.code for t in a.turns] != [t.code for t in b.turns]


# ---- every domain writes a loadable folder whose answers re-execute -------------------------------------------------


def test_at_least_the_seven_domains_are_registered() -> None:
    assert EXPECTED_DOMAINS <= set(DOMAINS)


def test_no_training_config_uses_the_held_out_domain() -> None:
    from synthesis.config import SynthesisConfig
    from synthesis.domains.catalog import HELDOUT_DOMAINS, TRAINING_DOMAINS

    assert set(TRAINING_DOMAINS) | set(HELDOUT_DOMAINS) == set(DOMAINS) and not set(TRAINING_DOMAINS) & set(
        HELDOUT_DOMAINS
    )
    assert SynthesisConfig().domains == sorted(TRAINING_DOMAINS)
    from harness.evaluation.suite_names import ROOT, SUITES

    suites = {ROOT / s.synthesis_config: name for name, s in SUITES.items() if s.synthesis_config is not None}
    held = {name: SynthesisConfig.from_yaml(path) for path, name in suites.items()}
    assert held["heldout-domain"].domains == list(HELDOUT_DOMAINS)
    assert held["heldout-seeds"].domains == sorted(TRAINING_DOMAINS) and held["heldout-seeds"].seed == 1000
    configs = sorted(set((ROOT / "configs" / "synthesis").glob("*.yaml")) - set(suites))  # the training data
    assert len(configs) >= 3
    for path in configs:
        config = SynthesisConfig.from_yaml(path)
        assert not set(config.domains) & set(HELDOUT_DOMAINS), path.name
        assert config.seed + config.tasks_per_domain <= 1000, path.name  # the held-out suites' seeds start at 1000


@pytest.mark.parametrize("domain", sorted(EXPECTED_DOMAINS))
def test_domain_folder_loads_and_answers_equal_a_re_execution(domain: str, tmp_path: Path, sandbox: Sandbox) -> None:
    spec = generate_task(domain, 11, 16)
    folder = write_task_folder(spec, tmp_path / spec.task_id, sandbox)
    task = load_task(folder)
    assert task.kind == "multi_turn" and task.id == spec.task_id
    assert [t.relation for t in task.turns] == [t.relation for t in spec.turns]
    assert sorted(p.name for p in (folder / "public" / "data").iterdir()) == sorted(f"{n}.csv" for n in spec.tables)
    rerun = rerun_task_folder(folder, sandbox)
    assert len(rerun) == 16
    for turn_id, (stored, fresh) in rerun.items():
        assert isinstance(stored, dict) and stored, turn_id
        assert fresh == stored, turn_id
    synthesis = json.loads((folder / "private" / "synthesis.json").read_text())
    assert synthesis["domain"] == domain and synthesis["seed"] == 11
    for turn in spec.turns:
        entry = synthesis["turns"][turn.turn_id]
        assert entry["writes"] == list(turn.writes) and entry["writes"], turn.turn_id
        for slot in entry["slots"].values():
            if isinstance(slot, dict) and "var" in slot:
                assert slot["var"] in entry["writes"], (turn.turn_id, slot)


# ---- relation graph -------------------------------------------------------------------------------------------------


def test_relations_are_well_represented_across_a_batch() -> None:
    specs = batch()
    counts = Counter(t.relation for s in specs for t in s.turns)
    total = sum(counts.values())
    assert set(counts) == set(RELATIONS)
    for relation in ("progress", "branch", "combine", "invalidate"):
        assert counts[relation] / total >= 0.10, (relation, counts)
    assert counts["init"] >= len(specs)
    with_all = sum(1 for s in specs if {t.relation for t in s.turns} == set(RELATIONS))
    assert with_all >= 0.75 * len(specs), with_all


def test_dependencies_are_valid() -> None:
    for spec in batch():
        assert 6 <= len(spec.turns) <= 30
        assert graph_problems(spec) == []
        for index, turn in enumerate(spec.turns, start=1):
            deps = [int(d) for d in turn.depends_on]
            assert all(d < index for d in deps)
            if turn.relation == "branch":
                assert len(deps) == 1 and deps[0] < index - 1
            if turn.relation == "combine":
                assert len(deps) >= 2
            if turn.relation == "progress":
                assert deps == [index - 1]


def test_graph_problems_reports_a_bad_relation() -> None:
    spec = generate_task("energy", 4, 8)
    turns = list(spec.turns)
    turns[5] = dataclasses.replace(turns[5], relation="branch", depends_on=("5",))
    problems = graph_problems(dataclasses.replace(spec, turns=tuple(turns)))
    assert problems == [f"task {spec.task_id} turn 6: relation branch does not fit depends_on ('5',)"]


def test_invalidate_recomputes_and_later_turns_never_read_stale_variables() -> None:
    seen_invalidate = 0
    for spec in batch():
        stale: set[str] = set()
        for turn in spec.turns:
            inputs = set(turn.slots.get("inputs", ()))
            assert not inputs & stale, (spec.task_id, turn.turn_id, inputs & stale)
            if turn.relation == "invalidate":
                seen_invalidate += 1
                recomputed = turn.slots["recompute"]
                assert recomputed and set(recomputed) <= set(turn.writes)
                for name in recomputed:
                    assert f"{name} = " in turn.code or f"{name}[" in turn.code, (spec.task_id, name)
                assert {"param", "correction", "exclude"} & set(turn.slots)
                stale |= set(turn.slots["stale"])
            stale -= set(turn.writes)
    assert seen_invalidate >= 20


def test_slots_use_only_documented_keys_and_name_written_variables() -> None:
    used = set()
    for spec in batch():
        for turn in spec.turns:
            used |= set(turn.slots)
            for slot in turn.slots.values():
                if isinstance(slot, dict) and "var" in slot:
                    assert slot["var"] in turn.writes, (spec.task_id, turn.turn_id, slot)
    assert used <= set(SLOT_KEYS), used - set(SLOT_KEYS)
    assert {"filter", "agg", "groupby", "round", "sort", "join", "unit", "dropna", "share", "recompute"} <= used


def test_constraints_mention_rounding_units_and_shares() -> None:
    texts = " ".join(text for s in batch() for t in s.turns for text, _ in t.constraints)
    contexts = " ".join(t.context for s in batch() for t in s.turns)
    assert "Round every value to 2 decimals" in texts
    assert "fractions in [0, 1]" in texts
    assert "Amounts in thousands" in contexts
    codes = [code for s in batch() for t in s.turns for _, code in t.constraints if code]
    assert len(codes) > 100 and all(compile(code, "<constraint>", "exec") for code in codes)


# ---- quirks ---------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("domain", sorted(EXPECTED_DOMAINS))
def test_tables_have_realistic_quirks(domain: str) -> None:
    d = DOMAIN_DEFS[domain]
    spec = generate_task(domain, 21, 6)
    fact, dim = spec.tables[d.fact], spec.tables[d.dim]
    assert 300 <= len(fact) <= 900
    assert fact[d.nan_column].isna().sum() > 0 and fact[d.category].isna().sum() > 0
    raw = set(fact[d.category].dropna())
    assert len(raw) > 2 * len(d.categories)  # case, spaces and synonyms
    assert any(v != v.strip() for v in raw) and any(v.title() in d.synonyms for v in raw)
    cleaned = {str(v).strip().title() for v in raw}
    assert {d.synonyms.get(v, v) for v in cleaned} == set(d.categories)
    column = fact[d.outlier_column].dropna()
    q1, q3 = column.quantile([0.25, 0.75])
    assert column.max() > q3 + 3 * (q3 - q1)
    dates = pd.to_datetime(fact[d.date_col], format="%Y-%m-%d")
    assert dates.dt.month.nunique() == 12
    assert set(fact[d.dim_key]) - set(dim[d.dim_key])  # keys without a match
    assert set(fact[d.dim_key]) & set(dim[d.dim_key])
    assert any(v != v.strip() or v != v.title() for v in dim[d.dim_attr])
