"""Render an episode record or a training sample as one static, self-contained HTML page (pure: data in, text out).

Nothing here reads files, imports a model or computes a reward: :mod:`harness.viewer.cli` reads and tokenizes,
:mod:`synthesis.view` scores, and the results come in as data (:class:`RewardView`, :class:`TokenSpan`). The page
works offline and from ``file://``:

- one HTML document with inline CSS and one inline script (:mod:`harness.viewer.markup`); no network, no CDN, no
  fonts or images to fetch. A ``Content-Security-Policy`` meta tag allows only that one script (by its SHA-256), so
  even a ``<script>`` that slipped past escaping would not run;
- **everything from the record is escaped** (:func:`harness.viewer.markup.esc`): worker code and outputs, model
  responses and tool results are untrusted text. A lone surrogate (a model's ``\\udc00`` escape) shows as its escape
  text ``\\udc00``. Data reaches the script only through escaped ``data-`` attributes, never as script source;
- the state graph is inline SVG laid out here (:func:`state_graph_svg`): an arc diagram, one node per committed state
  in commit order, one arc per relation to an earlier state, coloured by relation type. A slider replays the store:
  "after activation k" shows the states committed up to activation k (each node, arc and table row carries the
  activation that committed it in ``data-at``); ``page.html#at=k`` opens the page at activation k;
- the script records uncaught errors in ``body[data-errors]`` and sets ``body[data-ready="1"]`` once it ran, so a
  headless browser's ``--dump-dom`` shows whether the page worked.

Episode page sections: summary, reward terms, the state store (graph, slider, states, repairs), the timeline (worker
steps with code and outputs, the hints delivered before them, manager activations with observation, responses,
parsed actions and tool results, in the order they happened: :func:`timeline`), final answers and grade, and the
checkpoint and lifecycle history. A sample page shows the token stream coloured by who produced each token.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from harness.viewer.markup import badge, details, esc, json_text, page, pre, pretty, table

RELATION_COLOURS: dict[str, str] = {
    "init": "#7f7f7f",
    "progress": "#1f77b4",
    "branch": "#2ca02c",
    "invalidate": "#d62728",
    "combine": "#9467bd",
}
"""Relation type -> arc colour (``init`` has no arc: it marks a node without an upstream state)."""
NODE_FILL = "#cfe3ff"
NODE_W, NODE_H, NODE_GAP, PAD = 72, 40, 40, 24
LONG_RESULT_LINES = 12  # longer tool results are folded


@dataclass(frozen=True)
class RewardView:
    """The reward terms of one episode, as computed by ``rewards.score_episode`` (``terms`` empty when not scored)."""

    terms: dict[str, float | None]
    weights: dict[str, float]
    total: float | None
    note: str = ""  # what the terms were computed against (the fault label), or why they were not


@dataclass(frozen=True)
class TokenSpan:
    """A run of consecutive tokens produced by the same side: the model (``model=True``, in the loss) or not."""

    text: str
    model: bool
    n_tokens: int


# ----------------------------------------------------------------------------------------------------------------
# The state store


def commit_activations(record: dict[str, Any]) -> dict[str, int]:
    """State id -> index of the activation whose ``COMMIT_STATE`` committed it.

    ``record["states"]`` lists the committed states in commit order (the runtime never removes a committed state), and
    each legal ``COMMIT_STATE`` commits the open state, so the k-th legal commit committed the k-th state. A state
    without a matching commit (a record written by another harness) is placed after the last activation.
    """
    commits = [
        int(activation.get("index", 0))
        for activation in record.get("activations") or []
        for action in activation.get("actions") or []
        if action.get("legal") and (action.get("parsed") or {}).get("name") == "COMMIT_STATE"
    ]
    last = max([int(a.get("index", 0)) for a in record.get("activations") or []], default=0)
    states = record.get("states") or []
    return {str(s.get("id")): commits[i] if i < len(commits) else last for i, s in enumerate(states)}


def _arc_height(i: int, j: int) -> int:
    """How far the arc between node slots ``i`` and ``j`` rises: longer arcs higher, so nested arcs do not overlap."""
    return min(20 + 22 * abs(j - i), 160)


def state_graph_svg(states: Sequence[dict[str, Any]], committed_at: dict[str, int]) -> str:
    """The committed states as an arc diagram: nodes left to right in commit order, arcs above them from the related
    (earlier) state to the state that declares the relation, coloured by type (:data:`RELATION_COLOURS`)."""
    position = {str(s.get("id")): i for i, s in enumerate(states)}

    def centre(i: int) -> float:
        return PAD + i * (NODE_W + NODE_GAP) + NODE_W / 2

    arcs: list[tuple[int, int, str]] = []
    for i, state in enumerate(states):
        for relation in state.get("relations") or []:
            source = position.get(str(relation.get("related_state_id")))
            if source is not None and source != i:
                arcs.append((source, i, str(relation.get("type"))))
    base = PAD + max([_arc_height(i, j) for i, j, _ in arcs], default=0)
    width = int(PAD * 2 + max(len(states), 1) * (NODE_W + NODE_GAP))
    height = int(base + NODE_H + PAD)
    markers = "".join(
        f'<marker id="arrow-{esc(t)}" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" markerHeight="7" '
        f'orient="auto-start-reverse"><path d="M0,0 L10,5 L0,10 z" fill="{c}"/></marker>'
        for t, c in RELATION_COLOURS.items()
    )
    parts = [
        f'<svg id="state-graph" xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" role="img" aria-label="state graph"><defs>{markers}</defs>'
    ]
    for i, j, kind in arcs:
        x1, x2 = centre(i), centre(j)
        h = _arc_height(i, j)
        colour = RELATION_COLOURS.get(kind, "#000000")
        dash = ' stroke-dasharray="6 4"' if kind == "invalidate" else ""
        at = max(committed_at.get(str(states[i].get("id")), 0), committed_at.get(str(states[j].get("id")), 0))
        marker = f' marker-end="url(#arrow-{esc(kind)})"' if kind in RELATION_COLOURS else ""
        parts.append(
            f'<path class="edge" data-at="{at}" data-type="{esc(kind)}" d="M{x1:.0f},{base} Q{(x1 + x2) / 2:.0f},'
            f'{base - 2 * h} {x2:.0f},{base}" fill="none" stroke="{colour}" stroke-width="3"{dash}{marker}>'
            f"<title>{esc(states[j].get('id'))} {esc(kind)} {esc(states[i].get('id'))}</title></path>"
        )
    for i, state in enumerate(states):
        sid = str(state.get("id"))
        x = PAD + i * (NODE_W + NODE_GAP)
        init = any(r.get("type") == "init" for r in state.get("relations") or [])
        stroke = ' stroke="#7f7f7f" stroke-dasharray="4 3"' if init else ' stroke="#0969da"'
        steps = f"steps {state.get('source_step_start')}-{state.get('source_step_end')}"
        parts.append(
            f'<g class="node" data-at="{committed_at.get(sid, 0)}" data-state="{esc(sid)}">'
            f'<rect x="{x}" y="{base}" width="{NODE_W}" height="{NODE_H}" rx="6" fill="{NODE_FILL}"'
            f'{stroke} stroke-width="2"/><text x="{x + NODE_W / 2:.0f}" y="{base + 17}" text-anchor="middle" '
            f'font-size="14" font-weight="600">{esc(sid)}</text><text x="{x + NODE_W / 2:.0f}" y="{base + 32}" '
            f'text-anchor="middle" font-size="10">{esc(steps)}</text><title>{esc(state.get("issue"))}</title></g>'
        )
    parts.append("</svg>")
    return "".join(parts)


def _state_rows(states: Sequence[dict[str, Any]], committed_at: dict[str, int]) -> str:
    rows, attrs = [], []
    for state in states:
        sid = str(state.get("id"))
        relations = ", ".join(
            f"{r.get('type')}" + (f" ← {r.get('related_state_id')}" if r.get("related_state_id") else "")
            for r in state.get("relations") or []
        )
        variables = "<br>".join(
            f"<b>{esc(v.get('name'))}</b> v{esc(v.get('version'))} = {esc(v.get('value'))}"
            for v in state.get("used_variables") or []
        )
        constraints = "".join(
            f"<div>{esc(c.get('text'))}</div>"
            + (pre(c["code"]) if c.get("code") else "")
            + (pre(json_text(c["check"]), "check") if c.get("check") else "")
            for c in state.get("constraints") or []
        )
        conclusions = "<br>".join(esc(c) for c in state.get("conclusions") or [])
        if constraints:
            conclusions += details("constraints", constraints)
        steps = f"{state.get('source_step_start')}-{state.get('source_step_end')}"
        rows.append(
            [
                esc(sid),
                esc(state.get("issue")),
                esc(relations),
                esc(steps),
                variables,
                conclusions,
                esc(state.get("checkpoint_id")),
                esc(committed_at.get(sid)),
            ]
        )
        attrs.append(f' data-at="{committed_at.get(sid, 0)}"')
    header = [
        "state",
        "issue",
        "relations",
        "steps",
        "variables (name, version, value)",
        "conclusions",
        "checkpoint",
        "committed at activation",
    ]
    return table(header, rows, attrs)


def _store_section(record: dict[str, Any]) -> str:
    states = record.get("states") or []
    committed_at = commit_activations(record)
    n = max([int(a.get("index", 0)) for a in record.get("activations") or []], default=0)
    legend = "".join(
        f'<span><i style="background:{c}"></i>{esc(t)}</span>' for t, c in RELATION_COLOURS.items() if t != "init"
    )
    out = ['<section id="store"><h2>State store</h2>']
    if not states:
        out.append('<p class="muted">No committed states (no manager, or none committed).</p>')
    else:
        out.append(
            f'<p><label>After activation <b id="store-at-label">{n}</b> of {n}: '
            f'<input type="range" id="store-at" min="0" max="{n}" value="{n}"></label></p>'
            f'<div class="graph">{state_graph_svg(states, committed_at)}</div>'
            f'<p class="legend">{legend}<span class="muted">dashed node: init (no upstream state)</span></p>'
            f"{_state_rows(states, committed_at)}"
        )
    repairs = record.get("repairs") or []
    if repairs:
        header = ["state", "turn", "attempt", "mode", "variable", "removed", "worker steps", "worker reaction"]
        rows = [
            [
                esc(r.get("state_id")),
                esc(r.get("turn_id")),
                esc(r.get("attempt")),
                esc(r.get("mode")),
                esc(r.get("variable")),
                esc(", ".join(map(str, r.get("removed") or []))),
                esc(", ".join(map(str, r.get("steps") or []))),
                esc(r.get("worker_reaction")),
            ]
            for r in repairs
        ]
        out.append("<h3>Repairs</h3>" + table(header, rows))
    out.append("</section>")
    return "".join(out)


# ----------------------------------------------------------------------------------------------------------------
# The timeline


def timeline(record: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """Worker steps and activations in the order they happened: ``[("step" | "activation", item), ...]``.

    The record keeps them in two lists, so each activation is placed after the last worker step it had seen: the
    observation's ``pending_end_step`` when the pending trace is non-empty, else (a turn start) just before the first
    step of its turn, else after the last step of its turn, and never before the activation preceding it. Steps the
    worker ran in answer to a repair therefore follow the activation that sent the repair.
    """
    steps = sorted(record.get("worker_steps") or [], key=lambda s: int(s.get("step_id", 0)))
    first: dict[str, int] = {}
    last: dict[str, int] = {}
    for step in steps:
        turn, sid = str(step.get("turn_id")), int(step.get("step_id", 0))
        first.setdefault(turn, sid)
        last[turn] = sid
    events: list[tuple[tuple[float, int, int], str, dict[str, Any]]] = [
        ((int(s.get("step_id", 0)), 0, i), "step", s) for i, s in enumerate(steps)
    ]
    seen = -1.0
    for i, activation in enumerate(record.get("activations") or []):
        observation = activation.get("observation") or {}
        turn = str(activation.get("turn_id"))
        if observation.get("pending_end_step") is not None:
            after = float(observation["pending_end_step"])
        elif activation.get("event_type") == "turn_start":
            after = first.get(turn, seen + 1) - 0.5
        else:
            after = float(last.get(turn, seen))
        seen = max(seen, after)
        events.append(((seen, 1, i), "activation", activation))
    events.sort(key=lambda e: e[0])
    return [(kind, item) for _, kind, item in events]


def _step_card(step: dict[str, Any], hints: Sequence[dict[str, Any]]) -> str:
    execution = step.get("execution") or {}
    ok = execution.get("ok")
    status = badge("no execution") if not execution else badge("ok", "ok") if ok else badge("error", "bad")
    meta = step.get("meta") or {}
    flags = "".join(badge(k) for k in ("faulty", "hint_received") if meta.get(k))
    if meta.get("repair"):
        flags += badge(f"repair: {meta['repair']}")
    out = [
        f'<div class="card step" id="step-{esc(step.get("step_id"))}"><b>Worker step {esc(step.get("step_id"))}'
        f"</b> · turn {esc(step.get('turn_id'))} {status}{flags}"
    ]
    for hint in hints:
        kind = str(hint.get("kind"))
        out.append(
            f'<div class="card hint {esc(kind)}"><b>Hint delivered</b> ({esc(kind)}){pre(hint.get("text"))}</div>'
        )
    if step.get("thought"):
        out.append(f'<div class="muted">{esc(step["thought"])}</div>')
    if step.get("code"):
        out.append(pre(step["code"], "code"))
    for key, label in (("stdout_tail", "stdout"), ("stderr_tail", "stderr"), ("display", "display")):
        if execution.get(key):
            out.append(f"<div>{label}:</div>{pre(execution[key], 'output')}")
    if execution.get("error_type"):
        out.append(f"<div>{badge(execution['error_type'], 'bad')} {esc(execution.get('error_message'))}</div>")
    variables = execution.get("variables") or []
    if variables:
        rows = [
            [
                esc(v.get("name")),
                esc(v.get("kind")),
                esc(v.get("version")),
                esc(v.get("type")),
                esc(v.get("shape")),
                esc(v.get("summary")),
            ]
            for v in variables
        ]
        out.append(table(["variable", "change", "version", "type", "shape", "summary"], rows))
    if step.get("answer") is not None:
        out.append(f"<div>answer:</div>{pre(json_text(step['answer']))}")
    out.append("</div>")
    return "".join(out)


def _action_html(action: dict[str, Any]) -> str:
    parsed = action.get("parsed") or {}
    name = parsed.get("name") or "(unparsed)"
    legal = badge("legal", "ok") if action.get("legal") else badge("illegal", "bad")
    out = [f"<div><b>{esc(name)}</b>{badge(action.get('kind'), str(action.get('kind')))}{legal}</div>"]
    if parsed.get("arguments"):
        out.append(pre(json_text(parsed["arguments"])))
    out.append(details("response (raw wire text)", pre(action.get("raw"))))
    if action.get("result") is not None:
        result = pretty(action["result"])
        lines = result.count("\n") + 1
        shown = pre(result, "result")
        folded = lines > LONG_RESULT_LINES
        out.append(details(f"result ({lines} lines)", shown) if folded else f"<div>result:</div>{shown}")
    return "".join(out)


def _activation_card(activation: dict[str, Any]) -> str:
    index = activation.get("index")
    head = (
        f'<div class="card act" id="activation-{esc(index)}"><b>Manager activation {esc(index)}</b> · '
        f"{esc(activation.get('event_type'))} · turn {esc(activation.get('turn_id'))}"
        f"{badge(activation.get('actor'))}"
    )
    body = [head, details("observation", pre(json_text(activation.get("observation"))))]
    body += [_action_html(action) for action in activation.get("actions") or []]
    body.append("</div>")
    return "".join(body)


def _timeline_section(record: dict[str, Any]) -> str:
    hints_at: dict[int, list[dict[str, Any]]] = {}
    for hint in record.get("hints") or []:
        hints_at.setdefault(int(hint.get("step_id") or 0), []).append(hint)
    body, turns = [], []
    for kind, item in timeline(record):
        if not turns or str(item.get("turn_id")) != turns[-1]:
            turns.append(str(item.get("turn_id")))
            body.append(f'<div class="turn" id="turn-{len(turns)}">Turn {esc(turns[-1])}</div>')
        if kind == "step":
            body.append(_step_card(item, hints_at.get(int(item.get("step_id", 0)), [])))
        else:
            body.append(_activation_card(item))
    jumps = " · ".join(f'<a href="#turn-{i}">turn {esc(t)}</a>' for i, t in enumerate(turns, start=1))
    return f'<section id="timeline"><h2>Timeline</h2><p>{jumps}</p>{"".join(body)}</section>'


# ----------------------------------------------------------------------------------------------------------------
# Pages


def _reward_section(reward: RewardView | None) -> str:
    out = ['<section id="reward"><h2>Reward terms</h2>']
    if reward is None:
        out.append('<p class="muted">Not scored.</p></section>')
        return "".join(out)
    if reward.note:
        out.append(f'<p class="muted">{esc(reward.note)}</p>')
    if reward.terms:
        rows = []
        for name, value in reward.terms.items():
            shown = "n/a" if value is None else f"{value:.3f}"
            bar = "" if value is None else f'<span class="bar" style="width:{max(0.0, min(1.0, value)) * 120:.0f}px">'
            rows.append([esc(name), esc(shown), (bar + "</span>") if bar else "", esc(reward.weights.get(name))])
        total = "n/a" if reward.total is None else f"{reward.total:.3f}"
        rows.append(["<b>total</b>", f"<b>{esc(total)}</b>", "", ""])
        out.append(table(["term", "value", "", "weight"], rows))
    out.append("</section>")
    return "".join(out)


def _errored(error: Any) -> str | None:
    """An errored episode's error (``{"type", "message"}``): its decisions are not the manager's and no metric counts
    it; None for an episode that played."""
    if not error:
        return None
    if isinstance(error, dict):
        return f"{error.get('type')}: {error.get('message')} (not counted in any metric)"
    return f"{error} (not counted in any metric)"


def _summary(record: dict[str, Any]) -> str:
    config = record.get("config") or {}
    grade = record.get("grade") or {}
    grade_details = grade.get("details") or {}
    score = grade.get("score")
    graded = f"{score:.3f}" if isinstance(score, (int, float)) else "not graded"
    if "n_correct" in grade_details:
        graded += f" ({grade_details['n_correct']}/{grade_details.get('n_turns')} turns correct)"
    faults = config.get("faults") or {}
    rows = [
        ("task", record.get("task_id")),
        ("episode", record.get("episode_id")),
        ("branch", config.get("branch")),
        ("manager", f"{config.get('manager')} ({config.get('manager_style')})"),
        ("worker", f"{config.get('worker')}{' (simulated)' if record.get('simulated') else ''}"),
        ("flow", config.get("flow")),
        ("faults", ", ".join(f"turn {t}: {f}" for t, f in faults.items()) or "none"),
        ("fault id", config.get("fault_id")),
        ("grade", graded),
        ("ERRORED", _errored(record.get("error"))),
        (
            "counts",
            f"{len(record.get('worker_steps') or [])} worker steps, {len(record.get('activations') or [])} "
            f"activations, {len(record.get('states') or [])} states, {len(record.get('hints') or [])} hints, "
            f"{len(record.get('repairs') or [])} repairs",
        ),
        ("schema", record.get("schema_version")),
    ]
    return table(None, [[f"<b>{esc(k)}</b>", esc(v)] for k, v in rows if v is not None])


def _answers_section(record: dict[str, Any]) -> str:
    turns = ((record.get("grade") or {}).get("details") or {}).get("turns") or {}
    rows = []
    for turn, answer in (record.get("final_answers") or {}).items():
        verdict = turns.get(str(turn)) or {}
        correct = verdict.get("correct")
        mark = "" if correct is None else badge("correct", "ok") if correct else badge("wrong", "bad")
        rows.append([esc(turn), pre(json_text(answer)), mark])
    out = ['<section id="answers"><h2>Final answers</h2>']
    out.append(table(["turn", "answer", "grade"], rows) if rows else '<p class="muted">No answers.</p>')
    history = []
    if record.get("checkpoints"):
        rows = [
            [esc(c.get("checkpoint_id")), esc(c.get("op")), esc(c.get("state_id")), esc(c.get("turn_id"))]
            for c in record["checkpoints"]
        ]
        history.append(details("checkpoints", table(["checkpoint", "op", "state", "turn"], rows)))
    if record.get("transitions"):
        rows = [
            [
                esc(t.get("activation")),
                esc(t.get("action")),
                esc(t.get("phase_before")),
                esc(t.get("phase_after")),
                esc(t.get("legal")),
                esc(t.get("message")),
            ]
            for t in record["transitions"]
        ]
        header = ["activation", "action", "phase before", "phase after", "legal", "message"]
        history.append(details("lifecycle transitions", table(header, rows)))
    out += history
    out.append("</section>")
    return "".join(out)


def render_episode(record: dict[str, Any], reward: RewardView | None = None) -> str:
    """The page of one episode record (the dict of an :class:`~harness.manager.episode.EpisodeRecord`)."""
    title = f"{record.get('task_id')} · {record.get('episode_id')}"
    body = (
        f"<h1>Episode {esc(title)}</h1>{_summary(record)}{_reward_section(reward)}{_store_section(record)}"
        f"{_timeline_section(record)}{_answers_section(record)}"
    )
    return page(f"StateGuard episode {title}", body)


def render_sample(spans: Sequence[TokenSpan], meta: dict[str, Any], reward: RewardView | None = None) -> str:
    """The page of one training sample: its token stream, model tokens (in the loss) coloured apart from the rest."""
    n_model = sum(s.n_tokens for s in spans if s.model)
    n_all = sum(s.n_tokens for s in spans)
    rows = [[esc(k), esc(v)] for k, v in meta.items()]
    rows.append([esc("tokens"), esc(f"{n_all} in all: {n_model} model (in the loss), {n_all - n_model} environment")])
    parts, jumps = [], []
    for span in spans:
        if span.model:
            jumps.append(f'<a href="#model-{len(jumps) + 1}">{len(jumps) + 1}</a> ({span.n_tokens})')
            anchor, cls, who = f' id="model-{len(jumps)}"', "m", "model"
        else:
            anchor, cls, who = "", "e", "environment"
        parts.append(f'<span class="{cls}"{anchor} title="{span.n_tokens} {who} token(s)">{esc(span.text)}</span>')
    body = (
        f"<h1>Training sample {esc(meta.get('sample', ''))}</h1>{table(None, rows)}"
        f"{_reward_section(reward) if reward is not None else ''}"
        '<h2>Token mask</h2><p class="legend tokens"><span class="m">model tokens (loss)</span> '
        '<span class="e">environment tokens (prompt, observations, tool results)</span></p>'
        f"<p>Model runs (tokens): {', '.join(jumps) or 'none'}</p>"
        f'<pre class="tokens" id="token-stream">{"".join(parts)}</pre>'
    )
    return page(f"StateGuard sample {meta.get('sample', '')}", body)


def render_index(title: str, entries: Sequence[tuple[str, str, str]]) -> str:
    """An index page linking one page per entry: ``(href, label, summary)``."""
    rows = [[f'<a href="{esc(href)}">{esc(label)}</a>', esc(summary)] for href, label, summary in entries]
    body = f"<h1>{esc(title)}</h1>{table(['page', 'summary'], rows)}"
    return page(title, body)
