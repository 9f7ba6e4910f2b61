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


def usage_error(capsys, *argv: str) -> str:
    with pytest.raises(SystemExit) as exc:
        cli.main(list(argv))
    assert exc.value.code == 2
    return capsys.readouterr().err


def test_a_mistyped_flag_names_the_sub_command_and_the_close_match(capsys):
    err = usage_error(capsys, "run", "--task", "retail-sales", "--fautls", "x")
    assert err.startswith("usage: stateguard run ")
    assert err.strip().endswith("stateguard run: error: unrecognized arguments: --fautls x (did you mean --faults?)")
    # named before a missing required flag, and in a nested command too
    err = usage_error(capsys, "run", "--fautls", "x")
    assert "unrecognized arguments: --fautls (did you mean --faults?); and the following arguments are required" in err
    err = usage_error(capsys, "tasks", "grade", "TASK", "--answr", "3")
    assert "stateguard tasks grade: error: unrecognized arguments: --answr" in err
    assert "(did you mean --answer?)" in err
    err = usage_error(capsys, "evaluate", "--suite", "smoke", "--mangers", "none")
    assert "stateguard evaluate: error:" in err and "(did you mean --managers?)" in err
    assert "did you mean" not in usage_error(capsys, "run", "--task", "t", "--zzzzzz")


@pytest.mark.parametrize("command", ["run", "evaluate", "serve", "pipeline", "synthesize", "view"])
def test_help_is_plain_text_without_process_internals(command, capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "400")  # argparse wraps at the terminal width: one line per help text
    with pytest.raises(SystemExit):
        cli.main([command, "--help"])
    out = capsys.readouterr().out
    assert "``" not in out and ":func:" not in out and ":class:" not in out and ":mod:" not in out
    assert "PR_SET_PDEATHSIG" not in out and ".. --help ends here" not in out
    if command == "evaluate":  # the suite names, where a suite is chosen
        assert (
            "a suite name: heldout-seeds, heldout-domain, heldout-writer-b, smoke, heldout-demo, dabench-dev." in out
        )


def test_plain_text_keeps_the_targets_of_sphinx_roles():
    text = "See :func:`~harness.cli.main` and :class:`EvalConfig`: ``--out``, **GPU**::\n\n.. --help ends here\nx\n"
    assert cli.plain_text(text) == "See main and EvalConfig: --out, GPU:\n"
