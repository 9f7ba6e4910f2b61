"""The RL-only ("w/o SFT") config: it parses through scripts/rl.py's parser (tests/training/test_rl_config.py checks
every file of configs/rl) and differs from its SFT+RL counterpart only in the starting model and the output folder."""

from __future__ import annotations

import dataclasses
import importlib.util
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
RL = REPO / "configs" / "rl"
PAIRS = [
    ("qwen3-8b-rl-only.yaml", "qwen3-8b.yaml", "Qwen/Qwen3-8B"),
]


def _parse(path: Path):
    spec = importlib.util.spec_from_file_location("rl_script", REPO / "scripts" / "rl.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.make_parser().parse_args_and_config(["--config", str(path), "--use_cpu", "true"])


def _fields(obj) -> dict:
    return {f.name: getattr(obj, f.name) for f in dataclasses.fields(obj)}


@pytest.mark.parametrize(("rl_only", "sft_rl", "base"), PAIRS, ids=[p[0] for p in PAIRS])
def test_rl_only_config_changes_only_the_starting_model(rl_only, sft_rl, base):
    pytest.importorskip("trl")
    ablation, reference = _parse(RL / rl_only), _parse(RL / sft_rl)
    model_args, rl_args, config = ablation
    assert model_args.model_name_or_path == base and "sft" not in base
    assert reference[0].model_name_or_path != base
    assert config.output_dir != reference[2].output_dir and config.output_dir.endswith("-rl-only")
    assert {k: v for k, v in _fields(model_args).items() if k != "model_name_or_path"} == {
        k: v for k, v in _fields(reference[0]).items() if k != "model_name_or_path"
    }
    assert _fields(rl_args) == _fields(reference[1])
    differing = {
        k for k, v in config.to_dict().items() if v != reference[2].to_dict()[k] and "dir" not in k and k != "run_name"
    }
    assert not differing, differing


def test_a_base_model_checkpoint_gets_the_project_chat_template(qwen3_tokenizer, tmp_path):
    """A hub base model (Qwen/Qwen3-8B) ships its own chat template; SFT and RL load it with the project's."""
    from harness.tokenizer import load_chat_template, load_tokenizer

    qwen3_tokenizer.save_pretrained(tmp_path)
    (tmp_path / "chat_template.jinja").write_text("{% for m in messages %}{{ m['content'] }}{% endfor %}")
    tokenizer = load_tokenizer(tmp_path)
    assert tokenizer.chat_template == load_chat_template()
    rendered = tokenizer.apply_chat_template([{"role": "user", "content": "hi"}], tokenize=False)
    assert rendered.startswith("<|im_start|>user\nhi<|im_end|>")
