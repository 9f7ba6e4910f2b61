"""Export the shards of a synthesis run: dataset, card, stats, replayable episodes, faults.

Written under ``OUT/``:

- ``dataset/``: a :class:`datasets.DatasetDict` (``train`` / ``validation``) saved with ``save_to_disk``. The split is
  BY TASK (a task's samples all land in one split): tasks are ordered by ``sha256(seed|task_id)`` and the first
  ``validation_fraction`` of them (at least one when the fraction is > 0 and there are two or more tasks) form
  ``validation``. Columns: ``messages`` (``[{role, content}]``), ``tools`` (the function schemas, stored with the
  ``datasets.Json`` feature so each row reads back as exactly its format's list — :func:`harness.manager.actions.
  tool_schemas` or :func:`harness.manager.hier_prompts.tier1_tool_schemas`, none for ``hier_checks`` — a plain struct
  column would merge the schemas' keys and add nulls), ``kind``, ``label``, ``control`` (the control action that ends
  the sample: OPEN_STATE ... REPAIR; for ``hier_checks``, the decision taken after its checks), ``format``
  (``flat``, ``hier`` or ``hier_checks``, :data:`synthesis.samples.FORMATS`; a shard written before the formats holds
  flat samples only), ``turn_id``, ``task_id``, ``domain``, ``fault_type``, ``fault_id``, ``source``, ``n_tokens``
  (Qwen3 chat-template tokens; 0 when not counted) and ``content_hash``. Samples are deduplicated across tasks by
  ``content_hash`` (first in task order wins).
- ``README.md`` (dataset card: counts by domain, fault type, relation, kind, format, label, control action; the
  leakage audit as a table; the token-length histogram as text and as ``token_lengths.png``), ``stats.json`` (its
  ``audit`` key: :func:`synthesis.audit.audit` over the exported samples of every format, with the task folders,
  faults and episode records);
- ``episodes/clean.jsonl``, ``episodes/faulty.jsonl`` (the unmanaged faulted continuation), ``episodes/gold.jsonl``
  (the gold-repaired branch): EpisodeRecords linked by ``task_id`` and ``config.fault_id``; ``tasks/<task_id>/``
  holds the task folders they replay on;
- ``episodes/index.jsonl``: one line per clean task and per kept fault, in shard order, so the replay pool
  (:class:`envs.pool.ReplayPool`) needs no shard parsing: ``id`` (the fault id; the clean record's episode id for a
  clean line), ``kind`` (clean|fault), ``task_id``, ``task_dir`` (relative to the output folder), ``episodes``
  (``{branch: episode_id}`` of the records: clean; or gold and faulty), ``fault`` (the shared faults-format dict, or
  null), ``fault_info`` (``turn_id, fault_type, variables, error_variable, benign``; null for a clean line) and
  ``injected`` (the full :class:`~synthesis.faults.model.InjectedFault` dict the gold policy needs, when the shard
  holds it);
- ``faults.jsonl``: the kept faults in the shared format (:mod:`harness.worker.faults`), a harmful one with
  ``detectable`` (whether the gold manager's checks revealed it at its turn; evaluation splits fault detection by it).

A shard or episode-records file that cannot be read (a truncated gzip, bad JSON, a list where an object belongs, keys
missing) raises ``ValueError`` naming the file (and the line) and the fix: delete the task's shard and episode records
and re-run with the same ``--out``, which synthesizes that task again.

Deterministic: no timestamps or random ids; every duration is zeroed (see :mod:`synthesis.runs`); the dataset's
fingerprint is the hash of its rows.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import zlib
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from harness.jsonl import dumps
from synthesis.audit import TaskSecrets, audit, card_section, task_secrets
from synthesis.shards import EPISODE_BRANCHES, episodes_path

if TYPE_CHECKING:
    from synthesis.config import SynthesisConfig

COLUMNS = (
    "kind",
    "label",
    "control",
    "format",
    "turn_id",
    "task_id",
    "domain",
    "fault_type",
    "fault_id",
    "source",
    "content_hash",
)
HISTOGRAM_BINS = (512, 1024, 2048, 4096, 8192, 16384, 32768, 65536, 131072)


SHARD_KEYS = ("task_id", "index", "error")
GOOD_SHARD_KEYS = ("task", "outcomes", "samples", "sample_drops")


def fault_line(outcome: Mapping[str, Any]) -> dict[str, Any]:
    """The ``faults.jsonl`` line of a kept fault: the fault, plus ``detectable`` for a harmful one (None: benign)."""
    detectable = outcome.get("detectable")
    return {**outcome["fault"], **({"detectable": detectable} if detectable is not None else {})}


def _redo(path: Path, task_id: str) -> str:
    """The fix for an unreadable file of the task ``task_id`` in the shards folder of ``path``."""
    return (
        f"delete {path.parent / (task_id + '.json.gz')} and {path.parent / (task_id + '.episodes.jsonl.gz')}, then "
        "re-run with the same --out to synthesize that task again"
    )


def read_shard(path: Path) -> dict[str, Any]:
    """The shard at ``path``; ``ValueError`` naming the file and the fix when it is unreadable or not a shard."""
    path = Path(path)
    fix = _redo(path, path.name.removesuffix(".json.gz"))
    try:
        shard = json.loads(gzip.decompress(path.read_bytes()))
    except (EOFError, OSError, zlib.error, ValueError) as error:  # truncated, not gzip, not JSON
        raise ValueError(f"{path}: unreadable shard ({type(error).__name__}: {error}); {fix}.") from None
    if not isinstance(shard, dict):
        raise ValueError(f"{path}: the shard is a JSON {type(shard).__name__}, not an object; {fix}.")
    missing = [k for k in (*SHARD_KEYS, *(GOOD_SHARD_KEYS if shard.get("error") is None else ())) if k not in shard]
    if missing or not isinstance(shard["task_id"], str):
        raise ValueError(f"{path}: not a complete shard (missing {missing or 'a string task_id'}); {fix}.")
    return shard


def read_shards(paths: Sequence[Path], parsed: Mapping[Path, dict[str, Any]] | None = None) -> list[dict[str, Any]]:
    """The shards at ``paths`` in job order; ``parsed``: shards already read (by path), taken as they are."""
    parsed = parsed or {}
    shards = [parsed[Path(p)] if Path(p) in parsed else read_shard(p) for p in paths]
    return sorted(shards, key=lambda s: s["index"])


def split_tasks(task_ids: Sequence[str], fraction: float, seed: int) -> set[str]:
    """The validation task ids (see the module docstring)."""
    if fraction <= 0 or len(task_ids) < 2:
        return set()
    ordered = sorted(task_ids, key=lambda t: hashlib.sha256(f"{seed}|{t}".encode()).hexdigest())
    n = min(max(1, round(fraction * len(ordered))), len(ordered) - 1)
    return set(ordered[:n])


def _features() -> Any:
    from datasets import Features, Json, List, Value

    return Features(
        {
            "messages": List({"role": Value("string"), "content": Value("string")}),
            "tools": Json(),
            **{name: Value("string") for name in COLUMNS},
            "n_tokens": Value("int64"),
        }
    )


def _dataset(rows: list[dict[str, Any]]) -> Any:
    from datasets import Dataset

    features = _features()
    if rows:  # columns in the features' order, as in an empty split
        table = Dataset.from_list([{name: row[name] for name in features} for row in rows], features=features)
    else:  # from_list([]) drops the schema; an empty split keeps its columns
        table = Dataset.from_dict({name: [] for name in features}, features=features)
    digest = hashlib.sha256("\n".join(r["content_hash"] for r in rows).encode()).hexdigest()[:16]
    return Dataset(table.data, info=table.info, fingerprint=digest)


def histogram(lengths: Sequence[int]) -> list[tuple[str, int]]:
    """Counts of token lengths per bin ``(<= 512, <= 1024, ...)``."""
    bins: list[tuple[str, int]] = []
    low = 0
    for high in HISTOGRAM_BINS:
        bins.append((f"{low + 1}-{high}", sum(low < n <= high for n in lengths)))
        low = high
    bins.append((f">{low}", sum(n > low for n in lengths)))
    return bins


def _text_histogram(lengths: Sequence[int]) -> str:
    bins = [(label, n) for label, n in histogram(lengths) if n]
    top = max((n for _, n in bins), default=1)
    return "\n".join(f"{label:>13} | {'#' * max(1, round(40 * n / top)):<40} {n}" for label, n in bins)


def _table(title: str, counts: dict[str, int]) -> str:
    rows = "\n".join(f"| {k} | {v} |" for k, v in sorted(counts.items()))
    return f"### {title}\n\n| value | count |\n|---|---|\n{rows}\n"


def _count(items: Sequence[Any]) -> dict[str, int]:
    return dict(sorted(Counter(str(i) for i in items).items()))


def export(
    out: Path,
    shard_paths: Sequence[Path],
    config: SynthesisConfig,
    skipped: Sequence[str],
    parsed: Mapping[Path, dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """Write every output of ``out`` from its shards; returns the stats (also written to ``stats.json``).
    ``parsed``: shards already read (the pipeline reads each as its worker finishes, while the others still run)."""
    from datasets import DatasetDict
    from datasets.utils.logging import disable_progress_bar

    from synthesis.faults import FAULT_TYPES

    disable_progress_bar()  # the pipeline has its own progress bar
    shards = read_shards(shard_paths, parsed)
    good = [s for s in shards if s["error"] is None]
    errors = [s["error"] for s in shards if s["error"] is not None]
    validation = split_tasks([s["task_id"] for s in good], config.validation_fraction, config.seed)
    seen: set[str] = set()
    rows: dict[str, list[dict[str, Any]]] = {"train": [], "validation": []}
    drops = Counter()
    for shard in good:
        drops.update(shard["sample_drops"])
        for sample in shard["samples"]:
            if sample["content_hash"] in seen:
                drops["duplicate"] += 1
                continue
            seen.add(sample["content_hash"])
            split = "validation" if shard["task_id"] in validation else "train"
            sample.setdefault("format", "flat")  # a shard written before the formats
            rows[split].append({k: sample[k] for k in ("messages", "tools", "n_tokens", *COLUMNS)})
    dataset = DatasetDict({name: _dataset(split_rows) for name, split_rows in rows.items()})
    # One shard per empty split: by default datasets writes none for it, and load_from_disk then fails (datasets 5.2)
    shards = {name: 1 for name, split_rows in rows.items() if not split_rows}
    dataset.save_to_disk(str(out / "dataset"), num_shards=shards or None)

    episodes = out / "episodes"
    episodes.mkdir(parents=True, exist_ok=True)
    by_branch: dict[str, list[bytes]] = {branch: [] for branch in EPISODE_BRANCHES}
    secrets: dict[str, TaskSecrets] = {}
    for shard in good:
        lines_of = episode_lines(out, shard)
        for branch, lines in lines_of.items():
            by_branch[branch] += lines
        secrets[shard["task_id"]] = task_secrets(out / "tasks" / shard["task_id"], shard, lines_of, FAULT_TYPES)
    for branch, lines in by_branch.items():
        (episodes / f"{branch}.jsonl").write_bytes(b"".join(line + b"\n" for line in lines))
    (episodes / "index.jsonl").write_text(
        "".join(dumps(line, sort_keys=True) + "\n" for line in episode_index(good)),
        encoding="utf-8",
    )
    outcomes = [{**o, "task_id": s["task_id"], "domain": s["task"]["domain"]} for s in good for o in s["outcomes"]]
    kept = [o for o in outcomes if o["kept"]]
    (out / "faults.jsonl").write_text("".join(dumps(fault_line(o)) + "\n" for o in kept), encoding="utf-8")
    samples = [r for split in rows.values() for r in split]
    trajectories = len(good) + len(kept)
    stats = {
        "trajectories": trajectories,
        "tasks": {"ok": len(good), "failed": len(errors), "validation": sorted(validation)},
        "trajectories_by_fault_type": _count(["none"] * len(good) + [o["fault_type"] for o in kept]),
        "trajectories_by_domain": _count([s["task"]["domain"] for s in good] + [o["domain"] for o in kept]),
        "faults": {
            "candidates": len(outcomes),
            "by_outcome": _count(["kept" if o["kept"] else f"dropped: {o['reason']}" for o in outcomes]),
            "kept_by_type": _count([o["fault_type"] for o in kept]),
            "kept_by_relation": _count([o["relation"] for o in kept]),
            "dropped_by_type_and_reason": _count(
                [f"{o['fault_type']}: {o['reason']}" for o in outcomes if not o["kept"]]
            ),
            "detectability_by_type": _detectability(kept),
        },
        "turn_relations": _count([r for s in good for r in s["task"]["relations"]]),
        "samples": {
            "total": len(samples),
            "train": len(rows["train"]),
            "validation": len(rows["validation"]),
            "by_kind": _count([r["kind"] for r in samples]),
            "by_format": _count([r["format"] for r in samples]),
            "by_label": _count([r["label"] for r in samples]),
            "by_control": _count([r["control"] for r in samples]),
            "by_domain": _count([r["domain"] for r in samples]),
            "by_fault_type": _count([r["fault_type"] for r in samples]),
            "dropped": dict(sorted(drops.items())),
            "token_histogram": [list(pair) for pair in histogram([r["n_tokens"] for r in samples])],
            "max_tokens": max((r["n_tokens"] for r in samples), default=0),
        },
        "audit": audit(samples, secrets, seed=config.seed),
        "errors": errors,
        "skipped_inputs": list(skipped),
        "config": config.output_dict(),
    }
    (out / "stats.json").write_text(json.dumps(stats, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    plot_token_lengths([r["n_tokens"] for r in samples], out / "token_lengths.png")
    (out / "README.md").write_text(_card(stats, samples), encoding="utf-8")
    return stats


def episode_lines(out: Path, shard: dict[str, Any]) -> dict[str, list[bytes]]:
    """A good shard's episode records by branch, as the JSON lines the worker wrote (not parsed). A shard written
    before the records moved beside it holds them itself (``episodes``)."""
    if "episodes" in shard:
        return {b: [line.encode() for line in shard["episodes"][b]] for b in EPISODE_BRANCHES}
    path = episodes_path(out, shard["task_id"])
    try:
        lines = gzip.decompress(path.read_bytes()).split(b"\n")
    except (EOFError, OSError, zlib.error) as error:  # missing, truncated, not gzip
        raise ValueError(
            f"{path}: unreadable episode records ({type(error).__name__}: {error}); {_redo(path, shard['task_id'])}."
        ) from None
    counts = [len(shard["episode_ids"][b]) for b in EPISODE_BRANCHES]
    if len(lines) != sum(counts) + 1 or lines[-1]:
        raise ValueError(
            f"{path}: {len(lines) - 1} episode lines where the shard lists {sum(counts)}; "
            f"{_redo(path, shard['task_id'])}."
        )
    for number, line in enumerate(lines[:-1], 1):  # the records are exported unparsed: their shape is checked
        if not (line.startswith(b"{") and line.endswith(b"}")):
            raise ValueError(f"{path}: line {number} is not a JSON object; {_redo(path, shard['task_id'])}.")
    starts = [sum(counts[:k]) for k in range(len(counts))]
    return {b: lines[start : start + n] for b, start, n in zip(EPISODE_BRANCHES, starts, counts, strict=True)}


def _episode_ids(shard: dict[str, Any]) -> dict[str, list[str]]:
    if "episode_ids" in shard:
        return shard["episode_ids"]
    return {b: [json.loads(line)["episode_id"] for line in shard["episodes"][b]] for b in EPISODE_BRANCHES}


def episode_index(shards: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """The lines of ``episodes/index.jsonl`` (see the module docstring) from the good shards, in order."""
    lines: list[dict[str, Any]] = []
    for shard in shards:
        task_id = shard["task_id"]
        base = {"task_id": task_id, "task_dir": f"tasks/{task_id}"}
        ids = _episode_ids(shard)
        clean_id = ids["clean"][0]
        lines.append({"id": clean_id, "kind": "clean", **base, "episodes": {"clean": clean_id}, "fault": None,
                      "fault_info": None, "injected": None})  # fmt: skip
        kept = [o for o in shard["outcomes"] if o["kept"]]
        for index, outcome in enumerate(kept):
            gold_id, faulty_id = ids["gold"][index], ids["faulty"][index]
            injected = outcome.get("injected")
            if injected is not None:
                error_variable = injected["error_variable"]
            else:  # an older shard: the variable the gold repair named
                gold = json.loads(shard["episodes"]["gold"][index])
                error_variable = next((r["variable"] for r in gold["repairs"]), None)
            info = {
                "turn_id": outcome["turn_id"],
                "fault_type": outcome["fault_type"],
                "variables": list(outcome["fault"].get("variables", [])),
                "error_variable": error_variable,
                "benign": outcome["benign"],
            }
            episodes = {"gold": gold_id, "faulty": faulty_id}
            lines.append({"id": outcome["fault_id"], "kind": "fault", **base, "episodes": episodes,
                          "fault": outcome["fault"], "fault_info": info, "injected": injected})  # fmt: skip
    return lines


def plot_token_lengths(lengths: Sequence[int], path: Path) -> None:
    """A bar chart of the token-length histogram (deterministic PNG: no timestamp metadata)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    bins = histogram(lengths)
    fig, ax = plt.subplots(figsize=(7, 3.2), dpi=100)
    ax.bar(range(len(bins)), [n for _, n in bins], color="#4c72b0")
    ax.set_xticks(range(len(bins)), [label for label, _ in bins], rotation=30, ha="right", fontsize=8)
    ax.set_xlabel("Qwen3 tokens per sample (chat template with tools)")
    ax.set_ylabel("samples")
    ax.set_title(f"Token lengths of {len(lengths)} samples")
    fig.tight_layout()
    fig.savefig(path, metadata={"Software": None})
    plt.close(fig)


NEW_CHECK_KINDS = ("unit_scale", "resample")
"""The check kinds that reveal unit and resampling faults (the gold manager wrote no check for them before)."""


def _detectability(kept: list[dict[str, Any]]) -> dict[str, dict[str, int]]:
    """Kept faults per type: ``detectable`` (the gold checks revealed it at its turn), ``undetectable`` (no check
    did: committed, never supervised as a repair) and ``benign``; ``new_kinds_only``: detectable faults that only a
    check of :data:`NEW_CHECK_KINDS` revealed (every failing call at the fault's turn was one of them)."""
    table: dict[str, dict[str, int]] = {}
    for o in kept:
        row = table.setdefault(o["fault_type"], {"detectable": 0, "undetectable": 0, "benign": 0, "new_kinds_only": 0})
        key = "benign" if o["benign"] else "detectable" if o.get("detectable") else "undetectable"
        row[key] += 1
        revealed = o.get("revealed_by") or []
        if key == "detectable" and revealed and set(revealed) <= set(NEW_CHECK_KINDS):
            row["new_kinds_only"] += 1
    return dict(sorted(table.items()))


def _detectability_table(table: dict[str, dict[str, int]], skipped: Sequence[str] = ()) -> str:
    if not table:
        return ""
    new = " / ".join(NEW_CHECK_KINDS)
    lines = [
        "### Kept faults: detectable from the manager's own checks\n",
        "A fault is *detectable* when a check the gold manager runs at its turn end (check_execution, the stated "
        "constraints, the checks written from the question's stated requirements) shows it; an *undetectable* one is "
        f"committed like a clean state and never supervised as a repair. *Only {new}*: the detectable faults that no "
        f"other check revealed at their turn (the gold manager wrote no {new} check before those kinds existed; a "
        "constraint then ran as its own code). Detectability without them is measured by a run with "
        "`gold_skip_check_kinds: [unit_scale, resample]`.\n",
        *([f"This run skipped the check kinds {list(skipped)} (`gold_skip_check_kinds`).\n"] if skipped else []),
        f"| fault type | detectable | only {new} | undetectable | benign |",
        "|---|---:|---:|---:|---:|",
    ]
    columns = ("detectable", "new_kinds_only", "undetectable", "benign")
    total = {c: sum(r.get(c, 0) for r in table.values()) for c in columns}
    for k, v in [*table.items(), ("**all**", total)]:
        lines.append(
            f"| {k} | {v['detectable']} | {v.get('new_kinds_only', 0)} | {v['undetectable']} | {v['benign']} |"
        )
    return "\n".join(lines) + "\n"


def _card(stats: dict[str, Any], samples: list[dict[str, Any]]) -> str:
    s = stats["samples"]
    parts = [
        "# StateGuard manager SFT data (counterfactual synthesis)\n",
        "Gold state-manager decisions over scripted (SIMULATED) worker runs with injected faults, in TRL's "
        "conversational format (`messages` + `tools`). Built by `stateguard synthesize`; see stats.json.\n",
        f"- trajectories (gold-managed episodes, clean or faulted): {stats['trajectories']}",
        f"- tasks: {stats['tasks']['ok']} ({len(stats['tasks']['validation'])} in validation; split by task)",
        f"- samples: {s['total']} (train {s['train']}, validation {s['validation']})",
        f"- samples dropped: {s['dropped'] or 'none'}\n",
        _table("Trajectories by domain", stats["trajectories_by_domain"]),
        _table("Trajectories by fault type", stats["trajectories_by_fault_type"]),
        _table("Kept faults by turn relation", stats["faults"]["kept_by_relation"]),
        _table("Turn relations in the tasks", stats["turn_relations"]),
        _table("Samples by kind", s["by_kind"]),
        _table(
            "Samples by format (flat: the `llm` manager; hier: tier 1 of the `hier` manager; hier_checks: tier 1 "
            "writing the turn's checks)",
            s["by_format"],
        ),
        _table("Samples by label", s["by_label"]),
        _table("Samples by control action (the action that ends the sample)", s["by_control"]),
        _table("Samples by domain", s["by_domain"]),
        _table("Fault outcomes", stats["faults"]["by_outcome"]),
        _detectability_table(
            stats["faults"].get("detectability_by_type", {}), stats.get("config", {}).get("gold_skip_check_kinds", [])
        ),
        *([card_section(stats["audit"])] if "audit" in stats else []),
        "### Token lengths (Qwen3 chat template with tools)\n",
        "![token lengths](token_lengths.png)\n",
        "```\n" + (_text_histogram([r["n_tokens"] for r in samples]) or "(no samples)") + "\n```\n",
        "Files: `dataset/` (load with `datasets.load_from_disk`), `episodes/{clean,faulty,gold}.jsonl` "
        "(EpisodeRecords linked by `task_id` and `config.fault_id`), `tasks/` (their task folders), `faults.jsonl` "
        "(kept faults, shared format). Durations in the episodes are zeroed for byte-identical outputs.\n",
    ]
    return "\n".join(parts)
