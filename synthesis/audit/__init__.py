"""Leakage audit of a synthesis run: do the gold manager's samples hold, or decide from, what the manager cannot see?

The gold decisions (the SFT targets) must be a function of the manager's own prompt and tool results. This module
measures how far a run's samples are from that, over the dataset rows that :mod:`synthesis.export` writes
(``messages``, ``control``, ``label``, ``kind``, ``task_id``, ``turn_id``, ``fault_id``, ``fault_type``) and, for the
private side, the task folders, the shards' fault records and the episode records. Four parts, one dict each:

- **markers** (:mod:`synthesis.audit.markers`): private strings found in any message of a sample (system, activation,
  tool calls, tool results and the gold targets alike). The private strings of a task (:func:`private_markers`): the
  fault type names of :data:`synthesis.faults.FAULT_TYPES` (as whole words, any case, also with spaces for
  underscores); each fault's ``faulty_reasoning`` and ``violated`` texts; the comment lines and assertion-message
  strings of each fault's ``evidence_code``; and each line of the task's private reference code (at least
  :data:`MIN_LINE_CHARS` characters stripped), matched rename-invariantly as a *code skeleton* (every bare name becomes
  ``V``; strings, attributes, keywords and numbers stay), so ``chk_x = chk_df['a'].sum()`` matches the reference line
  ``x = df['a'].sum()``. A string found in a sample is NOT a leak when it also occurs in what the manager can see
  without it: the task's public text (questions, contexts, constraint texts and code), the system prompts, or the code
  and outputs of the worker steps of the sample's own run that the observations before that message have reached (step
  ids up to the largest ``pending_end_step`` / ``source_step_end`` shown so far). So reference lines the worker itself
  ran (a clean run runs the reference code) are not leaks; the correct version of a line the fault changed, shown
  before the worker's repair step re-runs it, is. JSON in a message is decoded before matching (tool calls and results
  escape quotes and newlines); prose is matched with whitespace collapsed. A string found inside a longer one found in
  the same sample counts once.
- **evidence** (:mod:`synthesis.audit.decisions`, as the next two): every sample that ends in ``REPAIR`` holds, before
  its final assistant message, a tool result that shows a violation: a ``run_check`` result whose ``passed`` is false,
  a ``run_probe`` result that ran and failed with an ``AssertionError``, or a ``check_execution`` result whose verdict
  is ``failed`` (the rule of ``synthesis.gold._violation``, written out here so the audit does not follow the audited
  code). A ``hier_checks`` sample is left out: its target is the checks tier 1 writes, not the decision.
- **twins** (:func:`twins_section`): the decision on a faulted state before any repair is the atomic sample of a
  faulted run (``fault_id`` set) at its fault's turn ending in ``REPAIR`` or ``FINALIZE_RELATIONS`` with label
  ``repair``, ``benign`` or ``undetectable``; its clean twin is the clean run's atomic sample (``fault_id`` empty) of
  the same task and turn ending in ``FINALIZE_RELATIONS``. Their pre-decision tool calls (every assistant message but
  the last, parsed as ``<tool_call>`` JSON: name and arguments; for a ``hier_checks`` sample the specs of its reply, as
  ``run_check`` calls) are compared; the post-repair re-checks (label
  ``post_repair``) are compared with the same clean twin and counted apart.
- **classifier** (:func:`classifier_section`): a bag-of-words logistic regression (numpy, binary word features of the
  tool names and argument JSON of the pre-decision calls alone) predicts ``REPAIR`` vs ``FINALIZE_RELATIONS`` at the
  first-decision check activations (atomic, those two controls, label not ``post_repair``), with grouped k-fold
  cross-validation by task (seeded): every instance is predicted by a model trained on other tasks. Its accuracy is
  compared with the majority-class share of the same instances. A decision that is a function of the visible checks'
  results, not of which checks were chosen, leaves the calls alone near the majority share.

:func:`audit` runs all four and logs the headline numbers (about 3 ms per sample on one core; each distinct message
content is scanned once per task); :func:`card_section` renders them for the dataset card.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

from synthesis.audit.decisions import classifier_section, evidence_section, twins_section
from synthesis.audit.markers import EXAMPLES, TaskSecrets, markers_section, task_secrets

__all__ = ["TaskSecrets", "audit", "card_section", "summary_lines", "task_secrets"]

logger = logging.getLogger(__name__)


# ---------------------------------------------------------------- all parts
def audit(
    rows: Sequence[Mapping[str, Any]],
    secrets: Mapping[str, TaskSecrets],
    *,
    seed: int = 0,
    examples: int = EXAMPLES,
) -> dict[str, Any]:
    """The four parts over ``rows`` (dataset rows in export order); logs the headline numbers."""
    section = {
        "markers": markers_section(rows, secrets, examples),
        "evidence": evidence_section(rows, examples),
        "twins": twins_section(rows, examples),
        "classifier": classifier_section(rows, seed),
    }
    for line in summary_lines(section):
        logger.info("audit: %s", line)
    return section


def _share(value: float | None) -> str:
    return "n/a" if value is None else f"{100 * value:.1f}%"


def summary_lines(section: Mapping[str, Any]) -> list[str]:
    """One line per part: what :func:`audit` logs and the card shows."""
    m, e, t, c = (section[k] for k in ("markers", "evidence", "twins", "classifier"))
    accuracy = (
        "n/a" if c["accuracy"] is None else f"{_share(c['accuracy'])} vs majority {_share(c['majority_accuracy'])}"
    )
    gap = "" if c["gap_points"] is None else f" ({c['gap_points']:+.1f} points)"
    return [
        f"private strings in samples: {m['markers_found']} in {m['samples_with_markers']} of {m['samples']} samples "
        f"({m['in_assistant']} in gold assistant messages); by kind {m['by_kind'] or '{}'}",
        f"REPAIR samples with visible evidence: {e['repair_with_visible_evidence']} of {e['repair_samples']} "
        f"({_share(e['share'])})",
        f"faulted decisions with the same checks as the clean twin: {t['identical']} of {t['pairs']} "
        f"({_share(t['identical_share'])}); post-repair {t['post_repair_identical']} of {t['post_repair_pairs']}",
        f"REPAIR vs FINALIZE from the tool calls alone: {accuracy}{gap} over {c['instances']} decisions, "
        f"{c['tasks']} tasks",
    ]


def card_section(section: Mapping[str, Any]) -> str:
    """The audit as a short Markdown table for the dataset card."""
    m, e, t, c = (section[k] for k in ("markers", "evidence", "twins", "classifier"))
    rows = [
        ("private strings found in samples (pairs)", m["markers_found"]),
        ("samples holding a private string", f"{m['samples_with_markers']} of {m['samples']}"),
        ("... of the pairs, in gold assistant messages", m["in_assistant"]),
        ("REPAIR samples with a violation in their tool results", f"{e['repair_with_visible_evidence']} of "
         f"{e['repair_samples']} ({_share(e['share'])})"),
        ("faulted decisions with the clean twin's exact checks", f"{t['identical']} of {t['pairs']} "
         f"({_share(t['identical_share'])})"),
        ("REPAIR vs FINALIZE from the checks alone (held-out tasks)",
         "n/a" if c["accuracy"] is None else f"{_share(c['accuracy'])} (majority {_share(c['majority_accuracy'])})"),
    ]  # fmt: skip
    table = "\n".join(f"| {name} | {value} |" for name, value in rows)
    return (
        "### Leakage audit (synthesis.audit)\n\n"
        "Do the gold decisions use only what the manager sees? Private strings: fault type names, fault texts, "
        "evidence-probe comments and messages, reference-code lines the worker did not run. "
        "See stats.json `audit`.\n\n"
        f"| measure | value |\n|---|---|\n{table}\n"
    )
