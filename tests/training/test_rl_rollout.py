"""Golden token test of the rollouts (training.rl.rollout): the ids trained on are the ids sampled plus what the env
inserted, and every context the model samples from is token for token the conversation the served ``llm`` policy
sends (LLMPolicy.messages rendered with the SFT chat template); in the hier format, tier 1's conversation
(HierPolicy.messages with the tier-1 tools).

The "model" here is a scripted session that answers with the gold manager's own responses (canonical token ids), so
every id is known in advance; the env is the real ManagerEnv over the smoke synthesis pool.
"""

from __future__ import annotations

import shutil

import pytest

from envs.manager import CONVERSATION
from training.rl.rollout import (
    HARNESS_CONFIRM,
    EpisodePlayer,
    EpisodeTokens,
    RolloutLimits,
    StartPoint,
    gold_decision,
    start_points,
)


class ScriptedSession:
    """Answers call ``k`` with ``responses[k]`` (token ids), cut to the call's token limit; records the contexts."""

    def __init__(self, responses: list[list[int]]):
        self.responses = list(responses)
        self.contexts: list[list[int]] = []

    def sample(self, context_ids: list[int], max_new_tokens: int) -> tuple[list[int], list[float]]:
        self.contexts.append(list(context_ids))
        ids = self.responses.pop(0)[:max_new_tokens]
        return ids, [-0.5] * len(ids)


@pytest.fixture(scope="module")
def tokens(qwen3_tokenizer):
    return EpisodeTokens(qwen3_tokenizer)


def _gold_activation(pool, start: StartPoint) -> dict:
    entry = pool.entry(start.episode_id)
    record = pool.record(entry, "gold" if "gold" in entry.episodes else "clean")
    return [a for a in record.activations if a["actor"] == "policy"][start.activation]


def _one_turn(pool) -> list[StartPoint]:
    """Three consecutive activations of one faulted episode's first turn: turn start, update, checks (>= 2 actions)."""
    points = [p for p in start_points(pool) if pool.entry(p.episode_id).kind == "fault"]
    episode = points[0].episode_id
    chosen = [p for p in points if p.episode_id == episode][:3]
    counts = [len(_gold_activation(pool, p)["actions"]) for p in chosen]
    assert len(chosen) == 3 and all(n >= 2 for n in counts[1:]), counts
    return chosen


def _render(tokens, messages, generation_prompt):
    text = tokens.tokenizer.apply_chat_template(
        messages, tools=CONVERSATION.tools, tokenize=False, add_generation_prompt=generation_prompt
    )
    return tokens.encode(text)


def test_three_activations_are_token_exact(pool, tokens, env):
    player = EpisodePlayer(env, tokens, RolloutLimits(max_new_tokens=4096, max_completion_length=100_000))
    for start in _one_turn(pool):
        raws = [a["raw"] for a in _gold_activation(pool, start)["actions"]]
        sampled = [tokens.encode(raw) + [tokens.eos_id] for raw in raws]
        session = ScriptedSession(sampled)
        rollout = player.play(start, lambda session=session: session)

        # the env received exactly the decoded responses, and they were legal
        played = [a for a in player.record.activations if a["actor"] == "policy"][start.activation]
        assert [a["raw"] for a in played["actions"]] == raws and all(a["legal"] for a in played["actions"])
        # every context the model sampled from is the llm policy's conversation, tokenized with the SFT template
        assert len(session.contexts) == len(player.inputs) == len(raws)
        for context, inp in zip(session.contexts, player.inputs, strict=True):
            assert context == _render(tokens, CONVERSATION.messages(inp), generation_prompt=True)
        # prompt + completion is the whole activation's conversation; the mask marks exactly the sampled ids
        final = [*CONVERSATION.messages(player.inputs[-1]), {"role": "assistant", "content": raws[-1]}]
        assert rollout.prompt_ids + rollout.completion_ids == _render(tokens, final, generation_prompt=False)
        model_ids = [t for t, m in zip(rollout.completion_ids, rollout.env_mask, strict=True) if m]
        assert model_ids == [t for ids in sampled for t in ids]
        runs = _runs(rollout.env_mask)
        assert [n for model, n in runs if model] == [len(ids) for ids in sampled]
        assert rollout.env_mask[-1] == 0 and rollout.completion_ids[-1:] == tokens.end(closed=True)
        assert rollout.logprobs == [-0.5 if m else 0.0 for m in rollout.env_mask]
        assert not rollout.truncated and rollout.model_tokens == sum(map(len, sampled))
        assert [a["name"] for a in rollout.actions] == [a["parsed"]["name"] for a in played["actions"]]
        # the trimmed sequence TRL gets ends with the model's last id
        ids, mask, _ = rollout.trimmed()
        assert ids[-1] == tokens.eos_id and mask[-1] == 1 and len(ids) == len(rollout.completion_ids) - 1


def test_a_cut_response_is_closed_by_env_tokens_and_still_renders_the_same(pool, tokens, env):
    start = _one_turn(pool)[2]
    raws = [a["raw"] for a in _gold_activation(pool, start)["actions"]]
    cut = tokens.encode(raws[0])[:6]  # no <|im_end|>: a token limit cut the first response
    session = ScriptedSession([cut] + [tokens.encode(raw) + [tokens.eos_id] for raw in raws])
    player = EpisodePlayer(env, tokens, RolloutLimits(max_new_tokens=4096, max_completion_length=100_000))
    rollout = player.play(start, lambda: session)
    assert rollout.truncated
    played = [a for a in player.record.activations if a["actor"] == "policy"][start.activation]
    assert played["actions"][0]["raw"] == tokens.decode(cut) and not played["actions"][0]["legal"]
    for context, inp in zip(session.contexts, player.inputs, strict=True):
        assert context == _render(tokens, CONVERSATION.messages(inp), generation_prompt=True)
    # the <|im_end|> after the cut ids is the env's (mask 0), right after them
    position = rollout.completion_ids.index(tokens.eos_id)
    assert position == len(cut) and rollout.completion_ids[:position] == cut and rollout.env_mask[position] == 0
    assert rollout.completion_ids[position : position + 2] == tokens.close_ids


def test_the_token_budget_ends_sampling_and_the_harness_confirms_for_an_undecided_model(pool, tokens, env):
    start = _one_turn(pool)[2]
    raws = [a["raw"] for a in _gold_activation(pool, start)["actions"]]
    first = tokens.encode(raws[0]) + [tokens.eos_id]
    session = ScriptedSession([first] + [tokens.encode(raw) + [tokens.eos_id] for raw in raws[1:]])
    player = EpisodePlayer(env, tokens, RolloutLimits(max_new_tokens=4096, max_completion_length=len(first)))
    rollout = player.play(start, lambda: session)
    assert len(session.contexts) == 1 and rollout.model_tokens == len(first)
    played = [a for a in player.record.activations if a["actor"] == "policy"][start.activation]
    assert played["actions"][0]["raw"] == raws[0] and not gold_decision(raws[0])  # a tool call: not a decision
    # undecided with its budget spent: the harness confirms in the model's place (not the model's action) ...
    assert played["actions"][1]["raw"] == HARNESS_CONFIRM and played["actions"][1]["legal"]
    assert rollout.harness_confirmed and len(rollout.actions) == 1
    assert len(played["actions"]) == 2  # ... which ends the activation (a control action)
    ids, mask, _ = rollout.trimmed()
    assert ids == first and mask == [1] * len(first)


class BudgetSession(ScriptedSession):
    """A :class:`ScriptedSession` that also records each call's ``max_new_tokens``."""

    def __init__(self, responses: list[list[int]]):
        super().__init__(responses)
        self.budgets: list[int] = []

    def sample(self, context_ids: list[int], max_new_tokens: int) -> tuple[list[int], list[float]]:
        self.budgets.append(max_new_tokens)
        return super().sample(context_ids, max_new_tokens)


@pytest.mark.parametrize("room", [0, 1])
def test_a_tool_response_that_would_cross_the_context_cap_ends_the_rollout_cleanly(pool, tokens, env, room):
    """The cap counts every id (prompt, responses, tool responses): with ``room`` ids left after the first tool
    response, ``room=0`` never inserts it (stop_reason context_cap, the harness confirms the undecided model) and
    ``room=1`` samples a one-id second response; no request's context plus budget exceeds the cap."""
    start = _one_turn(pool)[2]
    sampled = [tokens.encode(a["raw"]) + [tokens.eos_id] for a in _gold_activation(pool, start)["actions"]]
    uncapped = ScriptedSession(list(sampled))
    limits = RolloutLimits(max_new_tokens=4096, max_completion_length=100_000)
    EpisodePlayer(env, tokens, limits).play(start, lambda: uncapped)
    cap = len(uncapped.contexts[1]) + room  # the prompt, the first response and its <tool_response> turn, + room
    session = BudgetSession(list(sampled))
    capped = RolloutLimits(max_new_tokens=4096, max_completion_length=100_000, max_context_length=cap)
    player = EpisodePlayer(env, tokens, capped)
    rollout = player.play(start, lambda: session)
    assert all(len(c) + b <= cap for c, b in zip(session.contexts, session.budgets, strict=True))
    assert rollout.stop_reason == "context_cap"
    if room == 0:
        assert len(session.contexts) == 1 and rollout.harness_confirmed
        assert rollout.completion_ids == sampled[0] + tokens.end(closed=True)  # the first turn closed, no tool turn
    else:
        assert session.budgets[1] == 1 and session.contexts[1] == uncapped.contexts[1]
        assert rollout.model_tokens == len(sampled[0]) + 1 and rollout.truncated
    ids, mask, _ = rollout.trimmed()
    assert len(rollout.prompt_ids) + len(ids) <= cap and mask[-1] == 1
    played = [a for a in player.record.activations if a["actor"] == "policy"][start.activation]
    assert played["actions"][0]["raw"] == tokens.decode(sampled[0][:-1])  # the env got the model's first call


def test_an_activation_the_runtime_ends_undecided_is_confirmed_by_the_harness_not_the_gold(pool, tokens, env):
    start = _one_turn(pool)[2]
    probe = _gold_activation(pool, start)["actions"][0]["raw"]
    assert not gold_decision(probe)
    limit = env.runtime_config.max_actions
    session = ScriptedSession([tokens.encode(probe) + [tokens.eos_id]] * limit)
    player = EpisodePlayer(
        env, tokens, RolloutLimits(max_new_tokens=4096, max_completion_length=10**6, max_responses=50)
    )
    rollout = player.play(start, lambda: session)
    assert len(rollout.actions) == limit and rollout.harness_confirmed  # the runtime's budget ended it undecided
    policy = [a for a in player.record.activations if a["actor"] == "policy"]
    after = policy[start.activation + 1]  # the next activation at the same pause opens with the harness's confirmation
    assert (
        after["event_type"] == policy[start.activation]["event_type"] and after["actions"][0]["raw"] == HARNESS_CONFIRM
    )
    assert not any((a.get("parsed") or {}).get("name") == "REPAIR" for a in after["actions"])


def test_the_bare_view_samples_from_the_study_bare_conversation_token_for_token(pool, qwen3_tokenizer, env):
    """prompt_view="bare": no system turn, no tools block; every context is harness.manager.prompt_view.view's bare
    conversation (what the study's SFT data and served bare models see), rendered with the SFT template."""
    from harness.manager.prompt_view import view

    tokens = EpisodeTokens(qwen3_tokenizer, prompt_view="bare")
    assert tokens.system_text() == ""
    start = _one_turn(pool)[2]
    raws = [a["raw"] for a in _gold_activation(pool, start)["actions"]]
    sampled = [tokens.encode(raw) + [tokens.eos_id] for raw in raws]
    session = ScriptedSession(sampled)
    player = EpisodePlayer(env, tokens, RolloutLimits(max_new_tokens=4096, max_completion_length=100_000))
    rollout = player.play(start, lambda: session)

    def bare(messages, generation_prompt):
        messages, tools = view(messages, CONVERSATION.tools, "bare")
        assert tools is None and messages[0]["role"] == "user"
        return tokens.encode(
            qwen3_tokenizer.apply_chat_template(
                messages, tools=tools, tokenize=False, add_generation_prompt=generation_prompt
            )
        )

    assert len(session.contexts) == len(raws) >= 2
    for context, inp in zip(session.contexts, player.inputs, strict=True):
        assert context == bare(CONVERSATION.messages(inp), generation_prompt=True)
    final = [*CONVERSATION.messages(player.inputs[-1]), {"role": "assistant", "content": raws[-1]}]
    assert rollout.prompt_ids + rollout.completion_ids == bare(final, generation_prompt=False)
    assert len(rollout.prompt_ids) < len(tokens.encode(EpisodeTokens(qwen3_tokenizer).system_text()))
    with pytest.raises(ValueError, match="prompt_view='short'"):
        EpisodeTokens(qwen3_tokenizer, prompt_view="short")


# ---------------------------------------------------------------- the hierarchical format


@pytest.fixture(scope="module")
def hier_env(pool):
    """The real ManagerEnv over :func:`pool` in the hier format: the model is tier 1."""
    from envs import ManagerEnv

    env = ManagerEnv(pool=pool, worker="replay", isolation="bwrap" if shutil.which("bwrap") else "none", format="hier")
    yield env
    env.close()


def test_hier_start_points_are_the_gold_check_activations_with_a_tier1_part(pool):
    points = start_points(pool, format="hier")
    flat = set(start_points(pool))
    assert points and set(points) <= flat
    for point in points:
        actions = _gold_activation(pool, point)["actions"]
        assert actions[0]["parsed"]["name"] == "check_execution" and len(actions) >= 2
        assert point.gold_control in ("FINALIZE_RELATIONS", "REPAIR")
    assert {p.gold_control for p in points} == {"FINALIZE_RELATIONS", "REPAIR"}
    with pytest.raises(ValueError, match="format='tree' is not understood"):
        start_points(pool, format="tree")


def test_a_hier_rollout_samples_from_the_tier1_conversation_token_for_token(pool, qwen3_tokenizer, hier_env):
    """The model plays tier 1 of a check activation whose gold decision is REPAIR (its probes, then the repair): each
    context is HierPolicy's tier-1 conversation rendered with the SFT template and the tier-1 tools; the env inserted
    the <tool_response> of each call; tier 0 and the gold played everything else, as recorded."""
    from harness.manager.hier import HierPolicy
    from harness.manager.hier_prompts import tier1_tool_schemas

    tokens = EpisodeTokens(qwen3_tokenizer, format="hier")
    start = next(p for p in start_points(pool, format="hier") if p.gold_control == "REPAIR")
    gold = _gold_activation(pool, start)
    raws = [a["raw"] for a in gold["actions"][1:]]  # the first is tier 0's check_execution
    sampled = [tokens.encode(raw) + [tokens.eos_id] for raw in raws]
    session = ScriptedSession(sampled)
    player = EpisodePlayer(hier_env, tokens, RolloutLimits(max_new_tokens=4096, max_completion_length=100_000))
    rollout = player.play(start, lambda: session)

    played = [a for a in player.record.activations if a["actor"] == "policy"]
    assert [a["raw"] for a in played[start.activation]["actions"]] == [a["raw"] for a in gold["actions"]]
    assert [a["actor"] for a in played[start.activation]["actions"]] == ["harness"] + ["policy"] * len(raws)
    entry = pool.entry(start.episode_id)
    assert player.record.final_answers == pool.record(entry, "gold").final_answers  # the gold played the rest

    def render(messages, generation_prompt):
        text = qwen3_tokenizer.apply_chat_template(
            messages, tools=tier1_tool_schemas(), tokenize=False, add_generation_prompt=generation_prompt
        )
        return tokens.encode(text)

    hier = HierPolicy(None)
    conversations = [hier.tier1_messages(inp) for inp in player.inputs]
    assert conversations == player.conversations
    assert [len(m) for m in conversations] == [2 + 2 * k for k in range(len(raws))]
    assert len(session.contexts) == len(raws) >= 2
    for context, messages in zip(session.contexts, conversations, strict=True):
        assert context == render(messages, generation_prompt=True)
    final = [*conversations[-1], {"role": "assistant", "content": raws[-1]}]
    assert rollout.prompt_ids + rollout.completion_ids == render(final, generation_prompt=False)
    model_ids = [t for t, m in zip(rollout.completion_ids, rollout.env_mask, strict=True) if m]
    assert model_ids == [t for ids in sampled for t in ids]
    assert [n for model, n in _runs(rollout.env_mask) if model] == [len(ids) for ids in sampled]
    assert rollout.completion_ids[-1:] == tokens.end(closed=True) and rollout.env_mask[-1] == 0
    assert [a["name"] for a in rollout.actions] == [a["parsed"]["name"] for a in gold["actions"][1:]]
    repair = rollout.actions[-1]
    assert (
        repair["name"] == "REPAIR" and repair["legal"] and repair["error_variable"] in pool.fault_info(entry).variables
    )


def test_rl_arguments_take_the_format_and_check_it():
    from training.rl.trainer import RLArguments

    assert RLArguments().format == "flat" and RLArguments(format="hier").format == "hier"
    with pytest.raises(ValueError, match=r"^format='tree' is not understood; use one of: flat, hier, hier_checks\.$"):
        RLArguments(format="tree")
    with pytest.raises(ValueError, match="format='hier' with max_actions=4: .* use max_actions > 4"):
        RLArguments(format="hier", max_actions=4)


def test_episode_tokens_refuse_a_template_that_is_not_prefix_preserving(qwen3_tokenizer):
    import copy

    broken = copy.deepcopy(qwen3_tokenizer)
    broken.chat_template = (
        "{% for m in messages[-1:] %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}"
        "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
    )
    with pytest.raises(ValueError, match="not prefix-preserving"):
        EpisodeTokens(broken)


def _runs(mask: list[int]) -> list[tuple[bool, int]]:
    import itertools

    return [(bool(k), len(list(g))) for k, g in itertools.groupby(mask)]


# ---------------------------------------------------------------- the decision takeover


_CONFIRM = (
    '<tool_call>\n{"name": "FINALIZE_RELATIONS", "arguments": {"mode": "confirm", "relations": [], '
    '"conflict_evidence": ""}}\n</tool_call>'
)


def _gold_reward(env, pool, episode_id: str) -> tuple[float, dict]:
    """The reward and final answers of the episode played by the gold alone, in ``env``."""
    gold = pool.entry(episode_id).gold_policy()
    _, info = env.reset(options={"episode_id": episode_id})
    while True:
        _, reward, terminated, truncated, info = env.step(gold.respond(info["policy_input"]))
        if terminated or truncated:
            return reward, info["record"].final_answers


def _repair_point(pool, format: str = "flat") -> StartPoint:
    """The first check activation whose gold verifies with at least two calls and then repairs."""
    points = start_points(pool, format=format, gold_controls=("REPAIR",))
    return next(p for p in points if len(_gold_activation(pool, p)["actions"]) >= 3)


def test_the_decision_takeover_plays_the_gold_checks_and_the_model_decides_token_for_token(pool, tokens, env):
    """takeover="decision": the gold's check_execution and probes run in the env; the model's one response, the gold's
    own REPAIR, is sampled from the whole conversation so far (golden ids) and the episode scores as the gold's."""
    start = _repair_point(pool)
    raws = [a["raw"] for a in _gold_activation(pool, start)["actions"]]
    decision = tokens.encode(raws[-1]) + [tokens.eos_id]
    session = ScriptedSession([decision])
    player = EpisodePlayer(
        env, tokens, RolloutLimits(max_new_tokens=4096, max_completion_length=100_000), takeover="decision"
    )
    rollout = player.play(start, lambda: session)

    played = [a for a in player.record.activations if a["actor"] == "policy"][start.activation]
    assert [a["raw"] for a in played["actions"]] == raws and all(a["legal"] for a in played["actions"])
    assert [a["name"] for a in rollout.actions] == ["REPAIR"] and rollout.actions[0]["legal"]
    # the prompt is the llm policy's conversation at the takeover: the activation, the gold's calls and their results
    messages = CONVERSATION.messages(player.inputs[0])
    assert [m["content"] for m in messages if m["role"] == "assistant"] == raws[:-1]
    assert len(player.inputs) == len(session.contexts) == 1 and session.contexts[0] == rollout.prompt_ids
    assert rollout.prompt_ids == _render(tokens, messages, generation_prompt=True)
    final = [*messages, {"role": "assistant", "content": raws[-1]}]
    assert rollout.prompt_ids + rollout.completion_ids == _render(tokens, final, generation_prompt=False)
    assert [t for t, m in zip(rollout.completion_ids, rollout.env_mask, strict=True) if m] == decision
    # the same decision as the gold's: the same episode and reward
    reward, answers = _gold_reward(env, pool, start.episode_id)
    assert player.record.final_answers == answers
    assert rollout.env_reward == pytest.approx(reward)

    # another decision is the model's: it is what the env received, and missing the fault costs reward
    session = ScriptedSession([tokens.encode(_CONFIRM) + [tokens.eos_id]])
    rollout = player.play(start, lambda: session)
    played = [a for a in player.record.activations if a["actor"] == "policy"][start.activation]
    assert [a["raw"] for a in played["actions"]] == [*raws[:-1], _CONFIRM]
    assert [a["name"] for a in rollout.actions] == ["FINALIZE_RELATIONS"] and rollout.env_reward < reward


def test_a_hier_decision_takeover_prompts_with_the_gold_tier1_probes(pool, qwen3_tokenizer, hier_env):
    """hier: tier 0's check, then the gold's tier-1 probes; the model's prompt is tier 1's conversation at the gold's
    decision (the decision prompt, the probes and their results), rendered with the tier-1 tools."""
    from harness.manager.hier import HierPolicy
    from harness.manager.hier_prompts import tier1_tool_schemas

    tokens = EpisodeTokens(qwen3_tokenizer, format="hier")
    start = _repair_point(pool, "hier")
    raws = [a["raw"] for a in _gold_activation(pool, start)["actions"]]
    session = ScriptedSession([tokens.encode(raws[-1]) + [tokens.eos_id]])
    limits = RolloutLimits(max_new_tokens=4096, max_completion_length=100_000)
    player = EpisodePlayer(hier_env, tokens, limits, takeover="decision")
    rollout = player.play(start, lambda: session)

    played = [a for a in player.record.activations if a["actor"] == "policy"][start.activation]
    assert [a["raw"] for a in played["actions"]] == raws
    assert [a["actor"] for a in played["actions"]] == ["harness"] + ["policy"] * (len(raws) - 1)
    assert [a["name"] for a in rollout.actions] == ["REPAIR"] and rollout.actions[0]["legal"]
    (messages,) = player.conversations
    assert messages == HierPolicy(None).tier1_messages(player.inputs[0])
    assert [m["content"] for m in messages if m["role"] == "assistant"] == raws[1:-1]  # the gold's tier-1 probes
    text = qwen3_tokenizer.apply_chat_template(
        messages, tools=tier1_tool_schemas(), tokenize=False, add_generation_prompt=True
    )
    assert session.contexts == [rollout.prompt_ids] and rollout.prompt_ids == tokens.encode(text)
    entry = pool.entry(start.episode_id)
    assert player.record.final_answers == pool.record(entry, "gold").final_answers


def test_the_decision_takeover_refuses_an_activation_the_gold_does_not_decide(pool, tokens):
    """With a budget of two actions the gold's checks use it up: the model never takes over, and the error says so."""
    from envs import ManagerEnv
    from harness.manager.runtime import RuntimeConfig

    start = _repair_point(pool)
    isolation = "bwrap" if shutil.which("bwrap") else "none"
    env = ManagerEnv(pool=pool, worker="replay", isolation=isolation, runtime_config=RuntimeConfig(max_actions=2))
    try:
        player = EpisodePlayer(env, tokens, RolloutLimits(), takeover="decision")
        session = ScriptedSession([])
        with pytest.raises(RuntimeError, match=rf"episode {start.episode_id}, start activation {start.activation}: "
                           "the gold never decided"):  # fmt: skip
            player.play(start, lambda: session)
        assert session.contexts == []
    finally:
        env.close()


def test_gold_decision_start_points_by_gold_control_and_their_arguments(pool):
    from training.rl.rollout import gold_decision
    from training.rl.trainer import RLArguments

    assert gold_decision(_CONFIRM)
    assert not gold_decision('<tool_call>\n{"name": "REPAIR", "arguments": {}}\n</tool_call>')  # does not parse
    assert gold_decision(
        '<think>\nok\n</think>\n\n<tool_call>\n{"name": "COMMIT_STATE", "arguments": {}}\n</tool_call>'
    )
    assert not gold_decision('<tool_call>\n{"name": "run_probe", "arguments": {"code": "1"}}\n</tool_call>')
    assert not gold_decision("REPAIR") and not gold_decision("")

    every = start_points(pool)
    repairs = start_points(pool, gold_controls=("REPAIR",))
    assert repairs == [p for p in every if p.gold_control == "REPAIR"] and len(repairs) >= 2
    both = start_points(pool, ("turn_end",), gold_controls=("REPAIR", "FINALIZE_RELATIONS"))
    assert {p.gold_control for p in both} == {"REPAIR", "FINALIZE_RELATIONS"} and len(both) > len(repairs)
    with pytest.raises(ValueError, match=r"^gold_controls=\['NOPE'\]: unknown control actions \['NOPE'\]; use"):
        start_points(pool, gold_controls=("NOPE",))

    args = RLArguments(takeover="decision", gold_controls=["REPAIR"])
    assert (args.takeover, args.gold_controls) == ("decision", ["REPAIR"]) and RLArguments().takeover == "activation"
    with pytest.raises(ValueError, match=r"^takeover='x' is not understood; use one of: activation, decision\.$"):
        RLArguments(takeover="x")
    with pytest.raises(
        ValueError, match=r"^gold_controls=\['NOPE'\]: unknown control actions \['NOPE'\]; use .*REPAIR"
    ):
        RLArguments(gold_controls=["NOPE"])
