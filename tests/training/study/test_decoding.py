"""The study's decoding rule (training.study.decoding): no decision before a probe, on top of the legal actions."""

from __future__ import annotations

import pytest

from harness.manager.actions import make_action
from harness.manager.llm_policy import LLMPolicy
from harness.manager.policy_types import PolicyInput
from harness.manager.wire import call_grammar, render_action
from training.study.decoding import DECISIONS, actions_now, decide_after_probe, probed

LEGAL = ("UPDATE_STATE", "REPAIR", "FINALIZE_RELATIONS", "run_probe", "check_execution")
CHECK = render_action(make_action("check_execution", {"step_id": 0}))
PROBE = render_action(make_action("run_probe", {"code": "assert len(df) == 3"}))


def test_no_decision_is_allowed_before_a_probe_of_the_activation_ran():
    fresh = PolicyInput(observation="o", legal_actions=LEGAL)
    checked = PolicyInput(observation="o", legal_actions=LEGAL, previous=((CHECK, '{"ok": true}'),))
    refused = PolicyInput(observation="o", legal_actions=LEGAL, previous=((PROBE, "illegal: run_probe is ..."),))
    ran = PolicyInput(observation="o", legal_actions=LEGAL, previous=((CHECK, "{}"), (PROBE, '{"succeeded": false}')))
    for inp in (fresh, checked, refused):
        assert not probed(inp)
        assert actions_now(inp) == ["UPDATE_STATE", "run_probe", "check_execution"]
    assert probed(ran) and actions_now(ran) == list(LEGAL)
    only = PolicyInput(observation="o", legal_actions=("REPAIR",))  # nothing else legal: the decision stays
    assert actions_now(only) == ["REPAIR"] and set(DECISIONS) == {"REPAIR", "FINALIZE_RELATIONS"}


class RecordingBackend:
    """A stand-in chat backend: keeps each grammar it is given (a function is called with no added tokens)."""

    def __init__(self):
        self.grammars: list[str] = []

    def set_grammar(self, grammar):
        self.grammars.append(grammar(frozenset()) if callable(grammar) else grammar)

    def chat(self, messages, tools=None):
        from harness.llm import ChatReply

        return ChatReply(render_action(make_action("run_probe", {"code": "x = 1"})))


def test_decide_after_probe_narrows_each_reply_grammar_and_refuses_other_policies():
    backend = RecordingBackend()
    policy = LLMPolicy(backend)
    decide_after_probe(policy)
    policy.respond(PolicyInput(observation="{}", legal_actions=LEGAL))
    policy.respond(PolicyInput(observation="{}", legal_actions=LEGAL, previous=((PROBE, "{}"),)))
    assert backend.grammars == [
        call_grammar(()),  # the whole action grammar, then one per reply
        call_grammar((), names=["UPDATE_STATE", "run_probe", "check_execution"]),
        call_grammar((), names=list(LEGAL)),
    ]

    class Tiered:
        name = "hier"
        tier1 = backend

    with pytest.raises(ValueError, match="hier is not one"):
        decide_after_probe(Tiered())
