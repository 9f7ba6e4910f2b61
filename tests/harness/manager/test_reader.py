"""The question reader's phrase grammar (harness.manager.reader): text + variables -> check specs."""

import pytest

from harness.checks.spec import (
    Aggregate,
    CompleteRows,
    CorrectedCell,
    ExcludedRows,
    Filter,
    GroupAggregate,
    IqrOutliers,
    JoinRows,
    NanCounts,
    Normalized,
    Overlap,
    Param,
    Resample,
    Rounded,
    Share,
    TopK,
    UnitScale,
)
from harness.manager.reader import (
    NotedTurn,
    Variable,
    decimals_of,
    match_column,
    read_turn,
    revision_specs,
    summary_columns,
)

COLUMNS = ("order_id", "order_date", "store_id", "region", "quantity", "unit_price", "revenue")
ORDERS = Variable("orders", "frame", COLUMNS)
CLEAN = Variable("orders_clean", "frame", COLUMNS)
STORES = Variable("stores", "frame", ("store_id", "format", "opened"))
LOAD = NotedTurn("1", "Load data/orders.csv. How many orders are there?", "", (ORDERS, Variable("discount_rate")))
CLEANED = NotedTurn("2", "Using the result of turn 1: Clean the data.", "", (CLEAN,))
DIM = NotedTurn("3", "Load data/stores.csv. How many stores are there per store format?", "", (STORES,))


def kinds(specs):
    return [s.kind for s in specs]


@pytest.mark.parametrize(
    ("text", "decimals"),
    [
        ("Round to 2 decimals.", 2),
        ("rounded to 4 decimals", 4),
        ("Give it to 3 decimal places.", 3),
        ("rounded to 1 d.p.", 1),
        ("No rounding is stated.", None),
    ],
)
def test_decimals_of_reads_every_wording(text, decimals):
    assert decimals_of(text) == decimals


@pytest.mark.parametrize(
    ("phrase", "column"),
    [
        ("unit price", "unit_price"),
        ("revenue", "revenue"),
        ("store format", "format"),
        ("amount in USD", "amount_usd"),
        ("energy cost", "cost"),
        ("peak kW", "peak_kw"),
        ("weather", None),
    ],
)
def test_match_column_prefers_exact_then_most_shared_words(phrase, column):
    columns = (*COLUMNS, "store_id", "format", "amount_usd", "amount_eur", "cost", "peak_kw", "site_id")
    assert match_column(phrase, columns) == column


def test_summary_columns_reads_a_frame_summary_and_says_when_it_is_cut():
    assert summary_columns("DataFrame 10x3 columns=[a, b, c]") == (("a", "b", "c"), False)
    assert summary_columns("DataFrame 10x9 columns=[a, b, ...]") == (("a", "b"), True)
    assert summary_columns("Series name='x' len=3") == ((), False)


@pytest.mark.parametrize(
    ("question", "op", "value"),
    [
        ("How many orders have unit price at least 50, and what is their total revenue?", ">=", 50),
        ("How many orders have quantity above 5, and what is their total revenue?", ">", 5),
        ("How many orders have quantity over 5.5, and what is their total revenue?", ">", 5.5),
        ("How many orders have quantity below 3, and what is their total revenue?", "<", 3),
        ("How many orders have quantity at most 3, and what is their total revenue?", "<=", 3),
        ("How many orders with unit price no fewer than 50, and what is their total revenue?", ">=", 50),
    ],
)
def test_a_filter_and_its_total(question, op, value):
    written = (Variable("big", "frame", COLUMNS), Variable("big_total", "scalar"))
    specs = read_turn(f"Go back to the result of turn 2. {question}", "Use the cleaned orders.", written, [CLEANED])
    assert specs[0] == Filter("big", "orders_clean", "unit_price" if "price" in question else "quantity", op, value)
    assert specs[1] == Aggregate("big_total", "big", "revenue", "sum", None)


@pytest.mark.parametrize(
    ("word", "agg"), [("total", "sum"), ("mean", "mean"), ("average", "mean"), ("median", "median")]
)
def test_a_group_aggregate_names_its_aggregation(word, agg):
    written = (Variable("by_region", "series"),)
    q = f"Using the result of turn 2: What is the {word} revenue per region?"
    specs = read_turn(q, "Use the cleaned orders. Round to 2 decimals.", written, [LOAD, CLEANED])
    assert specs == [GroupAggregate("by_region", "orders_clean", "region", "revenue", agg, 2), Rounded("result", 2)]


def test_a_left_join_then_a_group_is_a_join_rows_and_a_group_aggregate():
    written = (Variable("orders_with_stores", "frame", (*COLUMNS, "format")), Variable("revenue_by_format", "series"))
    q = (
        "Using the results of turns 2, 3: Join the cleaned orders with the stores on store_id, keeping every order. "
        "What is the total revenue per store format, and how many orders have no match?"
    )
    specs = read_turn(q, "Left join. Round to 2 decimals.", written, [LOAD, CLEANED, DIM])
    assert specs[:2] == [
        JoinRows("orders_with_stores", "orders_clean", "stores", "store_id", "left"),
        GroupAggregate("revenue_by_format", "orders_with_stores", "format", "revenue", "sum", 2),
    ]
    assert "nan_counts" not in kinds(specs)  # "how many ... have no match" is not a missing-value count


def test_a_group_through_a_join_in_one_expression():
    sub = NotedTurn("4", "Filter", "", (Variable("big", "frame", COLUMNS), Variable("big_total")))
    q = "Using the results of turns 3, 4: For orders with unit price at least 50, what is the total revenue per store "
    q += "format?"
    specs = read_turn(
        q, "Join on store_id (left join). Round to 2 decimals.", [Variable("big_by_format", "series")], [DIM, sub]
    )
    assert specs[0] == GroupAggregate(
        "big_by_format", "big", "format", "revenue", "sum", 2, "stores", "store_id", "left"
    )
    assert "filter" not in kinds(specs)  # no frame written: the rows were filtered by an earlier turn


@pytest.mark.parametrize(
    ("question", "k", "order"),
    [
        ("Which 3 region values have the highest revenue by region, in descending order?", 3, "largest"),
        ("Which 2 region values have the lowest revenue by region?", 2, "smallest"),
        ("List the top 5 of revenue by region.", 5, "largest"),
        ("What are the three largest of revenue by region?", 3, "largest"),
        ("Which month had the highest revenue by region?", 1, "largest"),
    ],
)
def test_top_k_wordings(question, k, order):
    turn = NotedTurn("4", "per region", "", (Variable("revenue_by_region", "series"), Variable("other", "series")))
    specs = read_turn(f"Using the result of turn 4: {question}", "", [Variable("top", "series")], [turn])
    assert specs == [TopK("top", "revenue_by_region", k, order)]


def test_share_iqr_and_missing_counts():
    turn = NotedTurn("4", "per region", "", (Variable("revenue_by_region", "series"),))
    q = "Using the result of turn 4: Which region value has the largest revenue by region, and what share of the "
    q += "total does it hold?"
    share = read_turn(
        q, "Shares are fractions between 0 and 1, rounded to 4 decimals.", [Variable("share_top")], [turn]
    )
    assert share == [Share("share_top"), Rounded("result", 4)]
    q = "Using the result of turn 2: Using the IQR rule, how many orders are high outliers in quantity, and what is "
    q += "the limit?"
    c = "High outlier: value > Q3 + 1.5 * (Q3 - Q1). Round the limit to 4 decimals."
    iqr = read_turn(q, c, [Variable("outliers", "frame", COLUMNS), Variable("limit")], [LOAD, CLEANED])
    assert iqr == [IqrOutliers("outliers", "orders_clean", "quantity", 1.5, 4), Rounded("result", 4)]
    q = "Go back to the result of turn 1. Before cleaning, which columns of the orders have missing values, and how "
    q += "many each?"
    missing = read_turn(q, "Count NaN cells per column.", [Variable("missing_orders", "series")], [LOAD, CLEANED])
    assert missing == [NanCounts("missing_orders", "orders")]


def test_cleaning_drops_incomplete_rows_and_normalises_spellings():
    q = "Using the result of turn 1: Clean the data: how many orders remain?"
    c = (
        "Drop orders with no revenue or no region. Region names have inconsistent case, stray spaces and synonyms "
        "(N = North, S = South); normalise them to title case."
    )
    specs = read_turn(q, c, [CLEAN], [LOAD])
    assert specs == [
        CompleteRows("orders_clean", "orders", ("revenue", "region")),
        Normalized("orders_clean", "region", ("N", "S")),
    ]
    other = read_turn(q, "Drop orders without revenue or region.", [CLEAN], [LOAD])
    assert other == [CompleteRows("orders_clean", "orders", ("revenue", "region"))]


def test_monthly_totals_in_thousands_and_an_overlap():
    q = "Go back to the result of turn 2. What is the total revenue per month (in thousands)?"
    c = "Amounts in thousands (divide by 1000). Parse order_date as dates. Round to 2 decimals."
    specs = read_turn(q, c, [Variable("monthly", "series")], [LOAD, CLEANED])
    assert specs == [
        Resample("monthly", "orders_clean", "order_date", "revenue", "sum", "MS", 1000.0, 2),
        UnitScale("monthly", "orders_clean", "revenue", 1000.0),
        Rounded("result", 2),
    ]
    a, b = (
        NotedTurn("3", "a", "", (Variable("a", "frame", COLUMNS),)),
        NotedTurn("4", "b", "", (Variable("b", "frame", COLUMNS),)),
    )
    q = "Using the results of turns 3, 4: How many orders are both big and cheap, and what is their total revenue?"
    both = read_turn(q, "", [Variable("ab", "frame", COLUMNS), Variable("ab_total")], [a, b])
    assert both == [Overlap("ab", "a", "b"), Aggregate("ab_total", "ab", "revenue", "sum", None)]


@pytest.mark.parametrize(
    ("context", "expected"),
    [
        ("Revised assumption: discount_rate is 0.08, not 0.05 (a reason).", [Param("discount_rate", 0.08)]),
        ("discount_rate is now 0.08.", [Param("discount_rate", 0.08)]),
        (
            "Correction: unit_price = 3150.0 for order_id 1234 is a data-entry error; the true value is 31.5.",
            [CorrectedCell("orders", "unit_price", 1234, 31.5, "order_id")],
        ),
        ("Store S08 was a test. Exclude every row with store_id S08.", [ExcludedRows("orders", "store_id", "S08")]),
        (
            "The rows with region = 'West' are test records and must be excluded.",
            [ExcludedRows("orders", "region", "West")],
        ),
    ],
)
def test_revision_wordings(context, expected):
    assert revision_specs(context, [ORDERS]) == expected


def test_a_revision_rechecks_the_turns_it_recomputes_and_then_stands():
    grouped = NotedTurn(
        "3", "Using the result of turn 2: What is the mean revenue per region?", "Round to 2 decimals.",
        (Variable("revenue_mean_by_region", "series"),),
    )  # fmt: skip
    written = (ORDERS, CLEAN, Variable("revenue_mean_by_region", "series"))
    q = "With this revision, what are the mean revenue per region (turn 3) now?"
    c = "Exclude every row with store_id S02. Earlier results that used the old figures are stale; recompute them."
    specs = read_turn(q, c, written, [LOAD, CLEANED, grouped], ["No row has store_id S02."])
    assert specs[0] == GroupAggregate("revenue_mean_by_region", "orders_clean", "region", "revenue", "mean", 2)
    assert (
        ExcludedRows("orders", "store_id", "S02") in specs and ExcludedRows("orders_clean", "store_id", "S02") in specs
    )
    assert Rounded("result", 2) not in specs  # the reported result is not a recomputed variable
    revised = NotedTurn("4", q, c, written)
    later = read_turn(
        "Using the result of turn 4: Is it done?", "", [Variable("x")], [LOAD, CLEANED, grouped, revised]
    )
    assert later[0] == ExcludedRows("orders", "store_id", "S02")


def test_constraint_texts_restate_rounding_and_shares_on_the_computed_values():
    written = (Variable("by_region", "series"),)
    q = "Using the result of turn 2: For orders with quantity above 5, what is the total revenue per region?"
    specs = read_turn(q, "Round to 2 decimals.", written, [CLEANED], ["Round every value to 2 decimals."])
    assert Rounded("by_region", 2) in specs and Rounded("result", 2) in specs
    assert read_turn("Nothing asked.", "", [Variable("f", "series")], [], ["Fractions are in [0, 1]."]) == [Share("f")]


def test_nothing_stated_gives_no_spec_and_a_turn_caps_its_stated_specs():
    assert read_turn("Load data/orders.csv. How many orders are there?", "", [ORDERS]) == []
    many = [NotedTurn(str(i), "x", f"Exclude every row with store_id S0{i}.", (ORDERS, CLEAN)) for i in range(1, 5)]
    assert len(read_turn("Using the result of turn 4: go on.", "", [Variable("x")], many)) == 5


def test_a_revision_rechecks_the_named_results_the_worker_left_stale():
    grouped = NotedTurn(
        "3", "Using the result of turn 2: What is the mean revenue per region?", "Round to 2 decimals.",
        (Variable("revenue_mean_by_region", "series"),),
    )  # fmt: skip
    q = "With this revision, what are the mean revenue per region (turn 3) now?"
    c = "Exclude every row with store_id S02. Earlier results that used the old figures are stale; recompute them."
    specs = read_turn(q, c, (ORDERS, CLEAN), [LOAD, CLEANED, grouped])  # the worker did not rewrite turn 3's result
    assert GroupAggregate("revenue_mean_by_region", "orders_clean", "region", "revenue", "mean", 2) in specs
