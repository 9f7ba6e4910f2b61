"""Check specs: every kind round-trips through JSON, its schema agrees with the parser, and a malformed spec is
refused with one line naming the field."""

import json

import pytest

from harness.checks import CHECK_KINDS, CheckSpecError, parse_spec, spec_schema

EXAMPLES = {
    "filter": {"variable": "big", "source": "orders", "column": "unit_price", "op": ">=", "value": 50},
    "aggregate": {"variable": "total", "source": "big", "column": "revenue", "agg": "sum", "decimals": 2},
    "group_aggregate": {
        "variable": "by_store", "source": "orders", "by": "store", "column": "revenue", "agg": "mean",
        "decimals": 2, "join_right": "stores", "join_on": "store_id", "join_how": "left",
    },
    "top_k": {"variable": "top3", "source": "by_store", "k": 3, "order": "largest"},
    "sort_order": {"variable": "ranked", "column": "revenue", "ascending": False},
    "join_rows": {"variable": "joined", "left": "orders", "right": "stores", "on": "store_id", "how": "inner"},
    "complete_rows": {"variable": "clean", "source": "orders", "columns": ["revenue", "store"]},
    "no_missing": {"variable": "clean", "columns": ["revenue"]},
    "normalized": {"variable": "clean", "column": "region", "variants": ["N. East", "north east"]},
    "iqr_outliers": {"variable": "high", "source": "orders", "column": "revenue", "k": 1.5, "decimals": None},
    "nan_counts": {"variable": "missing", "source": "orders"},
    "share": {"variable": "shares"},
    "rounded": {"variable": "result", "decimals": 2},
    "param": {"variable": "discount_rate", "value": 0.08},
    "corrected_cell": {"variable": "orders", "column": "qty", "key": "O-17", "value": 4, "key_column": "order_id"},
    "excluded_rows": {"variable": "orders", "column": "store_id", "value": "S08"},
    "overlap": {"variable": "both", "left": "a", "right": "b"},
    "unit_scale": {"variable": "monthly_k", "source": "orders", "column": "revenue", "factor": 1000},
    "resample": {
        "variable": "monthly_k", "source": "orders", "date_column": "date", "column": "revenue", "agg": "sum",
        "rule": "MS", "factor": 1000, "decimals": 1,
    },
}  # fmt: skip


def test_every_kind_has_an_example_that_round_trips_through_json():
    assert set(EXAMPLES) == set(CHECK_KINDS)
    for kind, args in EXAMPLES.items():
        spec = parse_spec({"kind": kind, **args})
        again = parse_spec(json.loads(json.dumps(spec.to_dict())))
        assert again == spec, kind
        assert spec.to_dict() == {"kind": kind, **{k: v for k, v in spec.to_dict().items() if k != "kind"}}
        assert spec.variables()[0] == args["variable"]


def test_variables_lists_the_sources_a_check_reads():
    assert parse_spec({"kind": "group_aggregate", **EXAMPLES["group_aggregate"]}).variables() == (
        "by_store", "orders", "stores",
    )  # fmt: skip
    assert parse_spec({"kind": "join_rows", **EXAMPLES["join_rows"]}).variables() == ("joined", "orders", "stores")
    assert parse_spec({"kind": "share", "variable": "s"}).variables() == ("s",)


def test_the_schema_names_exactly_the_parser_fields():
    union = spec_schema()
    assert len(union["oneOf"]) == len(CHECK_KINDS)
    for kind, args in EXAMPLES.items():
        schema = spec_schema(kind)
        assert schema["properties"]["kind"] == {"const": kind}
        assert set(schema["properties"]) == {"kind", *parse_spec({"kind": kind, **args}).to_dict()}
        assert set(schema["required"]) <= {"kind", *args}
        assert schema["additionalProperties"] is False
    assert spec_schema("top_k")["properties"]["order"]["enum"] == ["largest", "smallest"]
    assert spec_schema("aggregate")["properties"]["decimals"]["anyOf"][-1] == {"type": "null"}


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ("top_k", "must be a JSON object"),
        ({"kind": "topk"}, "check kind 'topk' is unknown; use one of: aggregate,"),
        ({"kind": "top_k", "variable": "top3", "source": "s", "k": 3}, "top_k.order is missing"),
        ({"kind": "top_k", "variable": "top3", "source": "s", "k": 0, "order": "largest"}, "k=0 is out of range"),
        ({"kind": "top_k", "variable": "top3", "source": "s", "k": True, "order": "largest"}, "must be an integer"),
        ({"kind": "top_k", "variable": "top 3", "source": "s", "k": 3, "order": "largest"}, "not a Python variable"),
        ({"kind": "top_k", "variable": "x", "source": "import", "k": 3, "order": "up"}, "top_k.source='import'"),
        ({"kind": "filter", **EXAMPLES["filter"], "op": "=~"}, "filter.op='=~' is not one of"),
        ({"kind": "filter", **EXAMPLES["filter"], "value": [1]}, "must be a number, a string or a bool"),
        ({"kind": "filter", **EXAMPLES["filter"], "value": float("nan")}, "must be a finite number"),
        ({"kind": "share", "variable": "s", "code": "1"}, "share: unknown field 'code'"),
        ({"kind": "rounded", "variable": "result", "decimals": 40}, "rounded.decimals=40 is out of range"),
        ({"kind": "no_missing", "variable": "x", "columns": []}, "no_missing.columns is empty"),
        ({"kind": "unit_scale", **EXAMPLES["unit_scale"], "factor": 0}, "unit_scale.factor=0 must be above 0"),
        ({"kind": "group_aggregate", **EXAMPLES["group_aggregate"], "join_on": None}, "without join_on and join_how"),
        ({"kind": "sort_order", "variable": "r", "ascending": "yes"}, "must be true or false"),
    ],
)
def test_a_malformed_spec_is_refused_in_one_line_naming_the_field(data, message):
    with pytest.raises(CheckSpecError) as info:
        parse_spec(data)
    assert message in str(info.value)
    assert "\n" not in str(info.value)
