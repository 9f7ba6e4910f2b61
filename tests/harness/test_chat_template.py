"""The chat template: Qwen3 wire format, prefix preservation across messages, the assistant-token mask."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("transformers")

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "run_probe",
            "description": "Run a read-only probe.",
            "parameters": {"type": "object", "properties": {"code": {"type": "string"}}, "required": ["code"]},
        },
    },
    {
        "type": "function",
        "function": {"name": "COMMIT_STATE", "description": "Commit.", "parameters": {"type": "object"}},
    },
]


def _call(name: str, arguments: dict | str) -> dict:
    return {"type": "function", "function": {"name": name, "arguments": arguments}}


GOLDEN_MESSAGES = [
    {"role": "system", "content": "You are the state manager."},
    {"role": "user", "content": "Check step 3."},
    {
        "role": "assistant",
        "reasoning_content": "Probe the mean.",
        "content": "",
        "tool_calls": [_call("run_probe", {"code": "df.Fare.mean()"})],
    },
    {"role": "tool", "content": "34.65"},
    {"role": "assistant", "content": "", "tool_calls": [_call("COMMIT_STATE", {})]},
]
GOLDEN_TEXT = (
    "<|im_start|>system\nYou are the state manager.\n\n# Tools\n\n"
    "You may call one or more functions to assist with the user query.\n\n"
    "You are provided with function signatures within <tools></tools> XML tags:\n<tools>\n"
    + json.dumps(TOOLS[0], ensure_ascii=False)
    + "\n"
    + json.dumps(TOOLS[1], ensure_ascii=False)
    + "\n</tools>\n\n"
    "For each function call, return a json object with function name and arguments within <tool_call></tool_call> "
    'XML tags:\n<tool_call>\n{"name": <function-name>, "arguments": <args-json-object>}\n</tool_call><|im_end|>\n'
    "<|im_start|>user\nCheck step 3.<|im_end|>\n"
    "<|im_start|>assistant\n<think>\nProbe the mean.\n</think>\n\n"
    '<tool_call>\n{"name": "run_probe", "arguments": {"code": "df.Fare.mean()"}}\n</tool_call><|im_end|>\n'
    "<|im_start|>user\n<tool_response>\n34.65\n</tool_response><|im_end|>\n"
    '<|im_start|>assistant\n<tool_call>\n{"name": "COMMIT_STATE", "arguments": {}}\n</tool_call><|im_end|>\n'
)

CONVERSATIONS = {
    "plain multi-turn with earlier think blocks": [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "What is 2+2?"},
        {"role": "assistant", "content": "<think>\nAdd them.\n</think>\n\n4"},
        {"role": "user", "content": "And 3+3?"},
        {"role": "assistant", "reasoning_content": "Add again.", "content": "6"},
        {"role": "user", "content": "Thanks."},
        {"role": "assistant", "content": "You're welcome."},
    ],
    "tool calls, parallel calls and consecutive tool results": [
        {"role": "user", "content": "Load the table and count rows."},
        {
            "role": "assistant",
            "content": "<think>\nTwo probes.\n</think>\n\nRunning both.",
            "tool_calls": [_call("run_probe", {"code": "len(df)"}), _call("run_probe", '{"code": "df.shape"}')],
        },
        {"role": "tool", "content": "891"},
        {"role": "tool", "content": "(891, 12)"},
        {"role": "assistant", "content": "891 rows.", "tool_calls": [_call("COMMIT_STATE", {})]},
        {"role": "tool", "content": "committed"},
        {"role": "user", "content": "Now the mean fare."},
        {"role": "assistant", "reasoning_content": "", "content": "34.65"},
    ],
    "the golden conversation": GOLDEN_MESSAGES,
}


def _render(tokenizer, messages, **kwargs) -> str:
    return tokenizer.apply_chat_template(messages, tools=TOOLS, tokenize=False, **kwargs)


def test_golden_rendering(qwen3_tokenizer) -> None:
    assert _render(qwen3_tokenizer, GOLDEN_MESSAGES) == GOLDEN_TEXT


@pytest.mark.parametrize("name", sorted(CONVERSATIONS))
def test_rendering_is_prefix_preserving(qwen3_tokenizer, name: str) -> None:
    messages = CONVERSATIONS[name]
    renders = [_render(qwen3_tokenizer, messages[:k]) for k in range(1, len(messages) + 1)]
    for k in range(1, len(renders)):
        assert renders[k].startswith(renders[k - 1]), f"{name}: messages[:{k}] is not a prefix of messages[:{k + 1}]"
        assert len(renders[k]) > len(renders[k - 1])


@pytest.mark.parametrize("name", sorted(CONVERSATIONS))
def test_generation_prompt_is_a_prefix_of_the_answered_conversation(qwen3_tokenizer, name: str) -> None:
    messages = CONVERSATIONS[name]
    for k, message in enumerate(messages):
        if message["role"] != "assistant":
            continue
        prompt = _render(qwen3_tokenizer, messages[:k], add_generation_prompt=True)
        assert prompt.endswith("<|im_start|>assistant\n")
        assert _render(qwen3_tokenizer, messages[: k + 1]).startswith(prompt)


def test_earlier_reasoning_is_kept(qwen3_tokenizer) -> None:
    text = _render(qwen3_tokenizer, CONVERSATIONS["plain multi-turn with earlier think blocks"])
    # Stock Qwen3 would drop both blocks: they precede the last user query.
    assert "<|im_start|>assistant\n<think>\nAdd them.\n</think>\n\n4<|im_end|>\n" in text
    assert "<|im_start|>assistant\n<think>\nAdd again.\n</think>\n\n6<|im_end|>\n" in text
    assert "<|im_start|>assistant\nYou're welcome.<|im_end|>\n" in text  # no reasoning: no empty think block


def test_consecutive_tool_results_share_one_user_turn(qwen3_tokenizer) -> None:
    text = _render(qwen3_tokenizer, CONVERSATIONS["tool calls, parallel calls and consecutive tool results"])
    assert (
        "<|im_start|>user\n<tool_response>\n891\n</tool_response>\n<tool_response>\n(891, 12)\n</tool_response>"
        "<|im_end|>\n<|im_start|>assistant\n891 rows.\n<tool_call>" in text
    )
    assert '\n<tool_call>\n{"name": "run_probe", "arguments": {"code": "df.shape"}}\n</tool_call>' in text
    assert "<|im_start|>assistant\n<think>\n\n</think>\n\n34.65<|im_end|>\n" in text  # empty reasoning_content


def test_string_and_dict_arguments_render_alike(qwen3_tokenizer) -> None:
    as_dict = [{"role": "assistant", "content": "", "tool_calls": [_call("run_probe", {"code": "1"})]}]
    as_string = [{"role": "assistant", "content": "", "tool_calls": [_call("run_probe", '{"code": "1"}')]}]
    assert _render(qwen3_tokenizer, as_dict) == _render(qwen3_tokenizer, as_string)


def test_content_parts_render_like_a_string(qwen3_tokenizer) -> None:
    parts = [{"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]}]
    assert _render(qwen3_tokenizer, parts) == _render(qwen3_tokenizer, [{"role": "user", "content": "ab"}])


def test_trailing_tool_results_are_closed_by_the_generation_prompt(qwen3_tokenizer) -> None:
    messages = GOLDEN_MESSAGES[:4]
    open_turn = _render(qwen3_tokenizer, messages)
    prompt = _render(qwen3_tokenizer, messages, add_generation_prompt=True)
    assert open_turn.endswith("<tool_response>\n34.65\n</tool_response>")
    assert prompt == open_turn + "<|im_end|>\n<|im_start|>assistant\n"
    no_think = _render(qwen3_tokenizer, messages, add_generation_prompt=True, enable_thinking=False)
    assert no_think == prompt + "<think>\n\n</think>\n\n"


def test_without_tools_there_is_no_tools_block(qwen3_tokenizer) -> None:
    messages = [{"role": "system", "content": "S"}, {"role": "user", "content": "U"}]
    text = qwen3_tokenizer.apply_chat_template(messages, tokenize=False)
    assert text == "<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nU<|im_end|>\n"


def _masked_runs(tokenizer, ids: list[int], mask: list[int]) -> list[str]:
    runs, current = [], []
    for token, flag in zip(ids, mask, strict=True):
        if flag:
            current.append(token)
        elif current:
            runs.append(tokenizer.decode(current))
            current = []
    if current:
        runs.append(tokenizer.decode(current))
    return runs


def test_assistant_mask_covers_exactly_the_assistant_tokens(qwen3_tokenizer) -> None:
    encoded = qwen3_tokenizer.apply_chat_template(
        GOLDEN_MESSAGES, tools=TOOLS, return_dict=True, return_assistant_tokens_mask=True
    )
    ids, mask = encoded["input_ids"], encoded["assistant_masks"]
    assert qwen3_tokenizer.decode(ids) == GOLDEN_TEXT
    runs = _masked_runs(qwen3_tokenizer, ids, mask)
    assert runs == [
        '<think>\nProbe the mean.\n</think>\n\n<tool_call>\n{"name": "run_probe", "arguments": {"code": '
        '"df.Fare.mean()"}}\n</tool_call><|im_end|>',
        '<tool_call>\n{"name": "COMMIT_STATE", "arguments": {}}\n</tool_call><|im_end|>',
    ]
    # The masked tokens are exactly the tokens of the two bodies (no partial token at either edge).
    assert mask.count(1) == sum(len(qwen3_tokenizer.encode(run)) for run in runs)
    unmasked = qwen3_tokenizer.decode([t for t, m in zip(ids, mask, strict=True) if not m])
    for outside in ("You are the state manager.", "Check step 3.", "34.65", "<|im_start|>assistant\n"):
        assert outside in unmasked


@pytest.mark.parametrize("name", sorted(CONVERSATIONS))
def test_every_assistant_turn_ends_its_masked_run_with_im_end(qwen3_tokenizer, name: str) -> None:
    messages = CONVERSATIONS[name]
    encoded = qwen3_tokenizer.apply_chat_template(
        messages, tools=TOOLS, return_dict=True, return_assistant_tokens_mask=True
    )
    runs = _masked_runs(qwen3_tokenizer, encoded["input_ids"], encoded["assistant_masks"])
    assert len(runs) == sum(m["role"] == "assistant" for m in messages)
    assert all(run.endswith("<|im_end|>") and "<|im_start|>" not in run for run in runs)
