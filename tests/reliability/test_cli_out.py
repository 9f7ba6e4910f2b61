"""Every command checks its output path before any work: one line on stderr naming the flag, the path, the reason and
the fix, exit code 2, no traceback; and with a good output path the cheap commands still run end to end."""

from __future__ import annotations

import argparse
import json
import os
import shutil
from pathlib import Path

import pytest

from harness import cli
from harness.cli import CommandLineError, prepare_out_dir, prepare_out_file

ROOT = Path(__file__).resolve().parents[2]
BUILTIN_TASKS = ROOT / "harness" / "builtin_tasks"
DABSTEP_MINI = ROOT / "tests" / "harness" / "tasks" / "fixtures" / "dabstep_mini"
LORA_ADAPTER = Path(__file__).parent / "fixtures" / "lora-adapter"  # adapter_config.json only: merge checks it first
ISOLATION = "bwrap" if shutil.which("bwrap") else "none"


def no_work(*_args, **_kwargs):
    raise AssertionError("the command started its work before checking --out")


# (command argv before --out, {module: attribute} that does the work, output kind: "dir" or "file")
COMMANDS = {
    "run": (
        ["run", "--task", "retail-sales", "--isolation", ISOLATION, "--view", "quiet"],
        {"harness.sandbox": "Sandbox"},
        "dir",
    ),
    "evaluate": (
        ["evaluate", "--suite", str(BUILTIN_TASKS), "--manager", "none", "--isolation", ISOLATION],
        {"harness.evaluation.evaluate": "run_evaluation"},
        "dir",
    ),
    "synthesize": (
        ["synthesize", "--config", str(ROOT / "configs" / "synthesis" / "smoke.yaml")],
        {"synthesis.driver": "synthesize"},
        "dir",
    ),
    "view": (["view", "records.jsonl"], {"harness.viewer.cli": "_episode_pages"}, "file"),
    "view --all": (["view", "records.jsonl", "--all"], {"harness.viewer.cli": "_episode_pages"}, "dir"),
    "tasks import": (
        ["tasks", "import", "dabstep", "--src", str(DABSTEP_MINI)],
        {"harness.tasks.cli": "run_import"},
        "dir",
    ),
    "model tiny": (["model", "tiny"], {}, "dir"),  # checked before torch is imported
    "model smollm2": (["model", "smollm2", "--no-install"], {}, "dir"),
    "bench run": (
        ["bench", "run", "--suite", str(BUILTIN_TASKS), "--workflow", "direct", "--model", "fake:none.json"],
        {"harness.workflow.bench": "run_bench"},
        "dir",
    ),
    "merge": (["merge", "--adapter", str(LORA_ADAPTER)], {"training.merge": "merge_adapter"}, "dir"),
    "pipeline": (
        ["pipeline", "--config", str(ROOT / "configs" / "pipeline" / "demo.yaml")],
        {"training.pipeline": "run_pipeline"},
        "dir",
    ),
}


def commands_with_out() -> set[str]:
    """``"tasks import"``, ``"view"`` ...: every (sub-)command of ``stateguard`` that has an ``--out`` option."""
    found: set[str] = set()

    def walk(parser: argparse.ArgumentParser, name: str) -> None:
        for action in parser._actions:
            if "--out" in action.option_strings:
                found.add(name)
            if isinstance(action, argparse._SubParsersAction):
                for sub_name, sub in action.choices.items():
                    walk(sub, f"{name} {sub_name}".strip())

    walk(cli.build_parser(), "")
    return found


def test_every_command_with_an_out_flag_is_covered():
    assert commands_with_out() == {name.removesuffix(" --all") for name in COMMANDS}


def bad_out(tmp_path: Path, kind: str, where: str) -> Path:
    """An output path that cannot be used: a folder (for a file output) or a file (for a folder output), or a path
    under a file (either kind). Deterministic as root, unlike permission bits."""
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder\n")
    if where == "under-file":
        return blocker / "sub" / ("page.html" if kind == "file" else "out")
    if kind == "file":
        folder = tmp_path / "a-folder"
        folder.mkdir()
        return folder
    return blocker


@pytest.mark.parametrize("where", ["itself", "under-file"])
@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_a_bad_out_fails_at_once_in_one_line(name, where, tmp_path, monkeypatch, capsys):
    argv, work, kind = COMMANDS[name]
    for module, attribute in work.items():
        monkeypatch.setattr(f"{module}.{attribute}", no_work)
    monkeypatch.chdir(tmp_path)  # a command must not create its default folders (runs/...) either
    out = bad_out(tmp_path, kind, where)
    before = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*"))

    assert cli.main([*argv, "--out", str(out)]) == 2

    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in captured.err, captured.err
    assert lines[0].startswith(f"stateguard {name.removesuffix(' --all')}: error: --out {out}: "), lines[0]
    assert "pass a" in lines[0]  # the fix
    assert sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*")) == before  # nothing written


# ---------------------------------------------------------------------------------------------------------------------
# the helpers


def test_prepare_out_dir_creates_the_folder_with_its_parents_and_leaves_nothing_in_it(tmp_path):
    out = prepare_out_dir(tmp_path / "a" / "b", "--report")
    assert out == tmp_path / "a" / "b" and out.is_dir() and list(out.iterdir()) == []
    assert prepare_out_dir(out) == out  # an existing folder is fine


def test_prepare_out_file_creates_the_folder_not_the_file(tmp_path):
    out = prepare_out_file(tmp_path / "pages" / "one.html")
    assert out.parent.is_dir() and not out.exists()
    out.write_text("old")
    assert prepare_out_file(out) == out  # an existing file is overwritten later, not refused


@pytest.mark.parametrize(
    ("below", "reason"),
    [
        ((), "is a file, not a folder; pass a folder path"),
        (("deeper", "out"), "is a file; pass a path under a folder"),
    ],
    ids=["file", "under-file"],
)
def test_prepare_out_dir_names_the_flag_the_path_and_the_reason(tmp_path, below, reason):
    blocker = tmp_path / "f"
    blocker.write_text("x")
    path = blocker.joinpath(*below)
    with pytest.raises(CommandLineError, match=f"^--report {path}: .*{reason}"):
        prepare_out_dir(path, "--report")
    assert not (tmp_path / "deeper").exists()


def test_a_read_only_folder_is_refused(tmp_path):
    """As root a 0o555 folder is still writable, so root tries sysfs, where nobody can create files."""
    if os.geteuid() == 0:
        with pytest.raises(CommandLineError, match=r"^--out /sys: is not writable"):
            prepare_out_dir("/sys")
        with pytest.raises(CommandLineError, match=r"^--out /sys/stateguard-out: cannot be created"):
            prepare_out_dir("/sys/stateguard-out")
        return
    folder = tmp_path / "ro"
    folder.mkdir()
    folder.chmod(0o555)
    try:
        with pytest.raises(CommandLineError, match="is not writable"):
            prepare_out_dir(folder)
    finally:
        folder.chmod(0o755)


def test_the_writability_probe_is_real_not_the_permission_bits(tmp_path, monkeypatch):
    """A folder the process cannot create a file in is refused, whatever its mode says."""

    def refuse(*_args, **_kwargs):
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr("harness.cli.tempfile.mkstemp", refuse)
    with pytest.raises(CommandLineError, match=r"is not writable \(Permission denied\); pass a folder you can write"):
        prepare_out_dir(tmp_path)


# ---------------------------------------------------------------------------------------------------------------------
# and with a good --out the commands still run (the cheap ones end to end)


def test_run_then_view_then_evaluate_with_good_outputs(tmp_path, capsys):
    out = tmp_path / "new" / "run"  # created, with its parent
    assert (
        cli.main(["run", "--task", "retail-sales", "--isolation", ISOLATION, "--view", "quiet", "--out", str(out)])
        == 0
    )
    summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert summary["record"] == str(out / "episodes.jsonl") and (out / "episodes.jsonl").is_file()

    page = tmp_path / "pages" / "episode.html"
    assert cli.main(["view", str(out / "episodes.jsonl"), "--out", str(page)]) == 0
    assert page.is_file() and "<html" in page.read_text()[:500].lower()

    evaluation = tmp_path / "eval"
    argv = ["evaluate", "--suite", str(BUILTIN_TASKS), "--manager", "none", "--isolation", ISOLATION]
    assert cli.main([*argv, "--out", str(evaluation), "--no-report", "--resamples", "50"]) == 0
    assert (evaluation / "results.json").is_file()


def test_tasks_import_with_a_good_out(tmp_path, capsys):
    out = tmp_path / "imported"
    argv = ["tasks", "import", "dabstep", "--src", str(DABSTEP_MINI), "--ids", "1", "--out", str(out)]
    assert cli.main(argv) == 0
    assert capsys.readouterr().out.strip() == f"dabstep: imported 1 task(s) into {out}"


@pytest.mark.parametrize("command", [["evaluate"], ["bench", "run", "--workflow", "direct", "--model", "fake:x.json"]])
def test_the_cache_of_a_named_suite_is_checked_too(command, tmp_path, monkeypatch, capsys):
    monkeypatch.setattr("harness.evaluation.suite._build_named", no_work)
    cache = tmp_path / "cache-file"
    cache.write_text("x")
    argv = [*command, "--suite", "smoke", "--cache", str(cache), "--out", str(tmp_path / "out")]
    assert cli.main(argv) == 2
    assert f"error: --cache {cache}: is a file, not a folder" in capsys.readouterr().err
