import pytest

from harness.manager.lifecycle import CONTROL_ACTIONS, TOOL_ACTIONS, TRANSITIONS, Lifecycle, Phase


def run(lc: Lifecycle, *actions: str) -> list:
    out = []
    for action in actions:
        if not lc.activation_open:
            lc.begin_activation()
        out.append(lc.apply(action))
    return out


def test_action_sets_are_the_protocol_of_design_section_3():
    assert set(CONTROL_ACTIONS) == {
        "RESUME_WORKER", "OPEN_STATE", "UPDATE_STATE", "FINALIZE_RELATIONS",
        "COMMIT_STATE", "REPAIR", "ABANDON_STATE", "ABSTAIN",
    }  # fmt: skip
    assert set(TOOL_ACTIONS) == {
        "check_execution",
        "inspect_python",
        "compile_python",
        "run_probe",
        "run_check",
        "load_state",
    }


def test_clean_turn_open_update_check_finalize_commit():
    lc = Lifecycle()
    steps = run(lc, "OPEN_STATE", "UPDATE_STATE", "run_probe", "check_execution", "FINALIZE_RELATIONS", "COMMIT_STATE")
    assert all(t.legal for t in steps)
    assert [t.phase_after for t in steps] == ["open", "updated", "updated", "updated", "finalized", "idle"]
    # tool actions do not end the activation; control actions do
    assert [t.activation for t in steps] == [1, 2, 3, 3, 3, 4]


def test_illegal_transition_is_rejected_with_the_legal_set_and_changes_nothing():
    lc = Lifecycle()
    lc.begin_activation()
    t = lc.apply("COMMIT_STATE")
    assert not t.legal and lc.phase is Phase.IDLE and lc.activation_open
    assert "COMMIT_STATE is illegal in phase 'idle'" in t.message
    assert "legal now: OPEN_STATE, RESUME_WORKER, ABSTAIN, check_execution" in t.message
    assert lc.history[-1] is t


def test_unknown_action_and_no_activation():
    lc = Lifecycle()
    assert "no manager activation is open" in lc.apply("OPEN_STATE").message
    lc.begin_activation()
    assert "unknown action" in lc.apply("DELETE_EVERYTHING").message


def test_repair_modes_and_budget():
    lc = Lifecycle(max_repairs=3)
    run(lc, "OPEN_STATE", "UPDATE_STATE")
    modes = []
    for _ in range(3):
        t = run(lc, "REPAIR")[0]
        modes.append(t.repair_mode)
        assert t.legal and t.phase_after == "open"
        run(lc, "UPDATE_STATE")
    assert modes == ["light", "heavy", "heavy"]
    t = run(lc, "REPAIR")[0]
    assert not t.legal and "repair budget of this state is spent (3/3)" in t.message
    assert "REPAIR" not in lc.legal_actions() and "FINALIZE_RELATIONS" in lc.legal_actions()
    run(lc, "FINALIZE_RELATIONS", "COMMIT_STATE")
    assert lc.repair_attempts == 0  # the next state has a fresh budget


def test_action_budget_per_activation_ends_the_activation():
    lc = Lifecycle(max_actions=3)
    lc.begin_activation()
    results = [lc.apply("run_probe") for _ in range(3)]
    assert all(t.legal for t in results) and not lc.activation_open
    assert lc.legal_actions() == []
    lc.begin_activation()
    assert lc.budget_left == 3 and lc.apply("OPEN_STATE").legal


def test_every_phase_has_an_exit_and_abandon_returns_to_idle():
    for phase, table in TRANSITIONS.items():
        assert table, phase
        if phase is not Phase.IDLE:
            assert table.get("ABANDON_STATE", table.get("COMMIT_STATE")) is Phase.IDLE


def test_bad_budgets_are_rejected():
    with pytest.raises(ValueError, match="max_actions=0"):
        Lifecycle(max_actions=0)
    with pytest.raises(ValueError, match="max_repairs=-1"):
        Lifecycle(max_repairs=-1)
