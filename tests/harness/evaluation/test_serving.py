"""`stateguard serve`: the exact vLLM command, printed by --dry-run without vLLM; bad checkpoints are refused."""

from __future__ import annotations

import argparse
import shutil

import pytest

from harness.serving import ServeConfig, register, vllm_command


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    """What the command needs of a checkpoint: its config.json and chat_template.jinja."""
    path = tmp_path_factory.mktemp("ckpt") / "tiny-qwen3"
    path.mkdir()
    (path / "config.json").write_text("{}")
    (path / "chat_template.jinja").write_text("{{ messages }}")
    return path


def test_vllm_command_is_exact(tiny):
    command = vllm_command(ServeConfig(str(tiny), port=8123, max_model_len=40960))
    assert command == [
        "vllm", "serve", str(tiny), "--served-model-name", "tiny-qwen3", "--host", "127.0.0.1", "--port", "8123",
        "--chat-template", str(tiny / "chat_template.jinja"), "--enable-auto-tool-choice",
        "--tool-call-parser", "hermes", "--max-model-len", "40960",
    ]  # fmt: skip


def run_cli(capsys, *argv):
    parser = argparse.ArgumentParser()
    register(parser.add_subparsers())
    args = parser.parse_args(["serve", *argv])
    rc = args.func(args)
    out, err = capsys.readouterr()
    return rc, out, err


def test_dry_run_prints_the_command_without_vllm(capsys, tiny):
    rc, out, _ = run_cli(capsys, "--checkpoint", str(tiny), "--served-model-name", "manager", "--dry-run")
    assert rc == 0
    first, second = out.strip().splitlines()
    assert first.startswith(f"vllm serve {tiny} --served-model-name manager ")
    assert first.endswith("--enable-auto-tool-choice --tool-call-parser hermes")
    assert second == "# API root for --manager llm:URL / --worker openai:URL: http://127.0.0.1:8000/v1"
    rc, out, _ = run_cli(capsys, "--checkpoint", str(tiny), "--cpu", "--port", "8001", "--dry-run")
    assert rc == 0 and out.startswith("HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 ")
    assert f"transformers serve {tiny} --host 127.0.0.1 --port 8001 --device cpu" in out


def test_a_checkpoint_without_its_chat_template_is_refused(capsys, tiny, tmp_path):
    shutil.copy(tiny / "config.json", tmp_path / "config.json")
    rc, _, err = run_cli(capsys, "--checkpoint", str(tmp_path), "--dry-run")
    assert rc == 2 and "no chat_template.jinja" in err
    rc, _, err = run_cli(capsys, "--checkpoint", str(tmp_path / "nothing"), "--dry-run")
    assert rc == 2 and "no config.json there" in err
