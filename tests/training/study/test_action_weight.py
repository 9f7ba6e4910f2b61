"""The action-name loss weight (training.study.action_weight): which tokens it weighs, and the loss TRL's trainer
returns."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

CALL = (
    '<tool_call>\n{"name": "REPAIR", "arguments": {"error_hint": {"name": "not an action"}}}\n</tool_call><|im_end|>'
)


def test_the_mask_covers_exactly_each_labelled_action_name(qwen3_tokenizer):
    from training.study.action_weight import action_name_mask

    tokenizer = qwen3_tokenizer
    first = tokenizer(CALL, add_special_tokens=False)["input_ids"]
    second = tokenizer(CALL.replace("REPAIR", "FINALIZE_RELATIONS"), add_special_tokens=False)["input_ids"]
    prompt = tokenizer('context: {"name": "OPEN_STATE"}', add_special_tokens=False)["input_ids"]
    # prompt (unlabelled) | first call (labelled) | one unlabelled token | second call (labelled) | padding
    targets = [-100] * len(prompt) + first + [-100] + second + [-100, -100]
    mask = action_name_mask(torch.tensor([targets, [-100] * len(targets)]), lambda t: tokenizer.decode([t]))

    assert mask.shape == (2, len(targets)) and mask.dtype == torch.bool
    heavy = [i for i, marked in enumerate(mask[0].tolist()) if marked]
    assert heavy and not mask[1].any()
    spans, current = [], [heavy[0]]
    for index in heavy[1:]:
        if index == current[-1] + 1:
            current.append(index)
        else:
            spans.append(current)
            current = [index]
    spans.append(current)
    names = [tokenizer.decode([targets[i] for i in span]) for span in spans]
    # exactly the two calls' names (their tokens may carry the quotes around them); never the nested "name" key,
    # never the unlabelled prompt's
    assert [name.strip('"') for name in names] == ["REPAIR", "FINALIZE_RELATIONS"]
    assert all(len(name) - len(name.strip('"')) <= 2 for name in names)


def _weighted_trainer(sft_short_dataset_dir, tiny_model_dir, tmp_path, weight):
    from trl import SFTTrainer

    from tests.training.test_sft import _cpu_config
    from training.sft import DataArguments, ModelArguments, build_trainer
    from training.study.action_weight import weighted_trainer_class

    trainer, _ = build_trainer(
        ModelArguments(model_name_or_path=str(tiny_model_dir)),
        DataArguments(dataset_path=str(sft_short_dataset_dir), max_train_samples=2),
        _cpu_config(tmp_path / f"out-{weight}"),
        trainer_class=weighted_trainer_class(SFTTrainer, weight),
    )
    return trainer


def test_trainer_loss_weights_the_action_names_and_eval_stays_plain(sft_short_dataset_dir, tiny_model_dir, tmp_path):
    from training.study.action_weight import action_name_mask

    plain = _weighted_trainer(sft_short_dataset_dir, tiny_model_dir, tmp_path, 1.0)
    heavy = _weighted_trainer(sft_short_dataset_dir, tiny_model_dir, tmp_path, 5.0)
    assert (plain.action_name_weight, heavy.action_name_weight) == (1.0, 5.0)
    batch = heavy.data_collator([heavy.train_dataset[i] for i in range(2)])
    model = heavy.model
    model.train()

    # the reference: per-token log-probabilities of the labels from an ordinary forward
    with torch.no_grad():
        logits = model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]).logits[:, :-1].float()
        targets = batch["labels"][:, 1:]
        mask = targets != -100
        log_probs = torch.log_softmax(logits, -1).gather(-1, targets.clamp(min=0)[..., None])[..., 0] * mask
    names = action_name_mask(targets, lambda t: heavy.processing_class.decode([t]))
    assert int(names.sum()) >= 2  # each sample's reply is a tool call with a named action
    weights = torch.where(names, 5.0, 1.0)

    weighted = heavy.compute_loss(model, dict(batch))
    assert weighted.requires_grad
    assert float(weighted.detach()) == pytest.approx(float(-(log_probs * weights).sum() / mask.sum()), rel=1e-4)
    with torch.no_grad():
        unweighted = plain.compute_loss(model, dict(batch))  # TRL's own loss, the same weights
    assert float(unweighted) == pytest.approx(float(-log_probs.sum() / mask.sum()), rel=1e-4)
    assert float(weighted) > float(unweighted)
    # both log the decision's own loss: the mean over the action-name tokens, whatever the weight
    for trainer in (heavy, plain):
        assert trainer._metrics["train"]["action_name_nll"][-1] == pytest.approx(
            float(-log_probs[names].mean()), rel=1e-4
        )

    model.eval()  # evaluation reports the plain per-token loss, comparable across weights
    with torch.no_grad():
        assert float(heavy.compute_loss(model, dict(batch))) == pytest.approx(float(unweighted), rel=1e-4)


def test_action_name_weight_bad_values_are_refused(sft_short_dataset_dir, tiny_model_dir, tmp_path):
    from trl import SFTTrainer

    from tests.training.test_sft import _cpu_config
    from training.sft import DataArguments, ModelArguments, build_trainer
    from training.study.action_weight import weighted_trainer_class
    from training.study.sft import StudySFTArguments

    with pytest.raises(ValueError, match=r"^action_name_weight=0 must be positive"):
        StudySFTArguments(action_name_weight=0)
    with pytest.raises(ValueError, match=r"^action_name_weight=0 must be positive"):
        weighted_trainer_class(SFTTrainer, 0)
    with pytest.raises(ValueError, match=r"^action_name_weight=3.0 reweights TRL's fused per-token loss"):
        build_trainer(
            ModelArguments(model_name_or_path=str(tiny_model_dir)),
            DataArguments(dataset_path=str(sft_short_dataset_dir)),
            _cpu_config(tmp_path / "out", label_smoothing_factor=0.1),
            trainer_class=weighted_trainer_class(SFTTrainer, 3.0),
        )


def test_the_study_sft_parser_takes_the_weight_beside_the_sft_arguments():
    """``python -m training.study.sft`` reads scripts/sft.py's config and flags plus ``--action_name_weight``."""
    from training.study.sft import make_parser

    config = Path(__file__).resolve().parents[3] / "configs" / "sft" / "tiny-cpu.yaml"
    model_args, data_args, study_args, sft_config = make_parser().parse_args_and_config(
        ["--config", str(config), "--max_steps", "3", "--action_name_weight", "2"]
    )
    assert (model_args.model_name_or_path, sft_config.max_steps, study_args.action_name_weight) == ("tiny", 3, 2.0)
    assert not hasattr(data_args, "action_name_weight")
