import json

import pytest

from harness.manager.hints import (
    REPAIR_HINT_NOTE,
    STATE_HINT_NOTE,
    HintError,
    render_repair_hint,
    render_state_hint,
)


def test_state_hint_is_a_json_list_in_its_block_followed_by_the_reference_only_note():
    states = [{"id": "S1", "issue": "total revenue", "conclusions": ["51996.97"]}]
    text = render_state_hint(states)
    body = text.split("<analytical_state_hint>\n")[1].split("\n</analytical_state_hint>")[0]
    assert json.loads(body) == states
    assert text.endswith(STATE_HINT_NOTE)
    assert render_state_hint([]) == ""


def test_repair_hint_names_the_variable_and_reasoning():
    text = render_repair_hint("sales", "revenue adds quantity and price instead of multiplying", "max revenue 2507")
    body = json.loads(text.split("<error_hint>\n")[1].split("\n</error_hint>")[0])
    assert body == {
        "variable": "sales",
        "faulty_reasoning": "revenue adds quantity and price instead of multiplying",
        "evidence": "max revenue 2507",
    }
    assert text.endswith(REPAIR_HINT_NOTE)


@pytest.mark.parametrize(
    "reasoning",
    [
        "use this:\n```python\nsales['revenue'] = sales.quantity * sales.unit_price\n```",
        "sales['revenue'] = sales['quantity'] * sales['unit_price']",
        "total += 1",
    ],
)
def test_repair_hint_refuses_code(reasoning):
    with pytest.raises(HintError, match="must not carry code"):
        render_repair_hint("sales", reasoning)


def test_repair_hint_allows_prose_with_comparisons_and_refuses_empty_or_long():
    assert "<error_hint>" in render_repair_hint("x", "the filter keeps x >= 100 but the question says x > 100")
    with pytest.raises(HintError, match="name the error variable"):
        render_repair_hint(" ", "why")
    with pytest.raises(HintError, match="keep it under"):
        render_repair_hint("x", "word " * 400)
