"""`stateguard serve`: the exact vLLM command, printed by --dry-run without vLLM; bad checkpoints are refused."""

from __future__ import annotations

import argparse
import json
import shutil

import pytest

from harness.serving import ServeConfig, cpu_env, model_link, register, vllm_command


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
    assert second == "# API root for --manager llm:URL / --worker openai:URL: http://127.0.0.1:8000/v1 (model manager)"
    rc, out, _ = run_cli(capsys, "--checkpoint", str(tiny), "--cpu", "--port", "8001", "--dry-run")
    assert rc == 0 and out.startswith("HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 ")
    # the CPU stand-in serves the model under the name vllm_command passes as --served-model-name
    assert "transformers serve tiny-qwen3 --host 127.0.0.1 --port 8001 --device cpu" in out
    assert f"# run in a temporary folder where tiny-qwen3 links to {tiny.resolve()}" in out
    rc, out, _ = run_cli(capsys, "--checkpoint", str(tiny), "--cpu", "--served-model-name", "org/m", "--dry-run")
    assert rc == 0 and "transformers serve org/m --host" in out and out.strip().endswith("(model org/m)")


def test_the_stand_in_runs_where_its_model_name_links_to_the_checkpoint(tiny):
    with model_link(ServeConfig(str(tiny), served_model_name="org/manager")) as folder:
        link = folder / "org" / "manager"
        assert link.is_symlink() and link.resolve() == tiny.resolve() and (link / "config.json").is_file()
    assert not folder.exists()
    for name in ("/abs/path", "../up", "x:w.gguf"):
        with pytest.raises(ValueError, match="relative name"):
            with model_link(ServeConfig(str(tiny), served_model_name=name)):
                pass


def test_the_stand_in_env_silences_the_tracker_warning_and_plain_logs_get_no_bars(monkeypatch):
    monkeypatch.setenv("PYTHONWARNINGS", "default")
    monkeypatch.setenv("FORCE_COLOR", "1")
    env = cpu_env()
    assert env["PYTHONWARNINGS"] == "default,ignore:resource_tracker:UserWarning" and env["HF_HUB_OFFLINE"] == "1"
    assert env["HF_HUB_DISABLE_PROGRESS_BARS"] == "1" and env["NO_COLOR"] == "1" and "FORCE_COLOR" not in env
    terminal = cpu_env(terminal=True)
    assert "HF_HUB_DISABLE_PROGRESS_BARS" not in terminal and terminal["FORCE_COLOR"] == "1"


def test_the_dry_run_shows_the_checkpoints_manager_json_and_a_malformed_one_is_refused(capsys, tiny, tmp_path):
    from harness.manager.checkpoint_settings import MANAGER_FILE, ManagerSettings, write_manager_settings

    for name in ("config.json", "chat_template.jinja"):
        shutil.copy(tiny / name, tmp_path / name)
    settings = ManagerSettings(policy="hier", writes="checks")
    write_manager_settings(tmp_path, settings)
    rc, out, _ = run_cli(capsys, "--checkpoint", str(tmp_path), "--dry-run")
    assert rc == 0 and out.strip().splitlines()[-1] == (
        f"# {MANAGER_FILE}: {json.dumps(settings.to_dict())} (followed by clients on this machine)"
    )
    (tmp_path / MANAGER_FILE).write_text('{"stateguard_manager": 1, "policy": "tier1"}')
    rc, _, err = run_cli(capsys, "--checkpoint", str(tmp_path), "--dry-run")
    assert rc == 2 and f"{tmp_path / MANAGER_FILE}: field policy='tier1': use one of llm, hier" in err


def test_a_checkpoint_without_its_chat_template_is_refused(capsys, tiny, tmp_path):
    shutil.copy(tiny / "config.json", tmp_path / "config.json")
    rc, _, err = run_cli(capsys, "--checkpoint", str(tmp_path), "--dry-run")
    assert rc == 2 and "no chat_template.jinja" in err
    rc, _, err = run_cli(capsys, "--checkpoint", str(tmp_path / "nothing"), "--dry-run")
    assert rc == 2 and "no config.json there" in err
