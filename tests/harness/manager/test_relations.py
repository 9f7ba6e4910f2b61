"""Relations inferred from a turn's words alone (no task graph): one case per phrasing of the synthesizer's contract
(question writers a and b), the fallbacks when named turns are not committed, and the cue order."""

import pytest

from harness.manager.relations import infer_relations, named_turns

COMMITTED = {"1": "S1", "2": "S2", "3": "S3", "4": "S4", "5": "S5"}


def rel(kind, *states):
    return [{"type": kind, "related_state_id": s} for s in states]


@pytest.mark.parametrize(
    ("question", "context", "expected"),
    [
        ("Using the results of turns 2, 3: which region leads?", "", rel("combine", "S2", "S3")),
        ("Using the results of turns 1, 4 and 5: compare them.", "", rel("combine", "S1", "S4", "S5")),
        ("Go back to the result of turn 4 (not the turns after it). What is the median?", "", rel("branch", "S4")),
        ("Using the result of turn 5: what is the share of the top region?", "", rel("progress", "S5")),
        (
            "With this revision, what are the revenue (turn 2) and the top region (turn 4) now?",
            "",
            rel("invalidate", "S2", "S4"),
        ),
        ("What is the total now (turn 3)?", "The corrected price list replaces the old one.", rel("invalidate", "S3")),
        ("How does this compare with turn 2?", "", rel("progress", "S2")),
        ("Compare turn 1 with turn 3.", "", rel("combine", "S1", "S3")),
        ("Load data/sales.csv. How many orders are there?", "Revenue is quantity * unit_price.", [{"type": "init"}]),
        ("With the corrected amount, what is the total?", "Correction: order 7 was mistyped.", [{"type": "init"}]),
        # question writer b's wording of the same relations
        ("Combining what turns 2 and 3 produced: which region leads?", "", rel("combine", "S2", "S3")),
        ("Combining what turns 1, 4 and 5 produced: compare them.", "", rel("combine", "S1", "S4", "S5")),
        ("Return to what turn 4 produced, setting aside the turns after it. The median?", "", rel("branch", "S4")),
        ("Starting from what turn 5 produced: what proportion does the top region hold?", "", rel("progress", "S5")),
        (
            "After this update, report the summed revenue (from turn 2) and the largest (from turn 4) again.",
            "Data-entry fix: the unit_price of order_id 7 was keyed in as 3399.0; it should be 33.99.",
            rel("invalidate", "S2", "S4"),
        ),
        (
            "Starting from what turn 2 produced: the average per region? Work from the latest, revised data.",
            "",
            rel("progress", "S2"),
        ),
    ],
)
def test_each_phrasing(question, context, expected):
    assert infer_relations(question, context, COMMITTED) == expected


def test_only_committed_turns_produce_relations():
    two = "Using the results of turns 2, 3: which region leads?"
    assert infer_relations(two, "", {"2": "S2"}) == rel("progress", "S2")  # a combine with one committed left
    assert infer_relations(two, "", {"1": "S1"}) == [{"type": "init"}]  # none left
    assert infer_relations("Go back to the result of turn 9 (not the turns after it). Why?", "", COMMITTED) == [
        {"type": "init"}
    ]
    revised = "With this revision, what are the mean (turn 1) and the count (turn 7) now?"
    assert infer_relations(revised, "", COMMITTED) == rel("invalidate", "S1")


def test_an_explicit_lead_in_wins_over_revision_wording_elsewhere():
    question = "Using the result of turn 2: what is the mean per region? Use the current (revised) data."
    assert infer_relations(question, "", COMMITTED) == rel("progress", "S2")
    combined = "Using the results of turns 1, 2: which is larger? Use the current (revised) data."
    assert infer_relations(combined, "", COMMITTED) == rel("combine", "S1", "S2")


def test_named_turns_reads_lists_and_ignores_look_alikes():
    assert named_turns("turns 2, 3 and 5; then turn 2 again; Turn 7") == ["2", "3", "5", "7"]
    assert named_turns("the turnover in 2019 and the turns after it") == []
    assert infer_relations("Using the result of turn 04: go on.", "", COMMITTED) == rel("progress", "S4")
