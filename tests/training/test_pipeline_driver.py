"""The pipeline driver: stages run in order, each leaves a marker, a re-run skips finished stages and resumes at the
first unfinished one, a failing stage stops the run with its name. The stages themselves are replaced here (the real
ones are the library functions tested elsewhere, and `make demo` runs them for real)."""

from __future__ import annotations

import json
import os
import sys

import pytest

from training import pipeline
from training.pipeline import STAGES, PipelineConfig, run_pipeline


@pytest.fixture
def calls(monkeypatch):
    ran: list[str] = []

    def make(stage):
        def run(ctx):
            ran.append(stage)
            if stage == "rl" and (ctx.out / "fail-rl").exists():
                raise RuntimeError("stage rl: scripts/rl.py exited with code 1")
            return {"figure": len(ran)}

        return run

    monkeypatch.setattr(pipeline, "STAGE_FUNCTIONS", {s: make(s) for s in STAGES})
    return ran


def test_stages_run_in_order_leave_markers_and_a_rerun_skips_them(tmp_path, calls):
    summary = run_pipeline(PipelineConfig(), tmp_path)
    assert calls == list(STAGES)
    for stage in STAGES:
        marker = json.loads((tmp_path / stage / "stage.json").read_text())
        assert marker["figure"] == STAGES.index(stage) + 1 and marker["seconds"] >= 0
    assert summary["total_s"] >= 0 and set(summary["stages"]) == set(STAGES)
    calls.clear()
    again = run_pipeline(PipelineConfig(), tmp_path)
    assert calls == [] and all(again["stages"][s]["skipped"] for s in STAGES)


def test_a_failed_stage_stops_the_run_and_a_rerun_resumes_there(tmp_path, calls):
    (tmp_path / "fail-rl").write_text("")
    with pytest.raises(RuntimeError, match="stage rl"):
        run_pipeline(PipelineConfig(), tmp_path)
    assert calls == ["model", "synthesize", "sft", "rl"] and not (tmp_path / "rl" / "stage.json").exists()
    (tmp_path / "fail-rl").unlink()
    calls.clear()
    run_pipeline(PipelineConfig(), tmp_path)
    assert calls == ["rl", "evaluate"]


def test_every_pipeline_config_loads_and_names_existing_files():
    from pathlib import Path

    root = Path(pipeline.__file__).resolve().parents[1]
    configs = sorted((root / "configs" / "pipeline").glob("*.yaml"))
    assert configs
    for path in configs:
        config = PipelineConfig.from_yaml(path)
        for name in (config.synthesis, config.sft, config.rl, config.accelerate_config):
            assert config.path(name).is_file(), (path.name, name)


def test_a_config_with_an_unknown_key_is_refused(tmp_path):
    path = tmp_path / "bad.yaml"
    path.write_text("out: runs/x\nsft_steps: 3\n")
    with pytest.raises(ValueError, match="sft_steps"):
        PipelineConfig.from_yaml(path)


def test_run_logged_keeps_the_whole_output_and_follows_the_trainer_bar(tmp_path, monkeypatch):
    """The child's bytes all land in the log; the step bar (no description) drives ours, described bars do not."""
    script = (
        "import sys\n"
        "sys.stderr.write('Map: 100%|##########| 4/4 [00:00<00:00]\\n')\n"
        "for i in range(1, 9):\n"
        "    sys.stderr.write(f'\\r {i * 100 // 8}%|#   | {i}/8 [00:0{i}<00:00, 1.0s/it]')\n"
        "print('done')\n"
        "sys.exit(3)\n"
    )
    seen: list[tuple[int, int | None]] = []
    from tqdm import tqdm

    refresh = tqdm.refresh
    monkeypatch.setattr(tqdm, "refresh", lambda self, *a, **k: (seen.append((self.n, self.total)), refresh(self))[1])
    log = tmp_path / "log.txt"
    code = pipeline.run_logged([sys.executable, "-c", script], dict(os.environ), log, desc="stage x")
    assert code == 3
    text = log.read_text()
    assert text.startswith("Map: 100%") and "8/8 [00:08" in text and text.endswith("done\n")
    steps = [(n, total) for n, total in seen if total == 8]
    assert steps and steps[-1] == (8, 8)
    assert all(total != 4 for _, total in seen)  # the described Map bar is not the trainer's


def test_the_runs_report_to_trackio_outside_ci_and_to_nothing_in_ci(tmp_path, monkeypatch):
    """``report_to: auto`` (the default): the training launches get ``--report_to trackio --run_name
    <out>-<stage>`` before the config's own overrides, and the evaluation the same tracker; in CI, nothing."""
    pytest.importorskip("trackio")
    launched: list[list[str]] = []
    monkeypatch.setattr(pipeline, "launch_training", lambda script, config, args, **kw: launched.append(args))
    ctx = pipeline.Context(PipelineConfig(sft_args=["--max_steps", "2"]), tmp_path / "demo")
    monkeypatch.delenv("CI", raising=False)
    pipeline._launch(ctx, "sft", "sft.py", ctx.config.sft, ["--output_dir", "x", *ctx.config.sft_args])
    assert launched[-1] == [
        "--report_to",
        "trackio",
        "--run_name",
        "demo-sft",
        "--output_dir",
        "x",
        "--max_steps",
        "2",
    ]
    evaluation = pipeline.evaluation_config(ctx.config, ctx.stage_dir("evaluate"), ["none"], ["none"], tmp_path)
    assert (evaluation.report_to, evaluation.run_name) == ("trackio", "demo-eval")
    monkeypatch.setenv("CI", "true")
    pipeline._launch(ctx, "rl", "rl.py", ctx.config.rl, ["--output_dir", "y"])
    assert launched[-1] == ["--output_dir", "y"]
    assert pipeline.evaluation_config(ctx.config, tmp_path, ["none"], ["none"], tmp_path).report_to == "none"
    with pytest.raises(ValueError, match="report_to='mlflow': use auto or one of"):
        PipelineConfig(report_to="mlflow")


def test_a_fabricated_or_corrupt_marker_is_refused_in_one_line(tmp_path, calls):
    from training.pipeline_guard import PipelineStateError

    (tmp_path / "model").mkdir()
    (tmp_path / "model" / "stage.json").write_text(json.dumps({"checkpoint": "/anything"}))
    with pytest.raises(PipelineStateError, match=r"model/stage.json: the stage marker has no fingerprint.*"
                       r"--from-stage model, or pass a new --out"):  # fmt: skip
        run_pipeline(PipelineConfig(), tmp_path)
    (tmp_path / "model" / "stage.json").write_text('{"checkpoint": ')
    with pytest.raises(PipelineStateError, match=r"model/stage.json: the stage marker is unreadable \(JSONDecode"):
        run_pipeline(PipelineConfig(), tmp_path)
    assert calls == []  # nothing ran


def test_a_marker_of_other_inputs_or_below_an_unfinished_stage_is_refused(tmp_path, calls):
    from training.pipeline_guard import PipelineStateError

    run_pipeline(PipelineConfig(), tmp_path)
    calls.clear()
    with pytest.raises(PipelineStateError, match=r"sft/stage.json: stage sft was made from other inputs \(values "
                       r"sft_args changed\); re-run from it with --from-stage sft"):  # fmt: skip
        run_pipeline(PipelineConfig(sft_args=["--max_steps", "2"]), tmp_path)
    (tmp_path / "synthesize" / "stage.json").unlink()
    with pytest.raises(PipelineStateError, match=r"stage sft is marked done but the earlier stage synthesize is not"):
        run_pipeline(PipelineConfig(), tmp_path)
    assert calls == []


def test_from_stage_discards_it_and_the_later_stages(tmp_path, calls):
    from training.pipeline_guard import PipelineStateError

    run_pipeline(PipelineConfig(), tmp_path)
    (tmp_path / "rl" / "leftover-checkpoint").mkdir()
    calls.clear()
    run_pipeline(PipelineConfig(sft_args=["--max_steps", "2"]), tmp_path, from_stage="sft")
    assert calls == ["sft", "rl", "evaluate"] and not (tmp_path / "rl" / "leftover-checkpoint").exists()
    with pytest.raises(PipelineStateError, match=r"--from-stage sfft: no such stage; valid stages: model, synthesize"):
        run_pipeline(PipelineConfig(), tmp_path, from_stage="sfft")


def test_a_config_typo_is_caught_before_the_first_stage(tmp_path, calls, capsys):
    from harness.cli import main

    rc = main(["pipeline", "--sft", "configs/sft/tiny-cpuu.yaml", "--out", str(tmp_path)])
    err = capsys.readouterr().err
    assert rc == 2 and calls == [] and len(err.strip().splitlines()) == 1
    assert "sft: configs/sft/tiny-cpuu.yaml is not a file" in err
    rc = main(["pipeline", "--eval-suite", "heldout-demoo", "--out", str(tmp_path)])
    assert rc == 2 and calls == [] and "eval_suite='heldout-demoo': unknown suite" in capsys.readouterr().err


def test_a_second_pipeline_on_the_same_out_is_refused(tmp_path, calls):
    from harness.run_guard import OutLock, OutLockedError

    with OutLock(tmp_path), pytest.raises(OutLockedError, match="another run .* is writing to this folder"):
        run_pipeline(PipelineConfig(), tmp_path)
    assert calls == []


def test_an_evaluate_stage_with_errored_episodes_fails_instead_of_marking_done(tmp_path, monkeypatch):
    import contextlib
    from types import SimpleNamespace

    import harness.evaluation.evaluate as evaluate
    import harness.serving as serving

    monkeypatch.setattr(
        serving, "serve_in_background", lambda *a, **k: contextlib.nullcontext("http://127.0.0.1:1/v1")
    )
    monkeypatch.setattr(serving, "ServeConfig", lambda **k: SimpleNamespace(**k, base_url="http://127.0.0.1:1/v1"))
    monkeypatch.setattr(evaluate, "run_evaluation", lambda config: {"errored": {"none": 0, "llm(SFT+RL)": 2}})
    monkeypatch.setattr(pipeline, "write_eval_suite", lambda suite, cache: None)
    (tmp_path / "evaluate").mkdir()
    with pytest.raises(RuntimeError, match=r"stage evaluate: episodes errored \(llm\(SFT\+RL\): 2\)"):
        pipeline.stage_evaluate(pipeline.Context(PipelineConfig(), tmp_path))


def test_the_summary_names_the_checkpoints_and_commands_that_parse(tmp_path):
    """The next steps after the summary: the episodes file the evaluate stage writes for the RL arm, and an evaluate
    command whose flags select the stage's own episodes and runtime, with the RL checkpoint in process."""
    import shlex

    from harness.cli import build_parser
    from harness.config_cli import parse_config
    from harness.evaluation.evaluate import variant_file

    config = PipelineConfig.from_yaml(pipeline.ROOT / "configs" / "pipeline" / "demo.yaml")
    out = tmp_path / "demo"
    text = pipeline.next_steps(config, out)
    assert text.splitlines()[0] == f"Checkpoints: SFT {out / 'sft'}, SFT+RL {out / 'rl'} (the tiny base model: " \
        f"{out / 'model' / 'tiny-qwen3'})"  # fmt: skip
    commands = [shlex.split(line)[1:] for line in text.splitlines() if line.startswith("  stateguard ")]
    assert [c[0] for c in commands] == ["view", "serve", "evaluate"]
    view, serve, evaluate = commands
    assert (
        view[1]
        == str(variant_file(out / "evaluate", pipeline.RL_LABEL))
        == str(out / "evaluate/episodes/llm_SFT_RL_.jsonl")
    )
    assert serve == ["serve", "--checkpoint", str(out / "rl"), "--cpu", "--port", "8000"]
    (parsed,) = parse_config(build_parser().parse_args(evaluate))
    managers = ["none", f"llm-hf:{out / 'rl'}"]
    stage = pipeline.evaluation_config(config, out / "eval-rl", managers, managers, out / "eval-suites")
    fields = ("suite", "out", "managers", "limit", "fault_limit", "fault_order", "cache", "isolation", "runtime",
              "manager_max_tokens")  # fmt: skip
    assert {f: getattr(parsed, f) for f in fields} == {f: getattr(stage, f) for f in fields}


def test_launch_training_runs_a_script_by_path_and_a_module_with_accelerate_m(tmp_path, monkeypatch):
    commands = []
    monkeypatch.setattr(pipeline, "run_logged", lambda command, env, log, desc: commands.append(command) or 0)
    kw = {"accelerate_config": tmp_path / "acc.yaml", "log": tmp_path / "log.txt", "what": "x"}
    pipeline.launch_training("sft.py", tmp_path / "c.yaml", ["--max_steps", "2"], **kw)
    pipeline.launch_training("pkg.train", tmp_path / "c.yaml", [], **kw)
    script, module = commands
    assert script[script.index("--config_file") + 2 :] == [
        str(pipeline.ROOT / "scripts" / "sft.py"), "--config", str(tmp_path / "c.yaml"), "--max_steps", "2"
    ]  # fmt: skip
    assert module[module.index("--config_file") + 2 :] == ["-m", "pkg.train", "--config", str(tmp_path / "c.yaml")]
