import json

import pytest

from harness.worker import Fault, FaultFileError, infer_corrupted_variables, load_faults
from harness.worker.faults import faults_for_task, read_faults, write_faults

LOAD = "import pandas as pd\nsales = pd.read_csv('x.csv')\n"
REFERENCE = LOAD + "sales['revenue'] = sales['q'] * sales['p']\nresult = 1\n"
FAULTY = LOAD + "sales['revenue'] = sales['q'] + sales['p']\nresult = 1\n"


def test_corrupted_variables_are_the_names_assigned_by_changed_statements():
    assert infer_corrupted_variables(REFERENCE, FAULTY) == ("sales",)
    assert infer_corrupted_variables(REFERENCE, REFERENCE) == ()
    assert infer_corrupted_variables(REFERENCE, "total = (1 +") == ()  # execution-error fault: nothing to localize
    assert infer_corrupted_variables("a = 1", "a = 2\nb, c = 3, 4\ndef f(): pass") == ("a", "b", "c", "f")


def test_declared_variables_win_over_inference():
    fault = Fault("t", "1", "unit_slip", FAULTY, variables=("revenue_k",))
    assert fault.corrupted_variables(REFERENCE) == ("revenue_k",)
    assert Fault("t", "1", "unit_slip", FAULTY).corrupted_variables(REFERENCE) == ("sales",)


def test_round_trip_through_jsonl(tmp_path):
    faults = [Fault("a", "1", "wrong_column", "x = 1"), Fault("b", "3", "unit_slip", "y = 2", variables=("y",))]
    write_faults(tmp_path / "f.jsonl", faults)
    loaded = load_faults(tmp_path / "f.jsonl")
    assert list(loaded.values()) == faults
    assert faults_for_task(loaded, "b") == {"3": faults[1]}


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("not json", r"f.jsonl:2: not JSON"),
        ('["a"]', r"f.jsonl:2: expected a JSON object"),
        ('{"task_id": "a", "turn_id": "1", "fault_type": "x"}', r"missing field 'code'"),
        ('{"task_id": "a", "turn_id": "1", "fault_type": "x", "code": "", "why": 1}', r"unknown field 'why'"),
        ('{"task_id": 3, "turn_id": "1", "fault_type": "x", "code": ""}', r"field 'task_id' must be a string"),
        ('{"task_id": "a", "turn_id": "1", "fault_type": "x", "code": "", "variables": "v"}', r"'variables' must"),
        ('{"task_id": "a", "turn_id": "2", "fault_type": "x", "code": "", "detectable": "yes"}', r"'detectable' must"),
        (
            '{"task_id": "a", "turn_id": 1, "fault_type": "x", "code": "y"}',
            r"f.jsonl: fault 2 is a second fault for task 'a' turn '1'.*--fault-line N",
        ),
    ],
)
def test_bad_lines_name_the_file_line_and_field(tmp_path, line, message):
    first = json.dumps({"task_id": "a", "turn_id": "1", "fault_type": "x", "code": "z"})
    (tmp_path / "f.jsonl").write_text(first + "\n" + line + "\n")
    with pytest.raises(FaultFileError, match=message):
        load_faults(tmp_path / "f.jsonl")


def test_a_fault_may_say_whether_it_is_detectable(tmp_path):
    rows = [
        {"task_id": "a", "turn_id": "1", "fault_type": "x", "code": "p = 1", "detectable": True},
        {"task_id": "a", "turn_id": "2", "fault_type": "x", "code": "p = 2"},
    ]
    (tmp_path / "f.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    faults = read_faults(tmp_path / "f.jsonl")
    assert [f.detectable for f in faults] == [True, None]
    assert [f.to_dict() for f in faults] == rows


def test_missing_file_is_a_clear_error(tmp_path):
    with pytest.raises(FaultFileError, match="no such faults file"):
        load_faults(tmp_path / "missing.jsonl")


def test_read_faults_keeps_every_line_and_load_faults_can_pick_one(tmp_path):
    rows = [{"task_id": "a", "turn_id": "1", "fault_type": t, "code": c} for t, c in (("x", "p = 1"), ("y", "p = 2"))]
    path = tmp_path / "f.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert [f.fault_type for f in read_faults(path)] == ["x", "y"]
    assert load_faults(path, line=2)[("a", "1")].code == "p = 2"
    with pytest.raises(FaultFileError, match="fault line 3 does not exist; the file holds 2 faults"):
        load_faults(path, line=3)
