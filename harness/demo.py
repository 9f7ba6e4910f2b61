"""``stateguard demo``: the harness alone on the built-in task (scripted worker, checkpoints, probes); ``make demo``
runs the whole pipeline instead.

A *scripted* worker (simulated: it replays the task's reference programs; no LLM is involved) answers every turn
of a multi-turn task inside the bubblewrap sandbox; the demo shows the worker prompt (task contract), the versioned
variables each cell changed, a checkpoint and a read-only probe, then grades the answers with the task's grader.
Everything goes under ``--out``; the last line printed is one JSON summary.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

from tqdm import tqdm

BUILTIN_TASK = Path(__file__).resolve().parent / "builtin_tasks" / "retail-sales"


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "demo",
        help="run the harness demo: a built-in multi-turn task, scripted worker (simulated), sandbox, grading",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--task", type=Path, default=BUILTIN_TASK, help="a multi-turn task folder (default: built-in)")
    parser.add_argument("--out", type=Path, default=Path("runs/demo"), help="output folder")
    parser.add_argument(
        "--isolation", choices=["bwrap", "none"], default="bwrap", help="sandbox isolation (none: unsafe, warns)"
    )
    parser.set_defaults(func=run_demo)


def run_demo(args: argparse.Namespace) -> int:
    from harness.cli import prepare_out_dir
    from harness.sandbox import Sandbox, SandboxConfig, SandboxUnavailableError
    from harness.tasks import load_task
    from harness.tasks.contract import render_contract
    from harness.tasks.grading import grade_task
    from harness.tasks.profile import profile_directory

    timings: dict[str, float] = {}
    out = prepare_out_dir(args.out)

    t0 = time.perf_counter()
    task = load_task(args.task)
    if task.kind != "multi_turn":
        raise SystemExit(f"stateguard demo: {args.task} is a {task.kind} task; the demo needs a multi_turn task.")
    profile = profile_directory(task.public_dir)
    contract = render_contract(task, profile, turn_id=task.turns[0].turn_id)
    (out / "contract_turn1.md").write_text(contract)
    timings["load_s"] = time.perf_counter() - t0
    print(f"task {task.id}: {len(task.turns)} turns; worker prompt for turn 1 -> {out / 'contract_turn1.md'}")
    print("worker: scripted (SIMULATED: replays the task's reference programs, no LLM)")

    references = task.load_answers()  # the scripted worker's programs; a real worker never sees these
    answers: dict[str, Any] = {}
    transcript: list[dict[str, Any]] = []
    t0 = time.perf_counter()
    try:
        sandbox = Sandbox(SandboxConfig(isolation=args.isolation))
    except SandboxUnavailableError as exc:
        print(f"stateguard demo: {exc}", file=sys.stderr)
        return 2
    with sandbox:
        kernel = sandbox.new_kernel(public_dir=task.public_dir)
        timings["kernel_start_s"] = time.perf_counter() - t0
        checkpoint_id = None
        for turn in tqdm(task.turns, desc="turns", unit="turn"):
            result = kernel.execute(references[turn.turn_id].code)
            answers[turn.turn_id] = result.results[-1] if result.results else None
            transcript.append({"turn_id": turn.turn_id, "relation": turn.relation, **result.to_dict()})
            changed = ", ".join(f"{v.name}@v{v.version}" for v in result.variables) or "-"
            tqdm.write(
                f"  turn {turn.turn_id} ({turn.relation}): ok={result.ok} "
                f"{result.duration_s * 1000:.1f} ms  variables: {changed}"
            )
            if turn.turn_id == task.turns[0].turn_id:
                checkpoint_id = kernel.checkpoint()
        # A read-only probe (what the manager's run_probe tool does): it sees the live namespace, changes nothing.
        probe = kernel.probe("print(sales['unit_price'].max()); sales = None")
        still_there = kernel.execute("print(type(sales).__name__)")
        print(
            f"probe: max unit_price = {probe.stdout.strip()}; after the probe `sales` is still a "
            f"{still_there.stdout.strip()} (the probe's assignment did not leak)"
        )
        if checkpoint_id is not None:
            kernel.restore(checkpoint_id)
            back = kernel.execute("print(sorted(k for k in ('clean', 'by_region', 'by_cat') if k in globals()))")
            print(f"restored the checkpoint taken after turn 1: later variables present = {back.stdout.strip()}")
        kernel.close()
    timings["execute_s"] = time.perf_counter() - t0

    t0 = time.perf_counter()
    grade = grade_task(task, answers)
    timings["grade_s"] = time.perf_counter() - t0
    (out / "answers.json").write_text(json.dumps(answers, indent=2))
    (out / "grade.json").write_text(grade.to_json() + "\n")
    with (out / "transcript.jsonl").open("w") as fh:
        for row in transcript:
            fh.write(json.dumps(row, default=str) + "\n")

    print(f"\n{'turn':>4}  {'relation':<10}  {'correct':<7}")
    for turn_id, detail in grade.details.get("turns", {}).items():
        relation = next(t.relation for t in task.turns if t.turn_id == turn_id)
        print(f"{turn_id:>4}  {relation:<10}  {detail.get('correct')!s:<7}")
    print(f"grade (simulated worker): valid={grade.valid} score={grade.score}  -> {out / 'grade.json'}")
    summary = {
        "task_id": task.id,
        "simulated": True,
        "valid": grade.valid,
        "score": grade.score,
        **{k: round(v, 4) for k, v in timings.items()},
        "out": str(out),
    }
    print(json.dumps(summary))
    return 0 if grade.valid else 1
