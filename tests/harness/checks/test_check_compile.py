"""Compiled check specs run through the real clean verifier (``Kernel.probe``): every kind passes on a state that
meets it and fails with an ``AssertionError`` naming what was found and what is required."""

from __future__ import annotations

import ast
import random
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from harness.checks.compile import COMPILERS, compile_check, requirement
from harness.checks.requirements import REQUIREMENTS
from harness.checks.spec import CHECK_KINDS, parse_spec
from harness.sandbox import Sandbox, SandboxConfig
from harness.sandbox.probes import names_read, projections

SETUP = """
import numpy as np, pandas as pd
sales = pd.DataFrame({
    'store': ['a', 'b', 'a', 'c', 'b', 'a'],
    'amount': [10.0, 20.0, 5.0, 7.0, np.nan, 1.0],
    'price': [60, 40, 55, 70, 45, 50],
    'city': ['Oslo', 'Rome', 'Oslo', 'Lima', 'Rome', 'Oslo'],
    'date': ['2024-01-03', '2024-01-20', '2024-03-01', 'bad', '2024-03-15', '2024-03-02'],
})
stores = pd.DataFrame({'store': ['a', 'b', 'd'], 'region': ['N', 'S', 'N']})
by_store = sales.groupby('store')['amount'].sum()
listed = ['a', 'b', 'd', 'e']
"""

# kind -> (spec without "variable", a cell defining `ok` (meets it) and `bad` (violates it), substrings of the message)
CASES: dict[str, tuple[dict, str, tuple[str, ...]]] = {
    "filter": (
        {"source": "sales", "column": "price", "op": ">=", "value": 50},
        "ok = sales[sales['price'] >= 50]\nbad = sales[sales['price'] > 50]",
        ("`bad` has 3 rows", "the 4 rows of `sales` with price >= 50"),
    ),
    "aggregate": (
        {"source": "sales", "column": "amount", "agg": "sum", "decimals": 1},
        "ok = 43.04\nbad = 42.0",
        ("`bad` is 42.0", "the sum of amount over `sales`, 43.0"),
    ),
    "group_aggregate": (
        {"source": "sales", "by": "store", "column": "amount", "agg": "sum"},
        "ok = by_store.to_dict()\nbad = by_store * 2",
        ("`bad` holds 32.0 for group 'a'", "the sum of amount per store over `sales`, 16.0"),
    ),
    "top_k": (
        {"source": "by_store", "k": 2, "order": "largest"},
        "ok = by_store.nlargest(2)\nbad = by_store.nsmallest(2)",
        ("`bad` holds [7.0, 16.0]", "the 2 largest of `by_store` in order, [20.0, 16.0]"),
    ),
    "sort_order": (
        {"column": "price", "ascending": False},
        "ok = sales.sort_values('price', ascending=False)\nbad = sales.sort_values('price')",
        ("`bad` is not sorted by price, descending", "position 1 holds 45 after 40"),
    ),
    "join_rows": (
        {"left": "sales", "right": "stores", "on": "store", "how": "inner"},
        "ok = sales.merge(stores, on='store')\nbad = sales.merge(stores, on='store', how='left')",
        ("`bad` has 6 rows", "the 5 rows an inner join of `sales` and `stores` on store keeps"),
    ),
    "complete_rows": (
        {"source": "sales", "columns": ["amount", "price"]},
        "ok = sales.dropna(subset=['amount'])\nbad = sales",
        ("`bad` has 6 rows", "the 5 rows of `sales` with all of amount, price present"),
    ),
    "no_missing": (
        {"columns": ["amount", "price"]},
        "ok = sales.dropna()\nbad = sales",
        ("`bad` has missing values: {'amount': 1}", "none in amount, price"),
    ),
    "normalized": (
        {"column": "city", "variants": ["Roma"]},
        "ok = sales\nbad = sales.assign(city=sales['city'].str.lower())",
        ("not normalised: ['lima', 'oslo', 'rome']", "trimmed, title case"),
    ),
    "iqr_outliers": (
        {"source": "sales", "column": "price", "k": 0.5},
        "ok = sales[sales['price'] > 65]\nbad = sales",
        ("`bad` has 6 rows", "the 1 rows of `sales` with price above Q3 + 0.5 * IQR = 65.0"),
    ),
    "nan_counts": (
        {"source": "sales"},
        "ok = sales.isna().sum()\nbad = {'amount': 2}",
        ("`bad` counts {'amount': 2}", "the NaN cells per column of `sales`, {'amount': 1}"),
    ),
    "share": (
        {},
        "ok = (by_store / by_store.sum()).round(3)\nbad = by_store / 10",
        ("`bad` has 2 values outside [0, 1], such as [1.6, 2.0]", "fractions between 0 and 1"),
    ),
    "rounded": (
        {"decimals": 2},
        "ok = {'total': 43.0, 'parts': [1.25, 2.5]}\nbad = {'total': 43.0, 'parts': [1.255]}",
        ("`bad` has numbers with more than 2 decimals: [1.255]", "rounded to 2 decimals"),
    ),
    "param": (
        {"value": 0.08},
        "ok = 0.08\nbad = 0.05",
        ("`bad` is 0.05", "the revised value 0.08"),
    ),
    "corrected_cell": (
        {"column": "price", "key": "c", "value": 75, "key_column": "store"},
        "ok = sales.assign(price=sales['price'].where(sales['store'] != 'c', 75))\nbad = sales",
        ("`bad` holds [70]", "price = 75 where store is 'c'"),
    ),
    "excluded_rows": (
        {"column": "store", "value": "b"},
        "ok = sales[sales['store'] != 'b']\nbad = sales",
        ("`bad` still has 2 rows with store 'b'", "required: none"),
    ),
    "overlap": (
        {"left": "by_store", "right": "listed"},
        "ok = ['a', 'b']\nbad = ['a']",
        ("`bad` has 1 entries", "the 2 that `by_store` and `listed` have in common"),
    ),
    "unit_scale": (
        {"source": "sales", "column": "amount", "factor": 1000},
        "ok = pd.Series([0.01, 0.033])\nbad = pd.Series([10.0, 33.0])",
        ("`bad` times 1000 adds up to 43000.0", "the total of amount over `sales`, 43.0"),
    ),
    "resample": (
        {"source": "sales", "date_column": "date", "column": "amount", "factor": 1, "decimals": 1},
        "ok = pd.Series({'2024-01': 30.0, '2024-02': 0.0, '2024-03': 6.0})\n"
        "bad = pd.Series({'2024-01': 30.0, '2024-03': 13.0})",
        ("`bad` holds 13.0 for '2024-03'", "6.0"),
    ),
}


@pytest.fixture(scope="module")
def kernel(tmp_path_factory: pytest.TempPathFactory) -> Iterator:
    public = tmp_path_factory.mktemp("public")
    (public / "data").mkdir()
    isolation = "bwrap" if shutil.which("bwrap") else "none"
    config = SandboxConfig(isolation=isolation, cell_timeout_s=5.0, grace_s=1.0, memory_mb=1024, max_processes=32)
    with Sandbox(config) as sandbox:
        k = sandbox.new_kernel(Path(public))
        assert k.execute(SETUP).ok
        yield k
        k.close()


def test_every_kind_has_a_case_and_a_compiler():
    assert set(CASES) == set(CHECK_KINDS) == set(COMPILERS) == set(REQUIREMENTS)


@pytest.mark.parametrize("kind", sorted(CASES))
def test_kind_passes_on_a_state_that_meets_it_and_fails_saying_found_and_required(kernel, kind):
    fields, cell, expected = CASES[kind]
    defined = kernel.execute(cell)
    assert defined.ok, defined.error_message
    ok = kernel.probe(compile_check(parse_spec({"kind": kind, "variable": "ok", **fields})))
    assert ok.ok, f"{ok.error_type}: {ok.error_message}"
    spec = parse_spec({"kind": kind, "variable": "bad", **fields})
    bad = kernel.probe(compile_check(spec))
    assert not bad.ok and bad.error_type == "AssertionError", f"{bad.error_type}: {bad.error_message}"
    for text in expected:
        assert text in bad.error_message
    assert "`bad`" in requirement(spec)


@pytest.mark.parametrize(
    "kind, fields",
    [
        ("filter", {"source": "sales", "column": "price", "op": ">", "value": 1}),
        ("aggregate", {"source": "sales", "column": "amount", "agg": "sum"}),
        ("group_aggregate", {"source": "sales", "by": "store", "column": "amount", "agg": "mean"}),
        ("top_k", {"source": "sales", "column": "price", "k": 3, "order": "smallest"}),
        ("sort_order", {"column": "price", "ascending": True}),
        ("no_missing", {"columns": ["price"]}),
        ("param", {"value": 3}),
        ("complete_rows", {"source": "sales", "columns": ["amount"]}),
        ("iqr_outliers", {"source": "sales", "column": "price", "k": 1.5}),
        ("join_rows", {"left": "sales", "right": "stores", "on": "store", "how": "left"}),
        ("nan_counts", {"source": "sales"}),
        ("normalized", {"column": "city"}),
        ("overlap", {"left": "by_store", "right": "listed"}),
        ("resample", {"source": "sales", "date_column": "date", "column": "amount"}),
        ("unit_scale", {"source": "sales", "column": "amount", "factor": 1000}),
    ],
)
def test_a_variable_of_the_wrong_kind_fails_saying_so(kernel, kind, fields):
    assert kernel.execute("wrong = 'text' if " + repr(kind) + " == 'param' else 3.5").ok
    result = kernel.probe(compile_check(parse_spec({"kind": kind, "variable": "wrong", **fields})))
    assert not result.ok and result.error_type == "AssertionError", f"{result.error_type}: {result.error_message}"
    assert "`wrong`" in result.error_message


def test_a_group_aggregate_through_a_join_and_a_top_k_of_a_column(kernel):
    assert kernel.execute(
        "per_region = sales.merge(stores, on='store', how='left').groupby('region')['amount'].sum()\n"
        "top_rows = sales.nlargest(2, 'price')\ntop_names = by_store.nlargest(2).index.tolist()\npeak = top_names[0]"
    ).ok
    joined = {"source": "sales", "by": "region", "column": "amount", "agg": "sum"}
    joined |= {"join_right": "stores", "join_on": "store", "join_how": "left"}
    assert kernel.probe(compile_check(parse_spec({"kind": "group_aggregate", "variable": "per_region", **joined}))).ok
    top = {"kind": "top_k", "variable": "top_rows", "source": "sales", "column": "price", "k": 2, "order": "largest"}
    assert kernel.probe(compile_check(parse_spec(top))).ok
    wrong = kernel.probe(compile_check(parse_spec({**top, "k": 3})))
    assert not wrong.ok and "[70.0, 60.0, 55.0]" in wrong.error_message
    names = {"kind": "top_k", "variable": "top_names", "source": "by_store", "k": 2, "order": "largest"}
    assert kernel.probe(compile_check(parse_spec(names))).ok  # labels of the source stand for their values
    assert kernel.probe(compile_check(parse_spec({**names, "variable": "peak", "k": 1}))).ok
    smallest = kernel.probe(compile_check(parse_spec({**names, "order": "smallest"})))
    assert not smallest.ok and "`top_names` holds [20.0, 16.0]; required: the 2 smallest" in smallest.error_message


def test_internal_names_are_renamed_when_a_variable_starts_with_them(kernel):
    assert kernel.execute("_ckwant = sales[sales['price'] >= 50]").ok
    spec = parse_spec({"kind": "filter", "variable": "_ckwant", "source": "sales", "column": "price", "op": ">=",
                       "value": 50})  # fmt: skip
    code = compile_check(spec)
    assert "_ck_want = " in code and "len(_ckwant)" in code
    assert kernel.probe(code).ok


ODD = ["it's", 'say "hi"', "{x}", "}{", "a\\nb", "line\nbreak", "ünïcødé ✓", "", "'''", "f'{1}'", "-0"]


def _odd_value(rng: random.Random):
    return rng.choice([rng.choice(ODD), rng.randint(-(10**12), 10**12), rng.uniform(-1e6, 1e6), rng.random() < 0.5])


def test_every_kind_compiles_for_odd_values():
    """A property over random specs with quotes, braces, newlines, unicode and negative numbers: the code parses, and
    each column label and string value of the spec is in it as an exact string constant."""
    rng = random.Random(0)
    for _ in range(40):
        for kind, (fields, _, _) in CASES.items():
            odd = {}
            for name, value in fields.items():
                if name in {"column", "by", "date_column", "key_column"}:
                    odd[name] = rng.choice([s for s in ODD if s]) + "x"
                elif name in {"value", "key"}:
                    odd[name] = _odd_value(rng)
                elif name in {"columns", "variants"}:
                    odd[name] = [rng.choice([s for s in ODD if s]) + "y" for _ in range(2)]
                else:
                    odd[name] = value
            spec = parse_spec({"kind": kind, "variable": "v", **odd})
            code = compile_check(spec)
            constants = {n.value for n in ast.walk(ast.parse(code)) if isinstance(n, ast.Constant)}
            for name in ("column", "by", "date_column", "key_column", "value", "key"):
                if isinstance(odd.get(name), str):
                    assert odd[name] in constants, (kind, name, odd[name])
            assert "`v`" in requirement(spec)


def test_labels_and_values_with_quotes_braces_and_newlines_reach_the_message_intact(kernel):
    label, value = 'it\'s {x}\n"q"', 'say "hi" {0} ünï'
    assert kernel.execute(f"odd = pd.DataFrame({{{label!r}: [{value!r}, 'b', {value!r}], 'n': [1, -2, 3]}})").ok
    excluded = parse_spec({"kind": "excluded_rows", "variable": "odd", "column": label, "value": value})
    result = kernel.probe(compile_check(excluded))
    assert not result.ok and result.error_type == "AssertionError"
    assert f"`odd` still has 2 rows with {label} {value!r}; required: none" in result.error_message
    kept = parse_spec({"kind": "filter", "variable": "odd", "source": "odd", "column": "n", "op": ">", "value": -3})
    assert kernel.probe(compile_check(kept)).ok


def test_requirements_in_words_and_a_json_spec_compiles_like_its_dataclass():
    top = {"kind": "top_k", "variable": "top3", "source": "revenue_by_store", "k": 3, "order": "largest"}
    assert requirement(top) == "`top3` lists the 3 largest values of `revenue_by_store`, largest first"
    joined = {"kind": "group_aggregate", "variable": "per_region", "source": "sales", "by": "region"}
    joined |= {"column": "amount", "agg": "sum", "decimals": 2}
    joined |= {"join_right": "stores", "join_on": "store", "join_how": "left"}
    assert requirement(joined) == (
        "`per_region` is the sum of amount per region over `sales` joined (left) with `stores` on store, "
        "rounded to 2 decimals"
    )
    assert compile_check(top) == compile_check(parse_spec(top))


def test_an_error_in_a_source_is_not_a_failed_check(kernel):
    assert kernel.execute("total = 43.0").ok
    spec = {"kind": "aggregate", "variable": "total", "source": "sales", "column": "no_such_column", "agg": "sum"}
    result = kernel.probe(compile_check(spec))
    assert not result.ok and result.error_type == "KeyError"


@pytest.mark.parametrize(
    "spec, exported",
    [
        (
            {"kind": "filter", "variable": "v", "source": "s", "column": "a", "op": ">", "value": 1},
            {"v": ["a"], "s": ["a"]},
        ),
        ({"kind": "aggregate", "variable": "v", "source": "s", "column": "a", "agg": "sum"}, {"s": ["a"]}),
        (
            {
                "kind": "group_aggregate",
                "variable": "v",
                "source": "s",
                "by": "k",
                "column": "a",
                "agg": "mean",
                "join_right": "r",
                "join_on": "j",
                "join_how": "left",
            },
            {"s": ["a", "j"], "r": ["j", "k"]},
        ),
        ({"kind": "top_k", "variable": "v", "source": "s", "column": "a", "k": 3, "order": "largest"}, {"s": ["a"]}),
        ({"kind": "complete_rows", "variable": "v", "source": "s", "columns": ["a", "b"]}, {"v": [], "s": ["a", "b"]}),
        ({"kind": "iqr_outliers", "variable": "v", "source": "s", "column": "a", "k": 1.5}, {"v": [], "s": ["a"]}),
        (
            {"kind": "join_rows", "variable": "v", "left": "s", "right": "r", "on": "j", "how": "inner"},
            {"v": [], "s": ["j"], "r": ["j"]},
        ),
        ({"kind": "unit_scale", "variable": "v", "source": "s", "column": "a", "factor": 1000}, {"s": ["a"]}),
        ({"kind": "no_missing", "variable": "v", "columns": ["a"]}, {"v": ["a"]}),
        ({"kind": "sort_order", "variable": "v", "column": "a", "ascending": True}, {"v": ["a"]}),
    ],
)
def test_frames_are_read_only_through_the_columns_a_check_names(spec, exported):
    """The verifier exports only those columns (column projection): what keeps a check on a large frame fast."""
    tree = ast.parse(compile_check(spec))
    names, _ = names_read(tree)
    assert {name: cols for name, cols in projections(tree, names).items() if name in exported} == exported
