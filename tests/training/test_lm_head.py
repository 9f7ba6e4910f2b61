"""The compact CPU LM head (training/lm_head.py) returns what TRL's fused head returns, gradients included."""

from __future__ import annotations

import copy

import pytest
import torch

pytest.importorskip("trl")
from transformers import Qwen3Config, Qwen3ForCausalLM  # noqa: E402
from trl.trainer.utils import add_fused_lm_head  # noqa: E402

from training.lm_head import MAX_COMPACT_POSITIONS, use_compact_lm_head  # noqa: E402


def _model(seed: int = 0) -> Qwen3ForCausalLM:
    torch.manual_seed(seed)
    config = Qwen3Config(
        vocab_size=512, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=2,
        num_key_value_heads=1, head_dim=16, tie_word_embeddings=True,
    )  # fmt: skip
    model = Qwen3ForCausalLM(config)
    add_fused_lm_head(model, outputs=("log_probs", "entropy", "is_top1"))
    return model


def _batch() -> tuple[torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(1)
    ids = torch.randint(0, 512, (2, 40), generator=generator)
    labels = ids.clone()
    labels[0, :30] = -100  # a long unlabelled prompt, as a manager sample's system turn
    labels[1, :12] = -100
    labels[1, 20:25] = -100  # an environment span in the middle
    return ids, labels


@pytest.mark.parametrize("num_items_in_batch", [None, 37])
def test_compact_head_matches_trl_values_and_gradients(num_items_in_batch):
    reference, compact = _model(), _model()
    compact.load_state_dict(copy.deepcopy(reference.state_dict()))
    assert use_compact_lm_head(compact)
    ids, labels = _batch()
    kwargs = {"input_ids": ids, "labels": labels, "fused_lm_head": True, "num_items_in_batch": num_items_in_batch}
    want, got = reference(**kwargs), compact(**kwargs)
    assert torch.equal(got.label_mask, want.label_mask) and int(got.label_mask.sum()) == 10 + 23
    torch.testing.assert_close(got.log_probs, want.log_probs, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(got.entropy, want.entropy, rtol=1e-5, atol=1e-5)
    assert torch.equal(got.is_top1, want.is_top1)
    torch.testing.assert_close(got.loss, want.loss)
    assert float(got.log_probs.detach()[~got.label_mask].abs().sum()) == 0.0
    want.loss.backward()
    got.loss.backward()
    for (name, a), (_, b) in zip(reference.named_parameters(), compact.named_parameters(), strict=True):
        torch.testing.assert_close(b.grad, a.grad, rtol=1e-4, atol=1e-6, msg=name)


def test_generation_and_unlabelled_batches_are_untouched():
    model = _model()
    assert use_compact_lm_head(model)
    ids, labels = _batch()
    plain = model(input_ids=ids)  # no fused_lm_head: the original forward, full logits
    assert plain.logits.shape == (2, 40, 512)
    out = model(input_ids=ids, labels=torch.full_like(labels, -100), fused_lm_head=True)
    assert float(out.loss) == 0.0 and out.loss.requires_grad  # still connected: backward does not fail
    out.loss.backward()


def test_too_many_labelled_positions_fall_back_to_trl(monkeypatch):
    import training.lm_head as lm_head

    model = _model()
    assert use_compact_lm_head(model)
    monkeypatch.setattr(lm_head, "MAX_COMPACT_POSITIONS", 5)
    calls = []
    monkeypatch.setattr(lm_head, "compact_scores", lambda *a, **k: calls.append(1))
    ids, labels = _batch()
    out = model(input_ids=ids, labels=labels, fused_lm_head=True)
    assert calls == [] and out.log_probs.shape == (2, 39)
    assert MAX_COMPACT_POSITIONS == 8192


def test_scaled_logits_keep_trl_forward():
    model = _model()
    model.config.final_logit_softcapping = 30.0
    assert use_compact_lm_head(model) is False
