"""ManagerEnvBatch: N envs stepped together, and the token ids a trainer concatenates."""

from __future__ import annotations

import pytest

from envs import StepAfterDoneError
from envs.batch import ManagerEnvBatch
from envs.manager import CONVERSATION
from tests.envs.conftest import ISOLATION


@pytest.fixture(scope="module")
def tokenizer():
    from harness.tokenizer import build_qwen3_tokenizer

    return build_qwen3_tokenizer()


def test_token_ids_concatenate_to_the_rendered_conversations(pool, tokenizer):
    ids = pool.ids
    batch = ManagerEnvBatch(ids, pool, tokenizer, isolation=ISOLATION)
    policies = [pool.entry(i).gold_policy() for i in ids]
    first = batch.reset()
    inputs = [info["policy_input"] for _, info in first]
    # per env: conversations as [prompt ids, concatenated model+env ids, last input, last response]
    conversations = [[[info["prompt_ids"], [], None, None]] for _, info in first]
    finals = [None] * len(batch)
    while not all(batch.done):
        actions = [None if batch.done[i] else policies[i].respond(inputs[i]) for i in range(len(batch))]
        for i, (_, reward, terminated, _, info) in enumerate(batch.step(actions)):
            if actions[i] is None:
                assert info == {"done": True, "episode_id": ids[i]} and reward == 0.0 and terminated
                continue
            current = conversations[i][-1]
            current[1] += info["model_ids"] + info["env_ids"]
            current[2], current[3] = inputs[i], actions[i]
            if info["prompt_ids"] is not None:
                conversations[i].append([info["prompt_ids"], [], None, None])
            inputs[i] = info.get("policy_input")
            if terminated:
                finals[i] = info["record"]
    for record, episode_id in zip(finals, ids, strict=True):
        entry = pool.entry(episode_id)
        assert record.grade == pool.record(entry, "gold" if entry.kind == "fault" else "clean").grade
    n = 0
    for per_env in conversations:
        for prompt, rest, inp, response in per_env:
            messages = CONVERSATION.messages(inp) + [{"role": "assistant", "content": response}]
            text = tokenizer.apply_chat_template(messages, tools=CONVERSATION.tools, tokenize=False)
            assert prompt + rest == tokenizer(text, add_special_tokens=False)["input_ids"]
            n += 1
    assert n > 2 * len(ids)  # several activations per episode
    im_end = tokenizer.convert_tokens_to_ids("<|im_end|>")
    assert rest[-2] == im_end and tokenizer.decode(rest[-1:]) == "\n"
    with pytest.raises(StepAfterDoneError, match="pass None"):
        batch.step(["x"] * len(batch))
    batch.close()


def test_env_ids_of_a_tool_call_are_the_tool_response_turn_and_the_next_header(pool, tokenizer):
    batch = ManagerEnvBatch(pool.ids[:1], pool, tokenizer, isolation=ISOLATION)
    batch.reset()
    ((obs, _, _, _, info),) = batch.step(["not a tool call"])
    text = tokenizer.decode(info["env_ids"])
    assert text == f"<|im_end|>\n<|im_start|>user\n{obs}<|im_end|>\n<|im_start|>assistant\n"
    assert tokenizer.decode(info["model_ids"]) == "not a tool call" and info["prompt_ids"] is None
    with pytest.raises(ValueError, match="2 actions for 1 envs"):
        batch.step(["a", "b"])
    with pytest.raises(TypeError, match="needs an action"):
        batch.step([None])
    batch.close()
