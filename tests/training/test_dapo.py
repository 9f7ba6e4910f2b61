"""DAPO: the reference token-level clipped loss (``dapo_reference``) on hand-computed values and TRL's ``dapo`` loss
pinned to it, clip fractions, overlong shaping and uniform groups (``training.rl.dapo``), DapoTrainer's savings."""

from __future__ import annotations

import math

import pytest

torch = pytest.importorskip("torch")

from dapo_reference import clip_fractions, policy_loss  # noqa: E402

from training.rl.dapo import overlong_penalty, uniform_groups  # noqa: E402

# Two rollouts, three tokens each. Ratios r = exp(logprobs - old_logprobs); eps_low 0.2, eps_high 0.28.
RATIOS = [[1.5, 0.9, 1.0], [0.5, 1.2, 2.0]]
ADVANTAGES = [1.0, -2.0]
MASK = [[1, 1, 0], [1, 1, 1]]
# Per token -min(r*A, clip(r)*A):
#   row 0 (A=+1): r=1.5 -> clip 1.28 -> -1.28;  r=0.9 -> -0.9;  third token masked
#   row 1 (A=-2): r=0.5 -> min(-1.0, 0.8*-2=-1.6) -> 1.6;  r=1.2 -> 2.4;  r=2.0 -> min(-4.0, -2.56) -> 4.0
# Token mean over the 5 unmasked tokens: (-1.28 - 0.9 + 1.6 + 2.4 + 4.0) / 5 = 5.82 / 5
EXPECTED_TOKEN_MEAN = 5.82 / 5
EXPECTED_SEQUENCE_MEAN = ((-1.28 - 0.9) / 2 + (1.6 + 2.4 + 4.0) / 3) / 2  # GRPO's per-sequence mean, for contrast


def _tensors():
    old = torch.tensor([[-1.0, -2.0, -0.5], [-0.3, -1.1, -2.2]])
    logprobs = old + torch.tensor(RATIOS).log()
    return logprobs, old, torch.tensor(ADVANTAGES), torch.tensor(MASK)


def test_policy_loss_matches_hand_computed_token_mean():
    logprobs, old, advantages, mask = _tensors()
    loss = policy_loss(logprobs, old, advantages, mask, eps_low=0.2, eps_high=0.28)
    assert loss.item() == pytest.approx(EXPECTED_TOKEN_MEAN, abs=1e-6)
    assert abs(EXPECTED_TOKEN_MEAN - EXPECTED_SEQUENCE_MEAN) > 0.3  # the aggregation really is per token


def test_policy_loss_takes_per_token_advantages_and_an_empty_mask():
    logprobs, old, advantages, mask = _tensors()
    per_token = advantages[:, None].expand(-1, 3)
    assert policy_loss(logprobs, old, per_token, mask).item() == pytest.approx(EXPECTED_TOKEN_MEAN, abs=1e-6)
    assert policy_loss(logprobs, old, advantages, torch.zeros_like(mask)).item() == 0.0


def test_policy_loss_gradient_is_zero_where_the_clip_is_active():
    logprobs, old, advantages, mask = _tensors()
    logprobs = logprobs.clone().requires_grad_(True)
    policy_loss(logprobs, old, advantages, mask).backward()
    grad = logprobs.grad
    assert grad[0, 0] == 0 and grad[1, 0] == 0  # clipped high (A>0) and clipped low (A<0)
    assert grad[0, 2] == 0  # masked
    # unclipped: d/dlogp of -r*A/5 = -r*A/5
    assert grad[0, 1].item() == pytest.approx(-0.9 * 1.0 / 5, abs=1e-6)
    assert grad[1, 2].item() == pytest.approx(-2.0 * -2.0 / 5, abs=1e-6)


def test_clip_fractions_count_low_and_high_clips():
    logprobs, old, advantages, mask = _tensors()
    low, high = clip_fractions((logprobs - old).exp(), advantages, mask)
    assert (low, high) == (pytest.approx(1 / 5), pytest.approx(1 / 5))


@pytest.mark.parametrize(
    ("length", "expected"),
    [(0, 0.0), (48, 0.0), (52, -0.25), (56, -0.5), (64, -1.0), (65, -1.0), (1000, -1.0)],
)
def test_overlong_penalty_is_linear_over_the_buffer(length, expected):
    assert overlong_penalty(length, max_length=64, buffer=16, factor=1.0) == pytest.approx(expected)


def test_overlong_penalty_factor_hard_form_and_bad_buffer():
    assert overlong_penalty(60, 64, 16, factor=0.5) == pytest.approx(-0.375)
    assert overlong_penalty(64, 64, 0, factor=2.0) == 0.0 and overlong_penalty(65, 64, 0, factor=2.0) == -2.0
    with pytest.raises(ValueError, match="overlong buffer=80 must lie in"):
        overlong_penalty(10, 64, 80)


def test_uniform_groups_flags_groups_with_no_reward_spread():
    rewards = [1.0, 1.0, 1.0, 0.0, 1.0, 0.5, 0.3, 0.3 + 1e-9]
    assert uniform_groups(rewards, 2) == [True, False, False, True]
    assert uniform_groups(rewards, 4) == [False, False]
    with pytest.raises(ValueError, match="do not split into groups of 3"):
        uniform_groups(rewards, 3)


def test_policy_loss_equals_trls_dapo_loss(tiny_model_dir, qwen3_tokenizer):
    """TRL's ``GRPOTrainer._compute_loss`` with ``loss_type='dapo'`` on a real forward pass equals policy_loss on the
    same per-token log-probabilities, env mask (``tool_mask``) included."""
    from datasets import Dataset
    from trl import GRPOConfig, GRPOTrainer

    config = GRPOConfig(
        output_dir="/tmp/unused-dapo-pin", use_cpu=True, bf16=False, loss_type="dapo", epsilon=0.2, epsilon_high=0.28,
        beta=0.0, num_generations=2, per_device_train_batch_size=2, report_to="none",
    )  # fmt: skip
    trainer = GRPOTrainer(
        model=str(tiny_model_dir),
        reward_funcs=lambda completions, **_: [0.0] * len(completions),
        args=config,
        train_dataset=Dataset.from_dict({"prompt": ["a", "b"]}),
        processing_class=qwen3_tokenizer,
    )
    trainer.model.eval()  # eval: TRL normalises by the batch's unmasked tokens, no accumulation window
    gen = torch.Generator().manual_seed(0)
    prompt_ids = torch.randint(0, 1000, (2, 5), generator=gen)
    completion_ids = torch.randint(0, 1000, (2, 4), generator=gen)
    completion_mask = torch.tensor([[1, 1, 1, 0], [1, 1, 1, 1]])
    env_mask = torch.tensor([[1, 0, 1, 1], [1, 1, 0, 1]])
    with torch.no_grad():
        logprobs, _, _ = trainer._get_per_token_logps_and_entropies(
            trainer.model, torch.cat([prompt_ids, completion_ids], 1), torch.ones(2, 9, dtype=torch.long), 4
        )
    old = logprobs - torch.tensor([[0.4, -0.1, 0.05, 0.0], [-0.7, 0.3, 0.1, -0.05]])  # ratios on both sides of clip
    advantages = torch.tensor([1.5, -0.5])
    mask = completion_mask * env_mask
    inputs = {
        "prompt_ids": prompt_ids,
        "prompt_mask": torch.ones_like(prompt_ids),
        "completion_ids": completion_ids,
        "completion_mask": completion_mask,
        "tool_mask": env_mask,
        "advantages": advantages,
        "old_per_token_logps": old,
        "num_items_in_batch": mask.sum(),
    }
    with torch.no_grad():
        trl_loss = trainer._compute_loss(trainer.model, inputs)
    ours = policy_loss(logprobs, old, advantages, mask, eps_low=0.2, eps_high=0.28)
    assert trl_loss.item() == pytest.approx(ours.item(), abs=1e-5)
    assert not math.isclose(ours.item(), 0.0, abs_tol=1e-3)


def test_dapo_trainer_skips_zero_advantage_rows_with_the_same_loss_and_gradient(tiny_model_dir, qwen3_tokenizer):
    """DapoTrainer leaves the rows of uniform groups (advantage 0) out of the forward; the loss and every gradient
    equal TRL's on the whole batch, and a batch with no live row gives a zero loss and zero gradients."""
    from datasets import Dataset
    from trl import GRPOConfig, GRPOTrainer

    from training.rl.dapo_trainer import dapo_trainer_class

    def build(cls, **extra):
        config = GRPOConfig(output_dir="/tmp/unused-dapo-skip", use_cpu=True, bf16=False, loss_type="dapo",
                            epsilon_high=0.28, beta=0.0, num_generations=3, per_device_train_batch_size=3,
                            report_to="none")  # fmt: skip
        data = Dataset.from_dict({"prompt": ["a"]})
        trainer = cls(model=str(tiny_model_dir), reward_funcs=lambda completions, **_: [0.0] * len(completions),
                      args=config, train_dataset=data, processing_class=qwen3_tokenizer, **extra)  # fmt: skip
        trainer.model.eval()
        return trainer

    gen = torch.Generator().manual_seed(2)
    prompt_ids, completion_ids = (
        torch.randint(0, 1000, (3, 6), generator=gen),
        torch.randint(0, 1000, (3, 5), generator=gen),
    )
    completion_mask = torch.tensor([[1, 1, 1, 1, 0], [1, 1, 1, 1, 1], [1, 1, 0, 0, 0]])
    prompt_mask = torch.tensor([[1] * 6, [0, 0, 1, 1, 1, 1], [1] * 6])

    def inputs(advantages):
        return {"prompt_ids": prompt_ids, "prompt_mask": prompt_mask, "completion_ids": completion_ids,
                "completion_mask": completion_mask, "advantages": torch.tensor(advantages),
                "old_per_token_logps": None, "num_items_in_batch": completion_mask.sum()}  # fmt: skip

    def loss_and_grads(trainer, advantages):
        trainer.model.zero_grad()
        loss = trainer._compute_loss(trainer.model, inputs(advantages))
        loss.backward()
        return loss.detach(), [p.grad.clone() if p.grad is not None else torch.zeros_like(p)
                               for p in trainer.model.parameters()]  # fmt: skip

    ours, theirs = build(dapo_trainer_class(), rollouts=lambda prompts, trainer: {}), build(GRPOTrainer)
    theirs.model.load_state_dict(ours.model.state_dict())
    loss, grads = loss_and_grads(ours, [0.0, 1.2, -0.7])
    ref_loss, ref_grads = loss_and_grads(theirs, [0.0, 1.2, -0.7])
    assert loss.item() == pytest.approx(ref_loss.item(), abs=1e-6) and loss.item() != 0
    for g, r in zip(grads, ref_grads, strict=True):
        torch.testing.assert_close(g, r, atol=1e-5, rtol=1e-4)  # another summation order: float noise only
    loss, grads = loss_and_grads(ours, [0.0, 0.0, 0.0])
    assert loss.item() == 0 and all(not g.any() for g in grads)


def test_dapo_trainer_forwards_as_many_rows_as_the_rank_with_most_live_rows(tiny_model_dir, qwen3_tokenizer):
    """Every rank forwards the largest live-row count of any rank (at least one row; the count comes from
    ``accelerator.reduce``, here a stand-in for the other rank): padding rows of zero advantage under a zero loss mask
    leave the loss and the gradients TRL's and the metrics those of the live rows; a rank with no live row gives a
    zero loss and zero gradients, and a micro-batch with no live row on any rank forwards one row and logs nothing."""
    from datasets import Dataset
    from trl import GRPOConfig, GRPOTrainer

    from training.rl.dapo_trainer import dapo_trainer_class

    def build(cls, **extra):
        config = GRPOConfig(output_dir="/tmp/unused-dapo-pad", use_cpu=True, bf16=False, loss_type="dapo",
                            epsilon_high=0.28, beta=0.0, num_generations=4, per_device_train_batch_size=4,
                            report_to="none")  # fmt: skip
        trainer = cls(model=str(tiny_model_dir), reward_funcs=lambda completions, **_: [0.0] * len(completions),
                      args=config, train_dataset=Dataset.from_dict({"prompt": ["a"]}),
                      processing_class=qwen3_tokenizer, **extra)  # fmt: skip
        trainer.model.eval()
        return trainer

    gen = torch.Generator().manual_seed(3)
    prompt_ids, completion_ids = (
        torch.randint(0, 1000, (4, 5), generator=gen),
        torch.randint(0, 1000, (4, 4), generator=gen),
    )
    completion_mask = torch.tensor([[1, 1, 1, 0], [1, 1, 1, 1], [1, 1, 0, 0], [1, 1, 1, 1]])
    env_mask = torch.tensor([[1, 0, 1, 1], [1, 1, 1, 1], [1, 1, 1, 1], [0, 1, 1, 1]])

    def batch(rows, advantages):
        rows = list(rows)
        return {"prompt_ids": prompt_ids[rows], "prompt_mask": torch.ones_like(prompt_ids[rows]),
                "completion_ids": completion_ids[rows], "completion_mask": completion_mask[rows],
                "tool_mask": env_mask[rows], "advantages": torch.tensor(advantages), "old_per_token_logps": old[rows],
                "num_items_in_batch": (completion_mask * env_mask).sum()}  # fmt: skip

    forwarded = []  # the rows of each scoring forward of ``ours``

    def run(trainer, advantages, other_rank_live=None):
        forwarded.clear()
        if other_rank_live is not None:  # the other rank's live rows in the max-reduce; TRL's metric sums stay local
            trainer.accelerator.reduce = lambda tensor, reduction="sum": (
                torch.maximum(tensor, torch.tensor([other_rank_live])) if reduction == "max" else tensor
            )
        trainer._metrics["eval"].clear()
        trainer.model.zero_grad()
        loss = trainer._compute_loss(trainer.model, batch(range(4), advantages))
        loss.backward()
        grads = [p.grad.clone() if p.grad is not None else torch.zeros_like(p) for p in trainer.model.parameters()]
        return loss.detach(), grads, list(forwarded), {k: list(v) for k, v in trainer._metrics["eval"].items()}

    ours, theirs = build(dapo_trainer_class(), rollouts=lambda prompts, trainer: {}), build(GRPOTrainer)
    score = ours._get_per_token_logps_and_entropies
    ours._get_per_token_logps_and_entropies = lambda model, ids, *a, **k: (
        forwarded.append(len(ids)) or score(model, ids, *a, **k)
    )
    theirs.model.load_state_dict(ours.model.state_dict())
    with torch.no_grad():  # old log-probabilities: row 3 (advantage < 0) clipped low on its 3 loss tokens
        old = theirs._get_per_token_logps_and_entropies(
            theirs.model, torch.cat([prompt_ids, completion_ids], 1), torch.ones(4, 9, dtype=torch.long), 4
        )[0]
    old[3] += 1.0
    advantages = [0.0, 1.2, 0.0, -0.7]
    ref_loss, ref_grads, _, ref_metrics = run(theirs, advantages)
    assert ref_metrics["clip_ratio/low_mean"] == [pytest.approx(3 / 11)]  # TRL: over the 11 loss tokens of 4 rows
    for other in (0, 3):  # the other rank has fewer live rows than this one, then more
        loss, grads, forwarded, metrics = run(ours, advantages, other)
        assert forwarded == [max(2, other)]
        assert loss.item() == pytest.approx(ref_loss.item(), abs=1e-6) and loss.item() != 0
        for g, r in zip(grads, ref_grads, strict=True):
            torch.testing.assert_close(g, r, atol=1e-5, rtol=1e-4)
        assert metrics["clip_ratio/low_mean"] == [pytest.approx(3 / 7)]  # over the 7 of the live rows 1 and 3
        assert len(metrics["entropy"]) == 1

    loss, grads, forwarded, metrics = run(ours, [0.0] * 4, 2)  # this rank has no live row, the other two
    assert forwarded == [2] and loss.item() == 0 and all(not g.any() for g in grads)
    assert metrics["entropy"] == [0.0] and math.isnan(metrics["clip_ratio/high_max"][0])  # of no token
    loss, grads, forwarded, metrics = run(ours, [0.0] * 4, 0)  # no rank has one: one row, nothing logged
    assert forwarded == [1] and loss.item() == 0 and all(not g.any() for g in grads) and metrics == {}


def test_completion_only_scoring_equals_trls_fused_head(tiny_model_dir, qwen3_tokenizer):
    """DapoTrainer's CPU scoring (training.rl.engines.completion_logprobs: one unpadded row at a time, logits of the
    completion only) gives TRL's log-probabilities and entropies on a left- and right-padded batch."""
    from transformers import AutoModelForCausalLM
    from trl.trainer.utils import add_fused_lm_head

    from training.rl.engines import completion_logprobs

    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir).eval()
    gen = torch.Generator().manual_seed(1)
    ids = torch.randint(0, 1000, (2, 10), generator=gen)
    mask = torch.tensor([[0, 0, 1, 1, 1, 1, 1, 1, 1, 0], [1, 1, 1, 1, 1, 1, 1, 1, 1, 1]])
    with torch.no_grad():
        ours, entropy = completion_logprobs(model, ids, mask, keep=4, temperature=0.7)
        add_fused_lm_head(model, temperature=0.7, outputs=("log_probs", "entropy"))
        labels = ids.masked_fill(mask == 0, -100)
        labels[:, :-4] = -100
        fused = model(input_ids=ids, attention_mask=mask, labels=labels, fused_lm_head=True)
    valid = mask[:, -4:].bool()
    torch.testing.assert_close(ours[valid], fused.log_probs[:, -4:][valid], atol=1e-4, rtol=0)
    torch.testing.assert_close(entropy[valid], fused.entropy[:, -4:][valid], atol=1e-4, rtol=0)
    assert ours[0, -1] == 0 and entropy[0, -1] == 0  # right padding
