import argparse

import pytest

from harness import cli


def test_help_lists_the_harness_commands(capsys):
    with pytest.raises(SystemExit) as exc:
        cli.main(["--help"])
    assert exc.value.code == 0
    out = capsys.readouterr().out
    assert "tasks" in out and "demo" in out


def test_no_command_prints_help_and_exits_2(capsys):
    assert cli.main([]) == 2
    assert "usage: stateguard" in capsys.readouterr().out


def test_a_plugin_with_a_missing_dependency_is_reported_not_fatal(monkeypatch, capsys):
    def broken(_subparsers: argparse._SubParsersAction) -> None:
        raise ImportError("No module named 'vllm'")

    monkeypatch.setattr(cli, "discover_commands", lambda: {**cli.BUILTIN_COMMANDS, "serve": broken})
    assert cli.main(["serve"]) == 2
    assert "unavailable" in capsys.readouterr().err
    # the other commands still parse
    with pytest.raises(SystemExit):
        cli.main(["tasks", "--help"])
