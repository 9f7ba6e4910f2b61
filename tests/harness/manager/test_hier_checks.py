"""The hierarchical manager whose tier 1 writes checks (``HierPolicy(writes="checks")``): the reply shape and its
strict parser, the exact grammar (Qwen3's tokenizer), and tier 0 running the checks and deciding with no model call
(a failed check -> REPAIR quoting it; a passing one, one that could not run, a malformed spec -> confirm), on the
built-in task with the scripted worker and a scripted tier 1."""

from __future__ import annotations

import dataclasses
import json
import re

import pytest

from harness.checks.spec import CHECK_KINDS, parse_spec
from harness.llm import ChatReply, OpenAIChatBackend
from harness.manager.hier import HARNESS, POLICY, HierPolicy, evidence_texts, quotes_tool_result
from harness.manager.hier_checks import (
    MAX_CHECKS,
    ChecksReplyError,
    checks_grammar,
    compact_spec,
    parse_checks_reply,
    render_checks_reply,
    specs_of_calls,
)
from harness.manager.hier_prompts import CHECKS_SYSTEM
from harness.manager.model_settings import constrain_actions
from harness.manager.runtime import ManagerRuntime
from harness.manager.wire import parse_response
from harness.worker import Fault, ScriptedWorker
from tests.harness.manager.test_hier import actions, call, correct, play, sandbox, task  # noqa: F401  (fixtures)
from tests.harness.test_grammar import needs_grammar
from tests.harness.test_llm import FakeOpenAI, completion

BY_REGION = {"kind": "group_aggregate", "variable": "by_region", "source": "clean", "by": "region",
             "column": "revenue", "agg": "sum", "decimals": 2}  # fmt: skip
TOP = {"kind": "top_k", "variable": "top3", "source": "by_store", "k": 3, "order": "largest"}
MEAN_NOT_SUM = ("clean.groupby('region')['revenue'].sum()", "clean.groupby('region')['revenue'].mean()")
REASON = "by_region['East'] is 151.05, the sum of revenue per region over clean requires 2416.8"


class ChecksBackend:
    """A scripted tier 1 that writes checks (no tools are offered to it): ``reply(turn_id, messages)`` gives the text
    (or raises); the turns asked are kept."""

    def __init__(self, reply):
        self.reply, self.turns = reply, []

    def chat(self, messages, tools=None):
        assert tools is None and messages[0]["content"] == CHECKS_SYSTEM and len(messages) == 2
        turn_id = re.search(r'"turn_id": "(\w+)"', messages[1]["content"]).group(1)
        self.turns.append(turn_id)
        return ChatReply(self.reply(turn_id, messages), prompt_tokens=100, completion_tokens=10)


def first_request(sandbox, task, policy, fault=None, turn="2"):  # noqa: F811
    """Play with ``policy`` until tier 1 is asked for turn ``turn``'s checks; that request (tier 1 not asked yet)."""
    programs = {t: ref.code for t, ref in task.load_answers().items()}
    faults = {turn: Fault(task.id, turn, "test", programs[turn].replace(*fault))} if fault else {}
    with sandbox.new_kernel(task.public_dir) as kernel:
        episode = ManagerRuntime(task, kernel, ScriptedWorker(kernel, programs, faults), policy).start()
        while (inp := episode.next_request()) is not None:
            if inp.turn.turn_id == turn and policy.tier1_messages(inp) is not None:
                episode.close()
                return inp
            episode.answer(policy.respond(inp))
    raise AssertionError(f"tier 1 was never asked for turn {turn}'s checks")


def ran(inp, raw, result, legal=None):
    """``inp`` after one more action of its activation: ``raw`` answered by ``result`` (a dict, as JSON)."""
    previous = (*inp.previous, (raw, json.dumps(result)))
    return dataclasses.replace(inp, previous=previous, legal_actions=legal or inp.legal_actions)


def check_result(spec, passed, reason=""):
    return {"ok": True, "passed": passed, "kind": spec["kind"], "variable": spec["variable"],
            "requirement": "by_region is the sum of revenue per region over clean, rounded to 2 decimals",
            "reason": reason, "error_type": None, "error_message": None, "unavailable": []}  # fmt: skip


@pytest.fixture(scope="module")
def faulted(sandbox, task):  # noqa: F811
    """Turn 2 computed the mean revenue per region, not the sum: tier 1 writes the group_aggregate check."""
    replies = {"2": render_checks_reply([BY_REGION])}
    backend = ChecksBackend(lambda turn_id, messages: replies.get(turn_id, '{"checks": []}'))
    policy = HierPolicy(backend, writes="checks")
    inp = first_request(sandbox, task, policy, MEAN_NOT_SUM)
    assert "run_check" in inp.legal_actions
    return policy, backend, inp


# ---------------------------------------------------------------- tier 0 runs tier 1's checks and decides


def test_a_failed_check_is_repaired_by_tier0_quoting_it_with_no_further_model_call(faulted):
    policy, backend, inp = faulted
    first = policy.respond(inp)
    assert backend.turns == ["1", "2"] and policy.stats.calls == 2  # one call per state
    parsed = parse_response(first)
    assert parsed.action.name == "run_check" and parsed.action.arguments["spec"] == BY_REGION
    assert policy.last_actor == POLICY and parsed.thought == "tier-1 checks: 1 written"
    failed = ran(inp, first, check_result(BY_REGION, False, REASON))
    repair = parse_response(policy.respond(failed)).action
    assert policy.last_actor == HARNESS and backend.turns == ["1", "2"]  # tier 0 decided, no model call
    assert repair.name == "REPAIR"
    assert repair.arguments["error_hint"] == {
        "error_variable": "by_region",
        "faulty_reasoning": "the turn requires: by_region is the sum of revenue per region over clean, rounded to 2 "
        "decimals",
    }
    assert repair.arguments["analytical_evidence"] == f"check group_aggregate on by_region failed: {REASON}"
    assert policy.vet(call("REPAIR", **repair.arguments), failed) is None  # the evidence rule takes the check
    assert policy.written == [
        {"turn_id": "1", "state_id": "S1", "specs": [], "errors": []},
        {"turn_id": "2", "state_id": "S2", "specs": [BY_REGION], "errors": []},
    ]
    # the repaired state's check activation reruns the same check, asking no model
    again = dataclasses.replace(inp, previous=inp.previous[:1])
    assert policy.tier1_messages(again) is None
    assert parse_response(policy.respond(again)).action.arguments["spec"] == BY_REGION
    assert policy.stats.calls == 2


@pytest.mark.parametrize(
    ("passed", "legal"), [(True, True), (None, True), (False, False)], ids=["passed", "not-run", "not-legal"]
)
def test_a_passing_check_or_one_that_could_not_run_confirms(faulted, passed, legal):
    policy, _, inp = faulted
    raw = call("run_check", spec=BY_REGION)
    result = check_result(BY_REGION, passed, "" if passed else REASON)
    if passed is None:
        result.update(error_type="NameError", error_message="name 'clean' is not defined", reason="")
    if not legal:  # the runtime refused the call: its result is no evidence
        nxt = dataclasses.replace(inp, previous=(*inp.previous, (raw, "illegal: run_check is not legal now")))
    else:
        nxt = ran(inp, raw, result)
    policy.tier1_messages(inp)  # the plan exists: nothing to ask
    decision = parse_response(policy.respond(nxt)).action
    assert decision.name == "FINALIZE_RELATIONS" and decision.arguments["mode"] == "confirm"
    assert evidence_texts(nxt.previous[-1:]) == []  # nothing a REPAIR could quote


def test_malformed_specs_are_dropped_and_recorded_and_a_bad_reply_is_rejected(sandbox, task):  # noqa: F811
    bad = dict(TOP, k=0)
    reply = json.dumps({"checks": [BY_REGION, bad, {"kind": "nope", "variable": "x"}, BY_REGION]})
    replies = {"1": "I think it is fine", "2": reply}
    backend = ChecksBackend(lambda turn_id, messages: replies.get(turn_id, '{"checks": []}'))
    policy = HierPolicy(backend, writes="checks")
    inp = first_request(sandbox, task, policy)
    assert [r["turn_id"] for r in policy.rejected] == ["1"] and policy.stats.rejected == 1
    assert policy.rejected[0]["reason"].startswith("unparseable: the reply must be one JSON object")
    first = parse_response(policy.respond(inp))
    assert first.action.arguments["spec"] == BY_REGION  # the valid spec still runs
    errors = policy.written[-1]["errors"]
    assert errors == [
        "checks[1]: top_k.k=0 is out of range; use an integer in [1, 1000]",
        f"checks[2]: check kind 'nope' is unknown; use one of: {', '.join(sorted(CHECK_KINDS))}",
        "checks[3]: repeats checks[0]; dropped",
    ]
    assert first.thought.startswith("tier-1 checks: 1 written, 3 dropped (checks[1]: top_k.k=0")
    assert policy.stats.calls == 2 and policy.stats.failures == 0


def test_without_a_model_or_with_a_raising_backend_tier0_confirms(sandbox, task):  # noqa: F811
    def broken(turn_id, messages):
        raise ConnectionError("chat endpoint http://127.0.0.1:9/v1 failed")

    policy = HierPolicy(ChecksBackend(broken), writes="checks")
    inp = first_request(sandbox, task, policy, turn="1")
    text = policy.respond(inp)
    parsed = parse_response(text)
    assert parsed.action.name == "FINALIZE_RELATIONS" and policy.stats.failures == 1
    assert parsed.thought.startswith("tier-1 reply rejected (the backend raised ConnectionError")
    alone = HierPolicy(None, writes="checks")
    assert parse_response(alone.respond(inp)).action.name == "FINALIZE_RELATIONS" and alone.written == []
    with pytest.raises(ValueError, match="writes='code'"):
        HierPolicy(None, writes="code")


def test_in_a_whole_episode_the_written_check_finds_the_fault_and_the_repair_fixes_it(sandbox, task):  # noqa: F811
    replies = {"2": render_checks_reply([BY_REGION])}
    backend = ChecksBackend(lambda turn_id, messages: replies.get(turn_id, '{"checks": []}'))
    policy = HierPolicy(backend, writes="checks")
    code = task.load_answers()["2"].code.replace(*MEAN_NOT_SUM)
    record, spy = play(sandbox, task, policy, "2", code)
    assert backend.turns == ["1", "2", "3", "4", "5"]  # one model call per state, none for the repaired state
    assert [(r["turn_id"], r["variable"]) for r in record.repairs] == [("2", "by_region")]
    checks = [act for act in record.activations if act["turn_id"] == "2" and any(
        a["parsed"] and a["parsed"]["name"] == "run_check" for a in act["actions"])]  # fmt: skip
    names = [[a["parsed"]["name"] for a in act["actions"]] for act in checks]
    assert names == [
        ["check_execution", "run_check", "REPAIR"],
        ["check_execution", "run_check", "FINALIZE_RELATIONS"],
    ]
    failed, repaired = (json.loads(act["actions"][1]["result"]) for act in checks)
    assert failed["passed"] is False and failed["variable"] == "by_region" and repaired["passed"] is True
    repair = checks[0]["actions"][2]
    assert repair["actor"] == HARNESS and checks[0]["actions"][1]["actor"] == POLICY
    evidence = repair["parsed"]["arguments"]["analytical_evidence"]
    assert " ".join(failed["reason"].split())[:100] in evidence.replace(" equals ", "==").replace(" is ", "=")
    assert correct(record) and policy.rejected == [] and policy.stats.calls == 5
    clean, _ = play(sandbox, task, policy)  # the next episode's states are asked afresh, not given the last ones'
    assert backend.turns[5:] == ["1", "2", "3", "4", "5"] and clean.repairs == [] and correct(clean)


# ---------------------------------------------------------------- the reply, the prompt, the grammar


def test_the_reply_round_trips_and_is_parsed_strictly():
    specs = [parse_spec(BY_REGION), parse_spec({**TOP, "column": None})]
    text = render_checks_reply(specs)
    assert text == json.dumps({"checks": [BY_REGION, TOP]})  # defaults left out, fields in declaration order
    assert compact_spec({**TOP, "column": None}) == TOP
    reply = parse_checks_reply(f"<think>the top 3</think>\n{text}")
    assert reply.specs == tuple(specs) and reply.errors == () and reply.thought == "the top 3"
    many = parse_checks_reply(json.dumps({"checks": [dict(TOP, k=k) for k in range(1, MAX_CHECKS + 2)]}))
    assert len(many.specs) == MAX_CHECKS and many.errors == (
        f"checks[{MAX_CHECKS}]: dropped; at most 6 checks are run",
    )
    for bad, message in [
        ("", "must be one JSON object"),
        (f"{text} and more", "text after the JSON object"),
        ('{"checks": [], "why": 1}', "and nothing else"),
        ('{"checks": {}}', "and nothing else"),
        ('{"checks": [', "bad JSON"),
        ("<think>never closed", "unterminated <think>"),
        ('{"checks": ' + "[" * 200 + "]" * 200 + "}", "nests too deep"),
    ]:
        with pytest.raises(ChecksReplyError, match=message):
            parse_checks_reply(bad)


def test_a_target_is_rendered_from_the_specs_of_run_check_calls():
    full = parse_spec({**TOP, "column": None}).to_dict()  # a caller may write the defaults out
    calls = [call("check_execution", step_id=1), call("run_check", spec=full), "garbage", call("run_check", spec=TOP),
             call("run_check", spec=BY_REGION)]  # fmt: skip
    assert specs_of_calls(calls) == [parse_spec(TOP), parse_spec(BY_REGION)]
    assert render_checks_reply(specs_of_calls(calls)) == json.dumps({"checks": [TOP, BY_REGION]})


def test_the_prompt_lists_every_kind_on_one_line():
    lines = [line for line in CHECKS_SYSTEM.splitlines() if line.startswith("- ") and "(" in line]
    assert [line.split("(")[0] for line in lines] == [f"- {kind}" for kind in CHECK_KINDS]
    assert "- top_k(variable, source, k, order:largest|smallest, column?): " in CHECKS_SYSTEM
    assert len(CHECKS_SYSTEM) < 4_500


def test_the_evidence_rule_quotes_only_a_failed_check():
    raw = call("run_check", spec=BY_REGION)
    failed = (raw, json.dumps(check_result(BY_REGION, False, REASON)))
    passed = (raw, json.dumps(check_result(BY_REGION, True)))
    evidence = "by_region['East'] is 151.05 where the sum is required"
    assert quotes_tool_result(evidence, evidence_texts([failed]))
    assert not quotes_tool_result(evidence, evidence_texts([passed]))
    assert not quotes_tool_result("the sum of revenue per region over clean", evidence_texts([passed]))


@pytest.fixture(scope="module")
def checks_token_grammar(qwen3_tokenizer):
    from harness.grammar import TokenGrammar

    stop = qwen3_tokenizer.convert_tokens_to_ids("<|im_end|>")
    return TokenGrammar(qwen3_tokenizer, checks_grammar(), n_vocab=len(qwen3_tokenizer), stop_ids=[stop])


GROUP = '{"kind": "group_aggregate", "variable": "g", "source": "a", "by": "r", "column": "x", "agg": "sum"'
REPLIES = [
    ('{"checks": []}', True),
    (render_checks_reply([BY_REGION, TOP, {"kind": "rounded", "variable": "result", "decimals": 2},
                          {"kind": "param", "variable": "rate", "value": 0.5},
                          {"kind": "no_missing", "variable": "df", "columns": ["a b"]}]), True),
    ('{"checks": [' + GROUP + ', "join_right": "b", "join_on": "id", "join_how": "left"}]}', True),
    ('{"checks": [' + GROUP + ', "join_right": "b"}]}', False),  # join_right without join_on and join_how
    ('{"checks": [{"kind": "top_k", "variable": "if", "source": "s", "k": 3, "order": "largest"}]}', False),
    ('{"checks": [{"kind": "top_k", "variable": "t", "source": "s", "k": 0, "order": "largest"}]}', False),
    ('{"checks": [{"kind": "top_k", "variable": "t", "source": "s", "k": 3, "order": "desc"}]}', False),
    ('{"checks": [{"kind": "share", "variable": "1x"}]}', False),
    ('{"checks": [{"kind": "share", "variable": "Non"}]}', True),  # a keyword's prefix is a name
    ('{"checks": [{"kind": "no_missing", "variable": "df", "columns": []}]}', False),
    ('{"checks": [{"kind": "filter", "variable": "d", "source": "s", "column": " ", "op": "==", "value": 1}]}', False),
    ('{"checks": [{"kind": "nope", "variable": "df"}]}', False),
    ('{"checks": [{"kind": "share", "variable": "x", "column": "y"}]}', False),
    ('{"checks":[]}', None),  # not render_checks_reply's separators: parses, but is not what decoding writes
]  # fmt: skip


@needs_grammar
@pytest.mark.parametrize(("text", "valid"), REPLIES)
def test_the_grammar_admits_exactly_the_valid_specs(checks_token_grammar, qwen3_tokenizer, text, valid):
    ids = qwen3_tokenizer.encode(text, add_special_tokens=False)
    assert checks_token_grammar.accepts(ids) is bool(valid)
    if valid is not None:
        assert (parse_checks_reply(text).errors == ()) is valid  # the parser agrees


def test_constrained_decoding_sends_the_checks_grammar_to_an_endpoint():
    """constrain_actions on a hier:llm:URL policy whose tier 1 writes checks: vLLM's guided decoding gets the checks
    grammar, not the action grammar."""
    with FakeOpenAI([(200, completion('{"checks": []}'))]) as server:
        policy = HierPolicy(OpenAIChatBackend(server.url, "m"), writes="checks")
        constrain_actions(policy)
        policy.tier1.chat([{"role": "user", "content": "1"}])
    (post,) = server.posts()
    assert post["body"]["structured_outputs"] == {"grammar": checks_grammar()}
    assert checks_grammar().startswith("start: reply\nreply: %json {")
