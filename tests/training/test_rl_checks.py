"""DAPO in format hier_checks: the start points (faulted and clean turns of the training split), a rollout in which
the model writes the checks (token layout as served, the check-writing reward), and scripts/rl.py end to end with
the tiny Qwen3: the reward terms logged, the init checkpoint's manager.json deciding the decoding and copied out."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")

from envs import ManagerEnv  # noqa: E402
from harness.manager.checkpoint_settings import ManagerSettings, read_manager_settings, write_manager_settings  # noqa: E402
from harness.manager.hier_checks import render_checks_reply  # noqa: E402
from synthesis.checks import folder_checks  # noqa: E402
from training.rl.checks_rollout import CLEAN, FAULTED, ChecksPlayer, checks_start_points, validation_tasks  # noqa: E402
from training.rl.rollout import EpisodeTokens, RolloutLimits, drive  # noqa: E402
from training.rl.rollout_groups import GROUPS_FILE, read_records  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
ISOLATION = "bwrap" if shutil.which("bwrap") else "none"


class ReplySession:
    """Answers the one request with ``ids`` (cut to the limit); records the context."""

    def __init__(self, ids: list[int]):
        self.ids, self.contexts = ids, []

    def sample(self, context_ids, max_new_tokens):
        self.contexts.append(list(context_ids))
        return self.ids[:max_new_tokens], [-0.5] * len(self.ids[:max_new_tokens])


def test_start_points_are_the_training_splits_faulted_and_clean_turns(pool):
    points = checks_start_points(pool)
    held_out = validation_tasks(pool.root)
    assert held_out and not any(pool.entry(p.episode_id).task_id in held_out for p in points)
    clean = [p for p in points if p.gold_control == CLEAN]
    faulted = [p for p in points if p.gold_control == FAULTED]
    train_clean = [e for e in pool.entries.values() if e.kind == "clean" and e.task_id not in held_out]
    assert len(clean) == sum(len(pool.task(e).turns) for e in train_clean) and faulted
    for point in faulted:
        entry = pool.entry(point.episode_id)
        turn = [t.turn_id for t in pool.task(entry).turns][point.activation]
        assert entry.kind == "fault" and turn == entry.fault_info["turn_id"] and not entry.fault_info["benign"]


def test_the_temperature_probe_counts_a_checks_object_as_legal():
    assert ChecksPlayer.legal_reply('{"checks": [{"kind": "no_such_kind"}]}') == "checks"  # a dropped spec: parsed
    assert ChecksPlayer.legal_reply('<tool_call>{"name": "REPAIR"}</tool_call>') is None


def test_hier_checks_refuses_the_fields_it_would_ignore():
    from training.rl.trainer import RLArguments

    assert RLArguments(format="hier_checks").format == "hier_checks"
    with pytest.raises(ValueError, match="format='hier_checks' with takeover='decision'.* leave takeover at"):
        RLArguments(format="hier_checks", takeover="decision")
    with pytest.raises(ValueError, match="gold_controls"):
        RLArguments(format="hier_checks", gold_controls=["REPAIR"])


def test_a_rollout_writes_the_checks_of_its_turn_as_served_and_earns_the_catch(pool, qwen3_tokenizer):
    env = ManagerEnv(pool=pool, worker="replay", isolation=ISOLATION, format="hier_checks")
    tokens = EpisodeTokens(qwen3_tokenizer, prompt_view="bare", format="hier_checks")
    player = ChecksPlayer(env, tokens, RolloutLimits(max_new_tokens=400, max_completion_length=400))
    try:
        caught = 0
        for start in [p for p in checks_start_points(pool) if p.gold_control == FAULTED]:
            entry = pool.entry(start.episode_id)
            turn = [t.turn_id for t in pool.task(entry).turns][start.activation]
            reply = render_checks_reply([c.spec for c in folder_checks(pool.task(entry))[turn] if c.spec is not None])
            session = ReplySession(tokens.encode(reply) + [tokens.eos_id])
            rollout = drive(player.steps(start), lambda s=session: s)
            # the prompt is the served tier 1's checks conversation in the bare view: the user turn alone, no tools
            (messages,) = player.conversations
            served = qwen3_tokenizer.apply_chat_template(messages[1:], tokenize=False, add_generation_prompt=True)
            assert rollout.prompt_ids == tokens.encode(served) == session.contexts[0]
            assert player.inputs[0].turn.turn_id == turn and "<tools>" not in served
            assert rollout.model_tokens == len(session.ids) and rollout.actions[0]["legal"] is True
            terms = rollout.reward_terms
            assert set(terms) == {"protocol", "catch", "false_alarm"} and terms["false_alarm"] == 0.0
            if terms["catch"] == 1.0:
                caught += 1
                assert rollout.actions[0]["name"] == "REPAIR"
                assert rollout.env_reward == pytest.approx(0.2 * terms["protocol"] + 1.0)
        assert caught >= 1
    finally:
        env.close()


def test_scripts_rl_hier_checks_runs_end_to_end(sft_smoke_dir, tiny_model_dir, tmp_path):
    """One step from the tiny Qwen3 with a manager.json (bare view, an 8-token cap against the config's 16): the
    check-writing terms are logged, the rollouts obey the cap, and the output gets the same manager.json."""
    model = tmp_path / "init"
    shutil.copytree(tiny_model_dir, model)
    settings = ManagerSettings(policy="hier", writes="checks", prompt_view="bare", constrained_decoding=False,
                               max_new_tokens=8)  # fmt: skip
    write_manager_settings(model, settings)
    out = tmp_path / "out"
    command = [sys.executable, "-m", "accelerate.commands.launch", "--config_file",
               str(REPO / "configs" / "accelerate" / "cpu.yaml"), str(REPO / "scripts" / "rl.py"),
               "--config", str(REPO / "configs" / "rl" / "tiny-cpu-checks.yaml"), "--model_name_or_path", str(model),
               "--pool", str(sft_smoke_dir), "--output_dir", str(out), "--isolation", ISOLATION,
               "--disable_tqdm", "true"]  # fmt: skip
    env = {**os.environ, "OMP_NUM_THREADS": "1", "TRL_EXPERIMENTAL_SILENCE": "1"}
    done = subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-5000:]
    (entry,) = [e for e in json.loads((out / "trainer_state.json").read_text())["log_history"] if "reward" in e]
    for key in ("rewards/protocol/mean", "rewards/catch/mean", "rewards/false_alarm/mean", "rewards/overlong/mean",
                "manager/illegal_action_rate", "dapo/rollout_s"):  # fmt: skip
        assert key in entry, key
    assert entry["completions/max_length"] <= 8  # manager.json's cap, not the config's 16
    assert entry["rewards/protocol/mean"] == 0 and entry["manager/illegal_action_rate"] == 1  # random: unparseable
    assert read_manager_settings(out) == settings
    records = read_records(out / GROUPS_FILE)
    assert sorted(r["gold_control"] for r in records) == [CLEAN, FAULTED]  # stratified: one of each
    rewards = [x["reward"] for r in records for x in r["rollouts"]]
    assert len(rewards) == 4 and sum(rewards) / 4 == pytest.approx(entry["reward"], abs=1e-4)
