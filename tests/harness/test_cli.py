import argparse

import pytest

from harness import cli


def test_help_lists_the_harness_commands(capsys):
    with pytest.raises(SystemExit) as exc:
        cli.main(["--help"])
    assert exc.value.code == 0
    out = capsys.readouterr().out
    assert "tasks" in out and "bench" in out


def test_no_command_prints_help_and_exits_2(capsys):
    assert cli.main([]) == 2
    assert "usage: stateguard" in capsys.readouterr().out


def test_a_plugin_with_a_missing_dependency_is_reported_not_fatal(monkeypatch, capsys):
    def broken(_subparsers: argparse._SubParsersAction) -> None:
        raise ImportError("No module named 'vllm'")

    commands = cli.discover_commands()
    monkeypatch.setattr(cli, "discover_commands", lambda: {**commands, "serve": broken})
    assert cli.main(["serve"]) == 2
    assert "unavailable" in capsys.readouterr().err
    # the other commands still parse
    with pytest.raises(SystemExit):
        cli.main(["tasks", "--help"])


def test_a_source_checkout_reads_the_commands_from_pyproject(monkeypatch):
    monkeypatch.setattr(cli, "entry_points", lambda group: [])  # the distribution is not installed
    commands = cli.discover_commands()
    assert {"tasks", "run", "evaluate", "pipeline"} <= set(commands)
    assert commands["tasks"] == "harness.tasks.cli:register"


def test_without_entry_points_or_pyproject_the_error_names_the_fix(monkeypatch, tmp_path, capsys):
    monkeypatch.setattr(cli, "entry_points", lambda group: [])
    monkeypatch.setattr(cli, "PYPROJECT", tmp_path / "pyproject.toml")
    assert cli.main(["--help"]) == 2
    assert "pip install -e ." in capsys.readouterr().err
