"""The tiny Qwen3: loads back with the Auto classes, generates, keeps the template, is deterministic in its seed."""

from __future__ import annotations

import argparse
import dataclasses
import json
import subprocess
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from safetensors.torch import load_file  # noqa: E402
from transformers import AutoModelForCausalLM, AutoTokenizer  # noqa: E402

from harness.tokenizer import load_chat_template  # noqa: E402
from training import cli  # noqa: E402
from training.models import (  # noqa: E402
    MANIFEST_NAME,
    TinyQwen3Config,
    build_tiny_qwen3,
    init_tiny_qwen3,
    parameter_counts,
    read_manifest,
)

MESSAGES = [
    {"role": "system", "content": "You are the state manager."},
    {"role": "user", "content": "Check step 3."},
]
ROOT = Path(__file__).resolve().parents[2]
TOOLS = [{"type": "function", "function": {"name": "COMMIT_STATE", "description": "Commit.", "parameters": {}}}]


@pytest.fixture(scope="module")
def loaded(tiny_model_dir: Path):
    return AutoModelForCausalLM.from_pretrained(tiny_model_dir), AutoTokenizer.from_pretrained(tiny_model_dir)


def test_the_folder_holds_a_complete_build(tiny_model_dir: Path) -> None:
    manifest = read_manifest(tiny_model_dir)
    assert manifest is not None and manifest["seed"] == 0
    expected = {"config.json", "generation_config.json", "model.safetensors", "tokenizer.json"}
    expected |= {"tokenizer_config.json", "chat_template.jinja"}
    assert expected <= set(manifest["files"])
    assert {p.name for p in tiny_model_dir.iterdir()} == set(manifest["files"]) | {MANIFEST_NAME}


def test_loads_back_with_the_qwen3_shape(loaded, tiny_model_dir: Path) -> None:
    model, tokenizer = loaded
    config = model.config
    assert type(model).__name__ == "Qwen3ForCausalLM"
    assert (config.vocab_size, config.hidden_size, config.num_hidden_layers) == (151_936, 128, 4)
    assert (config.num_attention_heads, config.num_key_value_heads, config.head_dim) == (4, 2, 32)
    assert model.get_input_embeddings().weight.data_ptr() == model.get_output_embeddings().weight.data_ptr()
    counts = parameter_counts(model)
    assert counts == read_manifest(tiny_model_dir)["parameters"]
    assert counts["embedding"] == 151_936 * 128
    assert 2_000_000 <= counts["non_embedding"] <= 5_000_000  # "a few million besides embeddings"
    assert (tokenizer.eos_token_id, tokenizer.pad_token_id) == (151645, 151643)
    assert model.generation_config.eos_token_id == [151645, 151643]
    assert model.generation_config.pad_token_id == 151643


def test_chat_template_round_trips(loaded, qwen3_tokenizer) -> None:
    _, tokenizer = loaded
    assert tokenizer.chat_template == load_chat_template()
    rendered = tokenizer.apply_chat_template(MESSAGES, tools=TOOLS, tokenize=False, add_generation_prompt=True)
    assert rendered == qwen3_tokenizer.apply_chat_template(
        MESSAGES, tools=TOOLS, tokenize=False, add_generation_prompt=True
    )
    assert rendered.endswith("Check step 3.<|im_end|>\n<|im_start|>assistant\n") and "# Tools" in rendered
    # AutoTokenizer reads tokenizer_class "Qwen2Tokenizer" (as in Qwen3 checkpoints) and rebuilds the same pipeline.
    text = "def f(x):\n    return x * 2  # 中文 😀 <think>ok</think><|im_end|>"
    assert tokenizer.encode(text) == qwen3_tokenizer.encode(text)
    assert tokenizer.decode([151657, 151645], skip_special_tokens=True) == "<tool_call>"


def test_greedy_generation_runs_and_is_deterministic(loaded) -> None:
    model, tokenizer = loaded
    inputs = tokenizer.apply_chat_template(
        MESSAGES, tools=TOOLS, add_generation_prompt=True, return_dict=True, return_tensors="pt"
    )
    prompt_length = inputs["input_ids"].shape[1]
    with torch.no_grad():
        first = model.generate(**inputs, max_new_tokens=5, do_sample=False)
        second = model.generate(**inputs, max_new_tokens=5, do_sample=False)
    assert torch.equal(first, second)
    assert torch.equal(first[0, :prompt_length], inputs["input_ids"][0])
    new_tokens = first[0, prompt_length:]
    assert 1 <= len(new_tokens) <= 5
    assert int(new_tokens.max()) < 151_936


def test_same_seed_same_weights_other_seed_other_weights(tiny_model_dir: Path) -> None:
    saved = load_file(tiny_model_dir / "model.safetensors")
    same = init_tiny_qwen3(seed=0).state_dict()
    other = init_tiny_qwen3(seed=1).state_dict()
    assert saved.keys() <= same.keys()
    assert all(torch.equal(saved[name], same[name]) for name in saved)
    assert not torch.equal(saved["model.embed_tokens.weight"], other["model.embed_tokens.weight"])


def test_the_global_rng_is_left_alone() -> None:
    torch.manual_seed(123)
    expected = torch.rand(3)
    torch.manual_seed(123)
    init_tiny_qwen3(TinyQwen3Config(hidden_size=16, num_hidden_layers=1, head_dim=8, intermediate_size=32), seed=5)
    assert torch.equal(torch.rand(3), expected)


def test_rebuilding_into_a_complete_folder_is_a_no_op(tiny_model_dir: Path) -> None:
    before = {p.name: p.stat().st_mtime_ns for p in tiny_model_dir.iterdir()}
    assert build_tiny_qwen3(tiny_model_dir, seed=0) == tiny_model_dir
    assert {p.name: p.stat().st_mtime_ns for p in tiny_model_dir.iterdir()} == before


def test_a_different_seed_or_shape_in_a_built_folder_is_refused(tiny_model_dir: Path) -> None:
    with pytest.raises(ValueError, match=r"seed=0 \(requested 1\)"):
        build_tiny_qwen3(tiny_model_dir, seed=1)
    with pytest.raises(ValueError, match=r"hidden_size=128 \(requested 64\)"):
        build_tiny_qwen3(tiny_model_dir, seed=0, hidden_size=64)


def test_a_foreign_non_empty_folder_is_refused(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("mine")
    with pytest.raises(ValueError, match="not empty"):
        build_tiny_qwen3(tmp_path, seed=0)
    assert [p.name for p in tmp_path.iterdir()] == ["notes.txt"]


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"hidden_sise": 64}, r"unknown tiny Qwen3 setting\(s\) \['hidden_sise'\]; valid settings: hidden_size"),
        ({"num_attention_heads": 4, "num_key_value_heads": 3}, "not a multiple of num_key_value_heads=3"),
        ({"vocab_size": 1000}, "smaller than the tokenizer's 151669 ids"),
        ({"num_hidden_layers": 0}, "num_hidden_layers=0 must be positive"),
    ],
)
def test_bad_settings_are_refused_with_the_fix(overrides: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        TinyQwen3Config.from_overrides(**overrides)


def _run_cli(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="stateguard")
    cli.register(parser.add_subparsers(dest="command"))
    args = parser.parse_args(argv)
    return args.func(args)


def test_cli_builds_a_small_override_free_model_and_reports_it(tmp_path: Path, capsys) -> None:
    out = tmp_path / "tiny"
    assert _run_cli(["model", "tiny", "--out", str(out), "--seed", "7"]) == 0
    printed = capsys.readouterr().out
    manifest = json.loads((out / MANIFEST_NAME).read_text())
    assert manifest["seed"] == 7
    assert f"wrote {out}" in printed and f"{manifest['parameters']['total']:,}" in printed
    assert "model.safetensors" in printed

    assert _run_cli(["model", "tiny", "--out", str(out), "--seed", "7"]) == 0
    assert "nothing written" in capsys.readouterr().out
    assert _run_cli(["model", "tiny", "--out", str(out), "--seed", "8"]) == 2
    assert "seed=7 (requested 8)" in capsys.readouterr().out


def test_cli_writes_a_model_folders_manager_json(tmp_path: Path, capsys) -> None:
    """``stateguard model settings DIR`` writes the manager.json the untrained model is served with; a value out of
    range is refused in one line and writes nothing."""
    from harness.manager.checkpoint_settings import ManagerSettings, read_manager_settings

    argv = ["model", "settings", str(tmp_path), "--policy", "hier", "--writes", "checks", "--prompt-view", "bare"]
    assert _run_cli([*argv, "--max-new-tokens", "200"]) == 0
    expected = ManagerSettings(policy="hier", writes="checks", prompt_view="bare", max_new_tokens=200)
    assert read_manager_settings(tmp_path) == expected
    assert f"wrote {tmp_path / 'manager.json'}" in capsys.readouterr().out
    assert _run_cli(["model", "settings", str(tmp_path / "x"), "--policy", "flat"]) == 2
    assert _run_cli(["model", "settings", str(tmp_path), "--policy", "flat"]) == 2
    assert capsys.readouterr().out.splitlines()[-1] == (
        "stateguard model settings: policy='flat': use one of llm, hier"
    )
    assert read_manager_settings(tmp_path) == expected  # the refused command wrote nothing


def test_config_fields_carry_help() -> None:
    assert all(f.metadata.get("help") for f in dataclasses.fields(TinyQwen3Config))


def test_registering_the_command_imports_nothing_heavy() -> None:
    code = (
        "import argparse, sys; from training import cli; "
        "cli.register(argparse.ArgumentParser().add_subparsers()); "
        "print(sorted(m for m in ('torch', 'transformers', 'tokenizers') if m in sys.modules))"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    assert result.stdout.strip() == "[]"
