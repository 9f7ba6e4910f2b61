"""Grammar-constrained decoding (harness/grammar.py, harness.manager.wire.call_grammar): the action grammar accepts
every canonical action and nothing malformed, with Qwen3's tokenizer (``<tool_call>`` is one added token); a random
tiny model that never writes a valid action on its own writes one under the grammar (HFChatBackend); the OpenAI
backend sends the grammar as vLLM's ``structured_outputs``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.checks import CHECK_KINDS
from harness.import_utils import is_available
from harness.llm import HFChatBackend, OpenAIChatBackend
from harness.manager.actions import make_action, tool_schemas
from harness.manager.wire import ReplyLimits, call_grammar, call_schema, parse_response, render_action
from tests.harness.test_llm import FakeOpenAI, build_tiny_chat_model, completion

needs_grammar = pytest.mark.skipif(
    not (is_available("llguidance") and is_available("transformers") and is_available("torch")),
    reason="the train extra (llguidance, transformers, torch) is not installed",
)

ACTIONS = [
    make_action(
        "OPEN_STATE",
        {
            "issue": 'How many "late" orders are there? (ünïcode kept)',
            "constraints": [{"text": "rounded to 2 decimals"}, {"text": "no nulls", "code": "assert x.notna().all()"}],
            "relations": [{"type": "progress", "related_state_id": "S1"}],
        },
    ),
    make_action(
        "UPDATE_STATE",
        {
            "issue": "the count",
            "source_interval": {"start_step": 0, "end_step": 2},
            "used_variables": ["orders"],
            "conclusions": ["502 orders"],
        },
    ),
    make_action("FINALIZE_RELATIONS", {"mode": "confirm", "relations": [], "conflict_evidence": ""}),
    make_action(
        "REPAIR",
        {
            "analytical_evidence": "probe: total != sum\nline 2",
            "error_hint": {"error_variable": "total", "faulty_reasoning": "summed the wrong column"},
        },
    ),
    make_action("COMMIT_STATE"),
    make_action("run_probe", {"code": "print(df[df['a'] < 3].sum())\nprint('<done>')"}),
    make_action("check_execution", {"step_id": 3}),
    make_action("run_check", {"spec": {"kind": "top_k", "variable": "top3", "source": "rev", "k": 3,
                                       "order": "largest"}}),
    make_action(
        "UPDATE_STATE",
        {
            "issue": "big orders",
            "source_interval": {"start_step": 0, "end_step": 1},
            "used_variables": ["big"],
            "conclusions": ["12 orders"],
            "constraints": [
                {"text": "amount over 1.5", "check": {"kind": "filter", "variable": "big", "source": "df",
                                                      "column": "amount", "op": ">", "value": 1.5}},
                {"text": "no check", "check": None},
            ],
        },
    ),
]  # fmt: skip


@pytest.fixture(scope="module")
def qwen3_grammar(qwen3_tokenizer):
    from harness.grammar import TokenGrammar, added_tokens

    stop = qwen3_tokenizer.convert_tokens_to_ids("<|im_end|>")
    return TokenGrammar(
        qwen3_tokenizer, call_grammar(added_tokens(qwen3_tokenizer)), n_vocab=len(qwen3_tokenizer), stop_ids=[stop]
    )


def test_call_grammar_writes_added_tags_as_tokens_and_others_as_text():
    assert call_grammar({"<tool_call>", "</tool_call>"}).startswith(
        'start: <tool_call> "\\n" call "\\n" </tool_call>\n'
    )
    assert call_grammar().startswith('start: "<tool_call>" "\\n" call "\\n" "</tool_call>"\n')
    names = [alt["properties"]["name"]["const"] for alt in call_schema()["oneOf"]]
    assert names == [tool["function"]["name"] for tool in tool_schemas()]
    assert [a["properties"]["name"]["const"] for a in call_schema({"REPAIR", "ABSTAIN"})["oneOf"]] == [
        "REPAIR",
        "ABSTAIN",
    ]
    with pytest.raises(ValueError, match="no action among"):
        call_schema({"NOT_AN_ACTION"})
    check_grammar = call_grammar(names=["run_check"])  # the text the vLLM path sends as structured_outputs
    assert all(f'{{"const": "{kind}"}}' in check_grammar for kind in CHECK_KINDS)


@needs_grammar
@pytest.mark.parametrize("action", ACTIONS, ids=lambda a: a.name)
def test_the_grammar_accepts_every_canonical_action(qwen3_grammar, qwen3_tokenizer, action):
    ids = qwen3_tokenizer.encode(render_action(action), add_special_tokens=False)
    assert qwen3_grammar.accepts(ids)
    assert not qwen3_grammar.accepts(ids[:-1])  # a cut reply is a prefix, not a sentence


@needs_grammar
@pytest.mark.parametrize(
    "text",
    [
        '<tool_call>\n{"name": "OPEN_STATE", "arguments": {"issue": "x", "constraints": [{text: "y"}], '
        '"relations": [{"type": "init"}]}}\n</tool_call>',  # an unquoted key (the fifth edition's SFT model)
        '<tool_call>\n{"name": "OPEN_STATE", "arguments": {"issue": "x", "constraints": []}}\n</tool_call>',
        '<tool_call>\n{"name": "FINALIZE", "arguments": {}}\n</tool_call>',
        '<tool_call>\n{"name": "COMMIT_STATE", "arguments": {}}\n</tool_call>\n\nand some prose',
        'Sure! <tool_call>\n{"name": "COMMIT_STATE", "arguments": {}}\n</tool_call>',
        '<tool_call>\n{"name":"COMMIT_STATE","arguments":{}}\n</tool_call>',  # not render_action's separators
        '<tool_call>\n{"name": "run_check", "arguments": {"spec": {"kind": "top_n", "variable": "t"}}}\n</tool_call>',
        '<tool_call>\n{"name": "run_check", "arguments": {"spec": {"kind": "top_k", "variable": "t", "source": "s", '
        '"order": "largest"}}}\n</tool_call>',  # k is missing
        '<tool_call>\n{"name": "run_check", "arguments": {"spec": {"kind": "share", "variable": "a share"}}}\n'
        "</tool_call>",
        '<tool_call>\n{"name": "run_check", "arguments": {"spec": {"kind": "no_missing", "variable": "t", "columns": '
        "[]}}}\n</tool_call>",
    ],
)
def test_the_grammar_rejects_malformed_calls(qwen3_grammar, qwen3_tokenizer, text):
    assert not qwen3_grammar.accepts(qwen3_tokenizer.encode(text, add_special_tokens=False))


def _call(name: str, arguments: str) -> str:
    return f'<tool_call>\n{{"name": "{name}", "arguments": {arguments}}}\n</tool_call>'


@needs_grammar
@pytest.mark.parametrize(
    ("text", "legal"),
    [
        (_call("FINALIZE_RELATIONS", '{"mode": "confirm", "relations": [{"type": "init"}], "conflict_evidence": ""}'),
         False),
        (_call("FINALIZE_RELATIONS", '{"mode": "revise", "relations": [], "conflict_evidence": ""}'), False),
        (_call("FINALIZE_RELATIONS", '{"mode": "revise", "relations": [{"type": "invalidate", "related_state_id": '
                                     '"S2"}], "conflict_evidence": "S2 kept nulls"}'), True),
        (_call("OPEN_STATE", '{"issue": "x", "constraints": [], "relations": [{"type": "init", "related_state_id": '
                             '"S1"}]}'), False),
        (_call("OPEN_STATE", '{"issue": "x", "constraints": [], "relations": [{"type": "progress"}]}'), False),
        (_call("OPEN_STATE", '{"issue": "x", "constraints": [], "relations": [{"type": "init"}, {"type": "progress", '
                             '"related_state_id": "S1"}]}'), False),
        (_call("OPEN_STATE", '{"issue": "x", "constraints": [], "relations": [{"type": "combine", "related_state_id": '
                             '"S1"}, {"type": "combine", "related_state_id": "S2"}]}'), True),
    ],
)  # fmt: skip
def test_the_grammar_states_the_relation_rules_the_parser_checks(qwen3_grammar, qwen3_tokenizer, text, legal):
    """What the parser refuses for its cross-argument rules, the grammar does not let a model write."""
    assert parse_response(text).ok is legal
    assert qwen3_grammar.accepts(qwen3_tokenizer.encode(text, add_special_tokens=False)) is legal


def _update(conclusion: str, start_step: int = 0) -> str:
    return _call(
        "UPDATE_STATE",
        json.dumps(
            {
                "issue": "the total charge",
                "source_interval": {"start_step": start_step, "end_step": max(start_step, 1)},
                "used_variables": ["shipments"],
                "conclusions": [conclusion],
            },
            ensure_ascii=False,
        ),
    )


@needs_grammar
@pytest.mark.parametrize(
    ("text", "bounded_legal"),
    [
        (_update("Step 1 reported 10 shipments with a total of 2106.39 (charge id 12345678901234567890)"), True),
        (_update("Step 1 reported a total of 2" + "0" * 60), False),  # a greedy loop inside a number
        (_update("the same sentence again. " * 20), False),  # 500 characters of prose
        (_update("ok", start_step=10**7), False),
    ],
)
def test_reply_limits_stop_a_runaway_string_but_not_a_record(qwen3_tokenizer, text, bounded_legal):
    """The default :class:`ReplyLimits` close a looping number or sentence; the parser accepts all four (the limits
    are decoding bounds, not protocol rules), and so does the grammar without limits."""
    from harness.grammar import TokenGrammar, added_tokens

    ids = qwen3_tokenizer.encode(text, add_special_tokens=False)
    stop = [qwen3_tokenizer.convert_tokens_to_ids("<|im_end|>")]
    added = added_tokens(qwen3_tokenizer)
    unbounded = TokenGrammar(qwen3_tokenizer, call_grammar(added, limits=None), n_vocab=len(qwen3_tokenizer),
                             stop_ids=stop)  # fmt: skip
    tight = TokenGrammar(qwen3_tokenizer, call_grammar(added, limits=ReplyLimits(text_chars=40)),
                         n_vocab=len(qwen3_tokenizer), stop_ids=stop)  # fmt: skip
    bounded = TokenGrammar(qwen3_tokenizer, call_grammar(added), n_vocab=len(qwen3_tokenizer), stop_ids=stop)
    assert parse_response(text).ok
    assert unbounded.accepts(ids)
    assert bounded.accepts(ids) is bounded_legal
    assert not tight.accepts(ids)  # every conclusion here is longer than 40 characters


def test_reply_limits_are_stated_in_the_schema_and_checked():
    schema = call_schema({"UPDATE_STATE", "run_probe"}, ReplyLimits(text_chars=50, code_chars=70, items=3))
    update, probe = (alt["properties"]["arguments"] for alt in schema["oneOf"])
    conclusions = update["properties"]["conclusions"]
    assert (conclusions["maxItems"], conclusions["items"]["maxLength"]) == (3, 50)
    assert conclusions["items"]["pattern"] == "^(?:[^0-9]|[0-9]{1,24}[^0-9])*[0-9]{0,24}$"
    assert update["properties"]["used_variables"]["items"]["maxLength"] == 120
    assert update["properties"]["source_interval"]["properties"]["end_step"]["maximum"] == 1_000_000
    assert probe["properties"]["code"]["maxLength"] == 70 and "pattern" not in probe["properties"]["code"]
    assert (
        "maxLength"
        not in call_schema({"UPDATE_STATE"}, None)["oneOf"][0]["properties"]["arguments"]["properties"]["issue"]
    )
    with pytest.raises(ValueError, match="text_chars=0"):
        ReplyLimits(text_chars=0)
    # the default bounds every list at 8 items: an OPEN_STATE that keeps listing relations must close
    opening = call_schema({"OPEN_STATE"})["oneOf"][0]["properties"]["arguments"]["properties"]
    linked = opening["relations"]["anyOf"][1]  # the list of relations to earlier states (the other: one init)
    assert linked["maxItems"] == opening["constraints"]["maxItems"] == ReplyLimits().items == 8
    assert opening["issue"]["maxLength"] == ReplyLimits().issue_chars == 400  # a looping issue closes too


@needs_grammar
def test_a_tag_written_as_text_does_not_match_an_added_token(qwen3_tokenizer):
    """Why call_grammar asks for the added tokens: llguidance never matches Qwen3's one-token ``<tool_call>`` with
    the quoted text."""
    from harness.grammar import TokenGrammar

    stop = qwen3_tokenizer.convert_tokens_to_ids("<|im_end|>")
    text_tags = TokenGrammar(qwen3_tokenizer, call_grammar(), n_vocab=len(qwen3_tokenizer), stop_ids=[stop])
    assert not text_tags.accepts(qwen3_tokenizer.encode(render_action(ACTIONS[4]), add_special_tokens=False))


@needs_grammar
def test_an_invalid_grammar_is_a_value_error(qwen3_tokenizer):
    from harness.grammar import TokenGrammar

    with pytest.raises(ValueError, match="invalid grammar"):
        TokenGrammar(qwen3_tokenizer, "start: undefined_rule\n", n_vocab=len(qwen3_tokenizer), stop_ids=[0])
    with pytest.raises(ValueError, match="at least one stop id"):
        TokenGrammar(qwen3_tokenizer, call_grammar(), n_vocab=len(qwen3_tokenizer), stop_ids=[])


@needs_grammar
def test_a_random_model_writes_a_valid_action_only_under_the_grammar(tmp_path):
    corpus = [json.dumps(tool_schemas()), render_action(ACTIONS[4]), "hello world"]
    model = build_tiny_chat_model(tmp_path / "tiny", corpus)
    messages = [{"role": "system", "content": "manage"}, {"role": "user", "content": "the state is done"}]
    free = HFChatBackend(str(model), max_new_tokens=60).chat(messages)
    assert not parse_response(free.text).ok
    controls = ("COMMIT_STATE", "ABSTAIN", "RESUME_WORKER")
    constrained = HFChatBackend(
        str(model), max_new_tokens=60, grammar=lambda added: call_grammar(added, names=controls)
    )
    first = constrained.chat(messages)
    parsed = parse_response(first.text)
    assert parsed.ok, (first.text, parsed.error)
    assert parsed.action.name in controls and first.text == render_action(parsed.action)
    again = constrained.chat(
        messages + [{"role": "assistant", "content": first.text}, {"role": "user", "content": "?"}]
    )
    assert parse_response(again.text).ok  # a second reply (prefix cache reused, a fresh matcher) is whole too


def test_the_openai_backend_sends_the_grammar_as_structured_outputs():
    with FakeOpenAI([(200, completion("x"))]) as server:
        OpenAIChatBackend(server.url, "m", grammar='start: "a"\n').chat([{"role": "user", "content": "1"}])
        OpenAIChatBackend(server.url, "m").chat([{"role": "user", "content": "2"}])
    with_grammar, without = (post["body"] for post in server.posts())
    assert with_grammar["structured_outputs"] == {"grammar": 'start: "a"\n'}
    assert "structured_outputs" not in without


@pytest.mark.parametrize("one_token", [True, False])
def test_an_endpoint_manager_constrained_to_the_legal_actions_sends_their_grammar(one_token):
    """constrain_actions(legal_only) on a flat llm:URL policy: every request carries vLLM's guided decoding
    (structured_outputs.grammar) for the actions legal for that input; the tags are tokens when the server's
    /tokenize says each is one token (Qwen3), else text (a server without /tokenize answers 404)."""
    from harness.manager.llm_policy import LLMPolicy
    from harness.manager.model_settings import constrain_actions
    from harness.manager.policy_types import PolicyInput
    from harness.manager.wire import TOOL_CALL_CLOSE, TOOL_CALL_OPEN

    tokenize = (200, {"count": 1, "tokens": [7], "max_model_len": 64}) if one_token else (404, {"message": "no"})
    reply = render_action(make_action("COMMIT_STATE"))
    with FakeOpenAI([tokenize, tokenize, (200, completion(reply))]) as server:
        policy = LLMPolicy(OpenAIChatBackend(server.url, "m"))
        constrain_actions(policy, legal_only=True)
        first = policy.respond(PolicyInput(observation="{}", legal_actions=("COMMIT_STATE",)))
        policy.respond(PolicyInput(observation="{}", legal_actions=("REPAIR", "run_probe")))
    tokenized = [p for p in server.posts() if p["path"] == "/tokenize"]
    assert [p["body"]["prompt"] for p in tokenized] == [TOOL_CALL_OPEN, TOOL_CALL_CLOSE]  # asked once each
    assert tokenized[0]["body"]["add_special_tokens"] is False and tokenized[0]["body"]["model"] == "m"
    chats = [p["body"] for p in server.posts() if p["path"] == "/v1/chat/completions"]
    tags = {TOOL_CALL_OPEN, TOOL_CALL_CLOSE} if one_token else set()
    assert [c["structured_outputs"] for c in chats] == [
        {"grammar": call_grammar(tags, names=["COMMIT_STATE"])},
        {"grammar": call_grammar(tags, names=["REPAIR", "run_probe"])},
    ]
    assert ("<tool_call> " in chats[0]["structured_outputs"]["grammar"]) is one_token
    assert parse_response(first).action == make_action("COMMIT_STATE")


@needs_grammar
def test_the_grammar_bench_reports_both_ways(tmp_path, capsys):
    """scripts/bench_grammar.py on a tiny random model: both backends' figures and their per-token cost ratio."""
    import importlib.util

    corpus = [json.dumps(tool_schemas()), render_action(ACTIONS[4]), "hello world"]
    model = build_tiny_chat_model(tmp_path / "tiny", corpus)
    spec = importlib.util.spec_from_file_location(
        "bench_grammar", Path(__file__).resolve().parents[2] / "scripts" / "bench_grammar.py"
    )
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    assert bench.main(["--model", str(model), "--replies", "2", "--tokens", "12"]) == 0
    figures = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert figures["model"] == str(model) and figures["parsed_free"] == 0  # a random model writes no action
    assert 0 <= figures["parsed_constrained"] <= 2 and figures["mask_ms_per_token"] > 0
    assert figures["ratio"] == pytest.approx(
        figures["constrained_ms_per_token"] / figures["free_ms_per_token"], abs=0.01
    )


@needs_grammar
def test_a_policy_constrained_to_the_actions_now_writes_only_those(tmp_path):
    """constrain_actions(legal_only) on a flat llm policy over a random tiny model: each reply names an action legal
    for its input (the name is checked; a random model's argument may run to the cap); each distinct grammar is
    compiled once; a non-flat policy is refused."""
    from harness.manager.llm_policy import LLMPolicy
    from harness.manager.model_settings import ModelSettingError, constrain_actions
    from harness.manager.policy_types import PolicyInput

    corpus = [json.dumps(tool_schemas()), *(render_action(a) for a in ACTIONS)]
    model = build_tiny_chat_model(tmp_path / "tiny", corpus)
    backend = HFChatBackend(str(model), max_new_tokens=48)
    policy = LLMPolicy(backend)
    constrain_actions(policy, legal_only=True)
    cases = [
        (("COMMIT_STATE",), {"COMMIT_STATE"}),
        (("run_probe",), {"run_probe"}),
        (("REPAIR", "FINALIZE_RELATIONS", "run_probe"), {"REPAIR", "FINALIZE_RELATIONS", "run_probe"}),
    ]
    for legal, allowed in cases:
        reply = policy.respond(PolicyInput(observation="{}", legal_actions=legal))
        name = reply.removeprefix('<tool_call>\n{"name": "').split('"')[0]  # a long argument may hit the cap
        assert reply.startswith('<tool_call>\n{"name": "') and name in allowed, (legal, reply)
    compiled = dict(backend._grammars)
    assert len(compiled) == 4  # the full grammar (set first) and one per distinct allowed set
    policy.respond(PolicyInput(observation="{}", legal_actions=("COMMIT_STATE",)))
    assert backend._grammars == compiled  # the same grammar again: not compiled again

    class Tiered:
        name = "hier"
        tier1 = backend

    with pytest.raises(ModelSettingError, match="hier is not one"):
        constrain_actions(Tiered(), legal_only=True)
