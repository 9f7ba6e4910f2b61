"""harness.config_cli: dataclass defaults < YAML file < flags; HfArgumentParser's spellings; every value checked with
the one-line messages of harness.yaml_config; and the commands that use it keep their old flags."""

from __future__ import annotations

import argparse
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import pytest

from harness.config_cli import ConfigError, add_config_arguments, given_flag, parse_config


@dataclass
class Toy:
    suite: str = field(metadata={"help": "The suite (100% required)."})
    runs: int = 1
    """Repetitions of every episode."""
    limit: int | None = None
    rate: float = 0.5
    managers: list[str] = field(default_factory=lambda: ["none", "rule"])
    report: bool = True
    strict: bool = False
    flow: Literal["turn", "segment"] | None = None
    runtime: dict[str, Any] = field(default_factory=dict)
    pairs: list[list[str]] = field(default_factory=list)
    n_resamples: int = 10

    def __post_init__(self) -> None:
        if self.runs < 1:
            raise ValueError(f"runs={self.runs}: run every episode at least once.")


@dataclass
class Other:
    suite: str = "shared"
    temperature: float = 0.0


ALIASES = {"managers": "--manager", "n_resamples": "--resamples"}


def parser(*classes: type, **kwargs: Any) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="toy")
    add_config_arguments(parser, *(classes or (Toy,)), what="toy", example="toy.yaml", **kwargs)
    return parser


def parse(*argv: str, classes: tuple[type, ...] = (), **kwargs: Any) -> tuple[Any, ...]:
    return parse_config(parser(*classes, **kwargs).parse_args(list(argv)))


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "toy.yaml"
    path.write_text(text)
    return path


def test_defaults_then_the_file_then_the_flags(tmp_path):
    path = write(tmp_path, "suite: a\nruns: 2\nlimit: 3\nmanagers: [rule]\n")
    (toy,) = parse("--config", str(path), "--runs", "5", aliases=ALIASES)
    assert (toy.suite, toy.runs, toy.limit, toy.managers, toy.rate) == ("a", 5, 3, ["rule"], 0.5)
    (toy,) = parse("--config", str(path), "--limit", "null", "--suite", "b")
    assert toy.limit is None and toy.suite == "b"


def test_hf_argument_parser_spellings():
    (toy,) = parse("--suite", "s", "--n-resamples", "7", "--runtime", "{max_actions: 2}", "--flow", "segment")
    assert toy.n_resamples == 7 and toy.runtime == {"max_actions": 2} and toy.flow == "segment"
    (toy,) = parse("--suite", "s", "--pairs", "[[a, b], [c, d]]", "--rate", "1e-3")
    assert toy.pairs == [["a", "b"], ["c", "d"]] and toy.rate == 0.001


@pytest.mark.parametrize(
    ("argv", "report", "strict"),
    [
        ([], True, False),
        (["--no-report", "--strict"], False, True),
        (["--no_report", "--strict", "yes"], False, True),
        (["--report", "false", "--strict", "0"], False, False),
        (["--report", "--no-strict"], True, False),
    ],
)
def test_bools(argv, report, strict):
    (toy,) = parse("--suite", "s", *argv)
    assert (toy.report, toy.strict) == (report, strict)


def test_lists_take_several_values_and_an_alias_one_comma_separated_value():
    assert parse("--suite", "s", "--managers", "none", "llm:http://x/v1", aliases=ALIASES)[0].managers == [
        "none",
        "llm:http://x/v1",
    ]
    assert parse("--suite", "s", "--manager", "none, rule,", aliases=ALIASES)[0].managers == ["none", "rule"]
    assert parse("--suite", "s", "--managers", "a,b")[0].managers == ["a,b"]  # the list flag never splits


def test_every_problem_in_one_line_naming_the_file_and_the_flag_as_typed(tmp_path):
    path = write(tmp_path, 'suite: a\nruns: "2"\nrunz: 1\n')
    with pytest.raises(ConfigError) as info:
        parse("--config", str(path), "--resamples", "many", "--report", "maybe", aliases=ALIASES)
    message = str(info.value)
    assert "\n" not in message and message.endswith("; fix the values.")
    assert message.startswith(f"{path}: unknown key(s) ['runz'] (did you mean 'runs'?); ")
    assert "field 'runs' must be int, got str '2' (write the number without quotes)" in message
    assert "flag '--resamples' must be int, got str 'many'" in message
    assert "flag '--report' must be bool (true or false), got str 'maybe'" in message


def test_an_unknown_key_without_a_close_match_lists_the_valid_keys(tmp_path):
    path = write(tmp_path, "suite: a\nzzzq: 1\nrnus: 2\n")
    with pytest.raises(ConfigError) as info:
        parse("--config", str(path))
    assert str(info.value).startswith(f"{path}: unknown key(s) ['rnus', 'zzzq']; valid keys: [")


def test_missing_required_fields_name_their_flag_and_a_missing_file_is_named(tmp_path):
    with pytest.raises(ConfigError, match=r"^missing required field\(s\) \['suite'\]; pass --suite \.\.\. or set"):
        parse()
    with pytest.raises(ConfigError, match=r"nope.yaml: no such toy config; pass a YAML file such as toy.yaml"):
        parse("--config", str(tmp_path / "nope.yaml"))


def test_the_class_checks_run_after_the_merge_and_name_the_file(tmp_path):
    with pytest.raises(ValueError, match=r"^runs=0: run every episode at least once"):
        parse("--suite", "s", "--runs", "0")
    path = write(tmp_path, "suite: a\nruns: 0\n")
    with pytest.raises(ValueError, match=rf"^{path}: runs=0"):
        parse("--config", str(path))


def test_two_classes_share_a_field_and_skipped_fields_are_not_keys(tmp_path):
    toy, other = parse("--suite", "s", "--temperature", "0.2", classes=(Toy, Other))
    assert toy.suite == other.suite == "s" and other.temperature == 0.2
    path = write(tmp_path, "suite: a\nruntime: {x: 1}\n")
    with pytest.raises(ConfigError, match=r"unknown key\(s\) \['runtime'\]"):
        parse("--config", str(path), skip=("runtime",))
    with pytest.raises(SystemExit):
        parser(skip=("runtime",)).parse_args(["--runtime", "{}"])


def test_a_sub_command_help_and_given_flag(capsys):
    root = argparse.ArgumentParser(prog="stateguard")
    sub = root.add_subparsers(dest="command").add_parser("toy")
    add_config_arguments(sub, Toy, aliases=ALIASES)
    args = root.parse_args(["toy", "--suite", "s", "--resamples", "3"])
    assert parse_config(args)[0].n_resamples == 3
    assert given_flag(args, "n_resamples") == "--resamples" and given_flag(args, "runs") is None
    with pytest.raises(SystemExit):
        root.parse_args(["toy", "--help"])
    out = capsys.readouterr().out
    assert "The suite (100% required). (required, here or in --config)" in " ".join(out.split())
    assert "Repetitions of every episode. (default: 1)" in " ".join(out.split())  # the field docstring
    assert "--no_report, --no-report" in out


# ---------------------------------------------------------------------------------------------------------------------
# the commands keep their old flags


def command(register, *argv: str) -> argparse.Namespace:
    root = argparse.ArgumentParser()
    register(root.add_subparsers(dest="command"))
    return root.parse_args(list(argv))


def test_evaluate_keeps_every_flag_it_had():
    from harness.evaluation.cli import register

    args = command(
        register, "evaluate", "--suite", "smoke", "--worker", "scripted", "--manager", "none,rule",
        "--faults", "f.jsonl", "--runs", "2", "--limit", "1", "--out", "o", "--cache", "c", "--isolation", "none",
        "--flow", "turn", "--oracle-relations", "--executable-constraints", "--manager-max-tokens", "9",
        "--seed", "3", "--resamples", "50", "--no-report",
    )  # fmt: skip
    (config,) = parse_config(args)
    assert (config.suite, config.worker, config.managers, config.faults) == ("smoke", "scripted", ["none", "rule"],
                                                                              "f.jsonl")  # fmt: skip
    assert (config.runs, config.limit, config.out, config.cache, config.isolation, config.flow) == (
        2, 1, "o", "c", "none", "turn",
    )  # fmt: skip
    assert config.oracle_relations and config.executable_constraints and config.manager_max_tokens == 9
    assert (config.seed, config.n_resamples, config.report) == (3, 50, False)


def test_evaluate_reads_a_config_file(tmp_path):
    from harness.evaluation.cli import register

    root = Path(__file__).resolve().parents[2]
    (config,) = parse_config(command(register, "evaluate", "--config", str(root / "configs/eval/heldout-demo.yaml"),
                                     "--out", str(tmp_path), "--managers", "none"))  # fmt: skip
    assert (config.suite, config.out, config.managers) == ("heldout-demo", str(tmp_path), ["none"])
    assert (config.fault_limit, config.fault_order, config.runtime) == (2, "dependents", {"max_actions": 2})


def test_the_evaluate_command_refuses_a_bad_value_in_one_line(tmp_path, capsys):
    from harness.evaluation.cli import register

    args = command(register, "evaluate", "--suite", "smoke", "--out", str(tmp_path / "o"), "--runs", "two")
    assert args.func(args) == 2
    err = capsys.readouterr().err
    assert err == "stateguard evaluate: flag '--runs' must be int, got str 'two'; fix the value.\n"
    assert not (tmp_path / "o").exists()
    args = command(register, "evaluate", "--suite", "nope", "--out", str(tmp_path / "o"))
    assert args.func(args) == 2
    assert "--suite nope: unknown suite 'nope' and no such folder; valid suites: " in capsys.readouterr().err


def test_bench_keeps_its_flags_and_reads_workflow_fields_from_the_same_file(tmp_path):
    from harness.workflow.bench import register

    path = write(tmp_path, "max_iterations: 2\nmodel: fake:replies.json\nconcurrency: 2\n")
    args = command(
        register, "bench", "run", "--suite", "smoke", "--workflow", "react,direct", "--label", "a,b", "--out", "o",
        "--config", str(path), "--max-sandbox", "3", "--max-llm-calls", "5", "--no-report", "--temperature", "0.3",
    )  # fmt: skip
    bench, workflow = parse_config(args)
    assert (bench.workflows, bench.labels, bench.model, bench.concurrency) == (["react", "direct"], ["a", "b"],
                                                                              "fake:replies.json", 2)  # fmt: skip
    assert (bench.max_sandbox_processes, bench.max_llm_calls, bench.report) == (3, 5, False)
    assert (workflow.model, workflow.max_iterations, workflow.temperature) == ("fake:replies.json", 2, 0.3)


def test_serve_keeps_its_flags(tmp_path, capsys):
    from harness.serving import register

    (tmp_path / "config.json").write_text(json.dumps({}))
    (tmp_path / "chat_template.jinja").write_text("{{ messages }}")
    args = command(register, "serve", "--checkpoint", str(tmp_path), "--cpu", "--grace", "3", "--port", "8011",
                   "--served-model-name", "m", "--dry-run")  # fmt: skip
    (config,) = parse_config(args)
    assert (config.cpu, config.grace_s, config.port, config.served_model_name) == (True, 3.0, 8011, "m")
    assert args.func(args) == 0
    assert "--port 8011 --device cpu" in capsys.readouterr().out
