"""Part (a) of the leakage audit: private strings (fault names and texts, evidence-probe text, reference-code
lines the worker did not run) found in a sample's messages; see :mod:`synthesis.audit`."""

from __future__ import annotations

import ast
import functools
import json
import keyword
import logging
import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.pyast import parse_python

logger = logging.getLogger(__name__)

MIN_LINE_CHARS = 25
"""A reference-code line shorter than this (stripped) is too generic to be a marker."""
MIN_TEXT_CHARS = 24
"""A prose marker (fault text, evidence comment or assertion message) shorter than this is ignored."""
MAX_NEEDLE_CHARS = 80
"""Prose markers are matched by their first this many characters besides backticked names (see :func:`text_marker`)."""
EXAMPLES = 5
"""Examples listed per part."""


# ---------------------------------------------------------------- text forms
_DECODER = json.JSONDecoder()
_TOKEN = re.compile(r"""(?P<s>'(?:\\.|[^'\\\n])*'|"(?:\\.|[^"\\\n])*")|(?<![\w.])(?P<n>[A-Za-z_]\w*)|(?P<w>\s+)""")


def _strings(value: Any) -> Iterable[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict | list):
        for item in value.values() if isinstance(value, dict) else value:
            yield from _strings(item)


def decoded(text: str) -> str:
    """``text`` followed by the string values of every JSON object that starts a line of it (decoded: quotes and
    newlines unescaped), so that code inside a tool call or a tool result reads as code. A text without a backslash
    has no escapes: it is its own decoding."""
    if "\\" not in text:
        return text
    parts = [text]
    end = 0
    for match in re.finditer(r"^\{", text, re.M):
        if match.start() < end:
            continue
        try:
            value, end = _DECODER.raw_decode(text, match.start())
        except ValueError:
            continue
        parts.extend(_strings(value))
    return "\n".join(parts)


def prose(text: str) -> str:
    """Whitespace collapsed to single spaces."""
    return " ".join(text.split())


def _skeleton_token(match: re.Match[str]) -> str:
    if match["s"] is not None:
        return match["s"]
    if match["n"] is not None:
        return match["n"] if keyword.iskeyword(match["n"]) else "V"
    return " "


def skeleton(code: str) -> str:
    """The code skeleton of ``code``, line by line: each bare name (not an attribute, not a keyword) becomes ``V``,
    whitespace runs become one space; strings, attributes, numbers and punctuation stay."""
    return "\n".join(_TOKEN.sub(_skeleton_token, line.strip()) for line in code.split("\n"))


def _specific(skeleton_line: str) -> bool:
    """A skeleton line that says enough to be a marker (not ``V = V(V)``)."""
    return len(re.sub(r"\bV\b|[^A-Za-z0-9]", "", skeleton_line)) >= 8


# ---------------------------------------------------------------- private strings
@dataclass(frozen=True, eq=False)
class Marker:
    """One private string. ``needle``: the form searched (prose, a code skeleton, or a word for ``word`` markers)."""

    kind: str
    text: str
    needle: str
    code: bool = False
    word: bool = False

    @functools.cached_property
    def anchor(self) -> str:
        """A piece of the needle that every text holding it holds verbatim (a prose needle's lowercase; a code
        needle's longest piece without whitespace or ``V``): checked before the costlier match."""
        if not self.code:
            return self.needle.lower()
        return max(re.split(r"\bV\b|\s+", self.needle), key=len)


class MarkerSet:
    """Finds which of a list of markers occur in a text (the indices into ``markers``)."""

    def __init__(self, markers: Sequence[Marker]):
        self.markers = list(markers)
        self.plain = [(i, m.needle) for i, m in enumerate(self.markers) if not m.code and not m.word]
        self.words = [
            (i, m.anchor, re.compile(rf"(?<![A-Za-z0-9_]){re.escape(m.needle)}(?![A-Za-z0-9_])", re.I))
            for i, m in enumerate(self.markers)
            if m.word and not m.code
        ]
        self.code = [(i, m.anchor, m.needle) for i, m in enumerate(self.markers) if m.code]

    def find(self, text: str) -> frozenset[int]:
        raw = decoded(text)
        flat = prose(raw)
        hits = [i for i, needle in self.plain if needle in flat]
        if self.words:
            lower = flat.lower()
            hits += [i for i, anchor, pattern in self.words if anchor in lower and pattern.search(flat)]
        codes = [(i, anchor, needle) for i, anchor, needle in self.code if anchor in raw]
        if codes:  # skeletons of the lines that hold an anchor only: a needle is one line
            anchors = {anchor for _, anchor, _ in codes}
            shape = skeleton("\n".join(line for line in raw.split("\n") if any(a in line for a in anchors)))
            hits += [i for i, _, needle in codes if needle in shape]
        return frozenset(hits)


_QUOTED_NAME = re.compile(r"`[^`\s]+`")


def text_marker(kind: str, text: str) -> Marker | None:
    """A prose marker of ``text`` (None when shorter than :data:`MIN_TEXT_CHARS`). The needle is the text's start
    up to :data:`MAX_NEEDLE_CHARS` characters *besides* the backticked names in it: a variable name is public (the
    worker's code shows it), so a needle that is mostly a long name would match the manager's own words about that
    variable."""
    text = prose(text)
    if len(text) < MIN_TEXT_CHARS:
        return None
    end = MAX_NEEDLE_CHARS
    for match in _QUOTED_NAME.finditer(text):
        if match.start() >= end:
            break
        end += match.end() - match.start()
    return Marker(kind, text, text[:end])


def fault_type_markers(names: Iterable[str]) -> list[Marker]:
    """Whole-word markers of the fault type names, and of the names with spaces for underscores."""
    markers = []
    for name in sorted(set(names)):
        markers.append(Marker("fault_type", name, name, word=True))
        if "_" in name:
            markers.append(Marker("fault_type", name, name.replace("_", " "), word=True))
    return markers


def _statements(body: Sequence[ast.stmt]) -> Iterable[ast.stmt]:
    """Every statement of ``body``, nested ones included (expressions are not walked: cheap on long probes)."""
    for node in body:
        yield node
        for name in ("body", "orelse", "finalbody", "handlers"):
            yield from _statements(getattr(node, name, None) or [])


@functools.lru_cache(maxsize=4096)
def evidence_code_strings(code: str) -> tuple[str, ...]:
    """The comment lines and the string constants of the assertion messages of an evidence probe."""
    out = [line.strip().lstrip("#").strip() for line in code.split("\n") if line.strip().startswith("#")]
    try:
        tree = parse_python(code)
    except SyntaxError:
        return tuple(out)
    for node in _statements(tree.body):
        if isinstance(node, ast.Assert) and node.msg is not None:
            out += [n.value for n in ast.walk(node.msg) if isinstance(n, ast.Constant) and isinstance(n.value, str)]
    return tuple(out)


def reference_markers(code: str) -> list[Marker]:
    """Code-skeleton markers of the lines of private reference code (see the module docstring)."""
    markers = []
    for line in code.split("\n"):
        line = line.strip()
        if len(line) < MIN_LINE_CHARS or line.startswith("#"):
            continue
        shape = skeleton(line)
        if _specific(shape):
            markers.append(Marker("reference_code", line, shape, code=True))
    return markers


def private_markers(
    reference: Mapping[str, str], faults: Sequence[Mapping[str, Any]], fault_types: Iterable[str] = ()
) -> list[Marker]:
    """The markers of one task: ``fault_types`` names, each fault's texts and evidence-code strings, and the lines
    of ``reference`` (``{turn_id: code}``). ``faults``: :class:`~synthesis.faults.InjectedFault` dicts (fields
    missing in an older shard are skipped). Deduplicated by needle, the first kind in that order kept."""
    markers = fault_type_markers(fault_types)
    for fault in faults:
        markers += [text_marker("fault_text", fault.get(k) or "") for k in ("faulty_reasoning", "violated")]
        markers += [text_marker("evidence_code", s) for s in evidence_code_strings(fault.get("evidence_code") or "")]
    for code in reference.values():
        markers += reference_markers(code)
    unique: dict[tuple[str, bool, bool], Marker] = {}
    for marker in markers:
        if marker is not None:
            unique.setdefault((marker.needle, marker.code, marker.word), marker)
    return list(unique.values())


@dataclass
class TaskSecrets:
    """What the auditor knows of one task: its markers, its public text and the worker-visible text of each run.

    ``visible``: run key (the ``fault_id`` of the run's samples; "" for the clean run) -> ``[(step_id, text)]`` of
    the run's worker steps (code and outputs)."""

    task_id: str
    markers: list[Marker]
    public: str = ""
    visible: dict[str, list[tuple[int, str]]] = field(default_factory=dict)


def step_text(step: Mapping[str, Any]) -> str:
    """The manager-visible text of one worker step of an episode record: its code, outputs, results and variables."""
    execution = step.get("execution") or {}
    parts = [step.get("code") or ""]
    parts += [str(execution.get(k) or "") for k in ("stdout_tail", "stderr_tail", "error_message")]
    parts.append(json.dumps(execution.get("results") or [], ensure_ascii=False))
    parts += [str(v.get("summary") or "") for v in execution.get("variables") or []]
    parts.append(json.dumps(step.get("answer"), ensure_ascii=False))
    return "\n".join(parts)


def _config_and_steps(line: str) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """An episode record's ``config`` and ``worker_steps`` from its JSON line. The record writes these fields before
    the large ``activations``, so they are decoded alone; any other layout is parsed whole."""
    values = []
    for key in ('"config": ', '"worker_steps": '):
        at = line.find(key)
        if at < 0 or at > line.find('"activations": '):
            record = json.loads(line)
            return record.get("config") or {}, record.get("worker_steps") or []
        values.append(_DECODER.raw_decode(line, at + len(key))[0])
    return values[0], values[1]


def task_secrets(
    task_dir: Path, shard: Mapping[str, Any], episode_lines: Mapping[str, Sequence[bytes]], fault_types: Iterable[str]
) -> TaskSecrets:
    """The secrets of a good shard's task: the reference code and public turns read from ``task_dir`` (the task folder
    the run wrote; unreadable: logged, and the task is audited without them), the faults of the shard's outcomes
    (kept and dropped), and the worker steps of the ``clean`` and ``gold`` episode records in ``episode_lines`` (JSON
    lines by branch, as :func:`synthesis.export.episode_lines`)."""
    from harness.tasks import load_task

    try:
        task = load_task(task_dir)
        reference = {turn_id: ref.code for turn_id, ref in task.load_answers().items()}  # type: ignore[union-attr]
        turns = task.turns
    except (ValueError, OSError) as error:  # the audit must not fail a finished synthesis: audit without them
        logger.warning("audit: task folder %s unreadable (%s); no reference-code markers for it", task_dir, error)
        reference, turns = {}, []
    public = [text for turn in turns for text in (turn.question, turn.context or "")]
    public += [text or "" for turn in turns for c in turn.constraints for text in (c.text, c.code)]
    faults = [o.get("injected") or o.get("fault") or {} for o in shard.get("outcomes", [])]
    visible: dict[str, list[tuple[int, str]]] = {}
    for branch in ("clean", "gold"):
        for line in episode_lines.get(branch, []):
            config, steps = _config_and_steps(line.decode() if isinstance(line, bytes) else line)
            visible[config.get("fault_id") or ""] = [(int(s["step_id"]), step_text(s)) for s in steps]
    markers = private_markers(reference, faults, fault_types)
    return TaskSecrets(shard["task_id"], markers, "\n".join(public), visible)


# ---------------------------------------------------------------- (a) markers
def _role(message: Mapping[str, str]) -> str:
    content = message.get("content") or ""
    return "tool" if message.get("role") == "user" and content.startswith("<tool_response>") else message["role"]


class _TaskScan:
    """Scans the rows of one task; caches the markers found per message content and the allowed set per run/turn."""

    def __init__(self, secrets: TaskSecrets, public: str):
        self.secrets = secrets
        self.set = MarkerSet(secrets.markers)
        self.found: dict[str, frozenset[int]] = {}
        self.seen: dict[str, int] = {}
        self.public = self.set.find(secrets.public + "\n" + public)
        self.steps: dict[str, list[tuple[int, frozenset[int]]]] = {}
        self.allowed_cache: dict[tuple[str, int | None], frozenset[int]] = {}

    def markers_in(self, text: str) -> frozenset[int]:
        if text not in self.found:
            self.found[text] = self.set.find(text)
        return self.found[text]

    def allowed(self, run: str, seen: int | None) -> frozenset[int]:
        """The markers the manager may see in run ``run`` once shown its steps up to id ``seen`` (None: all)."""
        key = (run, seen)
        if key not in self.allowed_cache:
            if run not in self.steps:
                self.steps[run] = [(k, self.markers_in(text)) for k, text in self.secrets.visible.get(run, [])]
            upto = [found for k, found in self.steps[run] if seen is None or k <= seen]
            self.allowed_cache[key] = self.public.union(*upto)
        return self.allowed_cache[key]


def seen_step(message: Mapping[str, str]) -> int:
    """The largest worker step id an activation message's observation shows (``pending_end_step``, the draft's and
    the committed states' ``source_step_end``); -1 for any other message."""
    content = message.get("content") or ""
    start = content.find("## Observation\n")
    if message["role"] != "user" or start < 0:
        return -1
    try:
        obs, _ = _DECODER.raw_decode(content, start + len("## Observation\n"))
    except ValueError:
        return -1
    states = [obs.get("current_draft") or {}, *(obs.get("committed_state_index") or [])]
    values = [obs.get("pending_end_step"), *(state.get("source_step_end") for state in states)]
    return max([v for v in values if isinstance(v, int)], default=-1)


def markers_section(
    rows: Sequence[Mapping[str, Any]], secrets: Mapping[str, TaskSecrets], examples: int = EXAMPLES
) -> dict[str, Any]:
    """Part (a): ``markers_found`` (pairs of a sample and a private string in it that the manager could not see; a
    string found inside a longer one found in the same sample is not counted again), ``samples_with_markers``,
    ``in_assistant`` (of those pairs, the ones in a gold assistant message: what SFT teaches), counts ``by_kind`` and
    ``by_role`` (the first message holding it), and ``examples`` (the first of each kind, then of further samples)."""
    system = "\n".join(sorted({m["content"] for r in rows for m in r["messages"] if m["role"] == "system"}))
    scans: dict[str, _TaskScan] = {}
    found = 0
    assistant = 0
    samples_with = 0
    by_kind: Counter[str] = Counter()
    by_role: Counter[str] = Counter()
    first_of_kind: dict[str, dict[str, Any]] = {}
    first_of_sample: list[dict[str, Any]] = []
    for index, row in enumerate(rows):
        task_id = row["task_id"]
        if task_id not in scans:
            scans[task_id] = _TaskScan(secrets.get(task_id) or TaskSecrets(task_id, []), system)
        scan = scans[task_id]
        markers = scan.secrets.markers
        first: dict[int, tuple[int, str]] = {}
        in_assistant: set[int] = set()
        seen = -1
        for position, message in enumerate(row["messages"]):
            content = message.get("content") or ""
            if content not in scan.seen:
                scan.seen[content] = seen_step(message)
            seen = max(seen, scan.seen[content])
            hits = scan.markers_in(content) - scan.allowed(row.get("fault_id") or "", seen)
            for i in hits:
                first.setdefault(i, (position, _role(message)))
                if message["role"] == "assistant":
                    in_assistant.add(i)
        kept = [
            i for i in first
            if not any(j != i and markers[j].code == markers[i].code and markers[i].needle in markers[j].needle
                       for j in first)
        ]  # fmt: skip
        samples_with += bool(kept)
        for i in sorted(kept, key=lambda i: first[i][0]):
            marker, (position, role) = markers[i], first[i]
            found += 1
            by_kind[marker.kind] += 1
            by_role[role] += 1
            assistant += i in in_assistant
            example = {
                "sample": index, "task_id": task_id, "turn_id": row.get("turn_id"), "fault_id": row.get("fault_id"),
                "control": row.get("control"), "kind": marker.kind, "string": marker.text[:160], "message": position,
                "role": role,
            }  # fmt: skip
            first_of_kind.setdefault(marker.kind, example)
            if len(first_of_sample) < examples and all(e["sample"] != index for e in first_of_sample):
                first_of_sample.append(example)
    listed = list(first_of_kind.values())
    listed += [e for e in first_of_sample if e not in listed]
    return {
        "samples": len(rows),
        "markers_found": found,
        "samples_with_markers": samples_with,
        "share_of_samples": samples_with / len(rows) if rows else None,
        "in_assistant": assistant,
        "by_kind": dict(sorted(by_kind.items())),
        "by_role": dict(sorted(by_role.items())),
        "markers_per_task": sum(len(s.secrets.markers) for s in scans.values()) / max(len(scans), 1),
        "examples": listed[: max(examples, len(first_of_kind))],
    }


def find_markers(
    rows: Sequence[Mapping[str, Any]], strings: Iterable[str], visible: str = "", examples: int = EXAMPLES
) -> dict[str, Any]:
    """:func:`markers_section` for planted ``strings`` (prose markers of kind ``planted``, in every task), with
    ``visible`` as text every sample may show (the public side)."""
    markers = [m for m in (text_marker("planted", s) for s in strings) if m is not None]
    secrets = {row["task_id"]: TaskSecrets(row["task_id"], markers, visible) for row in rows}
    return markers_section(rows, secrets, examples)
