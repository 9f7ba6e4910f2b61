"""LoRA paths that end in a servable model: SFT merges on save, ``stateguard merge`` folds an adapter folder in, and
RL refuses LoRA and adapter-only folders in one line naming the merge.

One LoRA SFT run of the tiny Qwen3 (2 steps on the short smoke splits of conftest.py) is shared by the module.
"""

from __future__ import annotations

import importlib.util
import shutil
from pathlib import Path

import pytest

from harness.manager.checkpoint_settings import ManagerSettings, read_manager_settings, write_manager_settings

REPO = Path(__file__).resolve().parents[2]
SAMPLE = [[151644, 872, 198, 14990, 1879, 151645, 198, 151644, 77091, 198]]  # <|im_start|>user\nhello world...


@pytest.fixture(scope="module")
def lora_out(tiny_model_dir: Path, sft_short_dataset_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The output folder of a 2-step LoRA SFT run (``merge_lora`` left at its default)."""
    from trl import SFTConfig

    from training.sft import DataArguments, ModelArguments, run_sft

    out = tmp_path_factory.mktemp("lora") / "sft"
    model_args = ModelArguments(
        model_name_or_path=str(tiny_model_dir), dtype="float32", use_peft=True, lora_r=4, lora_alpha=8,
        lora_dropout=0.0,
    )  # fmt: skip
    data_args = DataArguments(dataset_path=str(sft_short_dataset_dir), max_train_samples=2, max_eval_samples=1)
    config = SFTConfig(
        output_dir=str(out), use_cpu=True, bf16=False, max_length=1024, per_device_train_batch_size=1, max_steps=2,
        learning_rate=5e-3, lr_scheduler_type="constant", logging_steps=1, eval_strategy="no", save_strategy="no",
        report_to="none", seed=0, disable_tqdm=True,
    )  # fmt: skip
    run_sft(model_args, data_args, config)
    return out


def _logits(model):
    import torch

    with torch.no_grad():
        return model(torch.tensor(SAMPLE)).logits


def test_lora_sft_saves_the_merged_model_and_the_adapter(lora_out: Path, tiny_model_dir: Path):
    """The output folder is a full checkpoint (what serve and vLLM load) whose logits equal the base model with the
    trained adapter (PEFT, unmerged); the adapter is in ``adapter/``."""
    from peft import PeftModel
    from transformers import AutoModelForCausalLM

    from harness.checkpoints import is_adapter_only
    from harness.serving import ServeConfig

    assert (lora_out / "model.safetensors").is_file() and (lora_out / "chat_template.jinja").is_file()
    assert not (lora_out / "adapter_config.json").exists() and not is_adapter_only(lora_out)
    assert is_adapter_only(lora_out / "adapter")
    card = (lora_out / "README.md").read_text()
    assert "with LoRA adapters (merged into this model; the adapter in `adapter/`)" in card
    ServeConfig(str(lora_out))  # servable: config.json, weights, template
    assert read_manager_settings(lora_out) == read_manager_settings(lora_out / "adapter") == ManagerSettings()
    merged = AutoModelForCausalLM.from_pretrained(lora_out, dtype="float32")
    base = AutoModelForCausalLM.from_pretrained(tiny_model_dir, dtype="float32")
    base_logits = _logits(base)
    with_adapter = PeftModel.from_pretrained(base, lora_out / "adapter")
    expected, got = _logits(with_adapter), _logits(merged)
    assert (expected - base_logits).abs().max() > 1e-3  # the adapter trained: it changes the logits
    assert (got - expected).abs().max() < 1e-4


def test_stateguard_merge_folds_an_adapter_folder(lora_out: Path, tmp_path: Path, monkeypatch, capsys):
    """``stateguard merge`` on the run's adapter writes the same weights as the merge on save; a folder without
    ``adapter_config.json`` is refused in one line."""
    from safetensors.torch import load_file

    from harness import cli

    monkeypatch.setattr(cli, "entry_points", lambda group: [])  # the commands of this checkout's pyproject.toml
    assert cli.main(["merge", "--adapter", str(lora_out / "adapter"), "--out", str(tmp_path / "m")]) == 0
    assert f"wrote {tmp_path / 'm'}" in capsys.readouterr().out
    again, saved = load_file(tmp_path / "m" / "model.safetensors"), load_file(lora_out / "model.safetensors")
    assert again.keys() == saved.keys() and all((again[k] == saved[k]).all() for k in saved)
    assert (tmp_path / "m" / "chat_template.jinja").read_text() == (lora_out / "chat_template.jinja").read_text()
    hier_checks = ManagerSettings(policy="hier", writes="checks", prompt_view="bare")
    shutil.copytree(lora_out / "adapter", tmp_path / "adapter")
    write_manager_settings(tmp_path / "adapter", hier_checks)  # the adapter with another manager.json
    assert cli.main(["merge", "--adapter", str(tmp_path / "adapter"), "--out", str(tmp_path / "h")]) == 0
    assert read_manager_settings(tmp_path / "h") == hier_checks  # the merged folder is served as the adapter was
    capsys.readouterr()
    assert cli.main(["merge", "--adapter", str(lora_out), "--out", str(tmp_path / "n")]) == 2
    err = capsys.readouterr().err.strip()
    assert (
        err
        == f"stateguard merge: error: --adapter {lora_out}: no adapter_config.json there; pass a LoRA adapter folder."
    )


def _rl_main():
    spec = importlib.util.spec_from_file_location("rl_script", REPO / "scripts" / "rl.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.main


def test_rl_refuses_lora_and_an_adapter_only_folder(lora_out: Path):
    main, config = _rl_main(), str(REPO / "configs" / "rl" / "tiny-cpu.yaml")
    with pytest.raises(
        ValueError, match=r"^use_peft=true: DAPO trains all weights.*set use_peft: false.*stateguard merge"
    ):
        main(["--config", config, "--use_peft", "true"])
    adapter = lora_out / "adapter"
    fix = f"stateguard merge --adapter {adapter} --out {adapter}-merged"
    with pytest.raises(ValueError, match=f"^model_name_or_path {adapter} holds a LoRA adapter only") as error:
        main(["--config", config, "--model_name_or_path", str(adapter)])
    assert str(error.value).endswith(fix) and "\n" not in str(error.value)
