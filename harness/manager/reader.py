"""The question reader: check specs from a turn's words, with no model (:func:`read_turn`).

It reads only what a manager sees: the turn's question and context, the variables the turn's step wrote (names, kinds
and frame columns, as ``check_execution`` lists them) and the same of the earlier turns (:class:`NotedTurn`, what the
reader noted in its own committed states). It never sees slots, reference code or private files. A small grammar of
phrases gives the specs of :mod:`harness.checks.spec`:

- ``have <column> above|over|at least|at most|below|under X`` -> ``filter`` on the frame the turn wrote;
  ``their total <measure>`` -> ``aggregate`` (sum) on the scalar it wrote;
- ``the total|mean|median|average <measure> per <category>`` -> ``group_aggregate``; with ``Join ... on KEY,
  keeping every ...`` (a left join) also ``join_rows`` on the joined frame; ``For <rows>, ... per <attr>`` with ``Join
  on KEY (left join)`` -> one ``group_aggregate`` through the join;
- ``Which N ... highest|largest|lowest|smallest``, ``top N``, ``the N largest`` -> ``top_k``; ``Which month had the
  highest`` -> ``top_k`` with k 1;
- ``share``/``fraction`` -> ``share``; ``IQR`` -> ``iqr_outliers`` (k from ``Q3 + K * ...``); ``missing values ... how
  many`` -> ``nan_counts``; ``Drop <rows> with no A or no B`` -> ``complete_rows``; ``normalise ... title case`` ->
  ``normalized``; ``both <a> and <b>`` / ``appear in both`` -> ``overlap``; ``per month`` -> ``resample``, ``in
  thousands`` -> ``unit_scale``; ``rounded to N decimals`` / ``Round ... to N decimals`` / ``N decimal places`` ->
  ``rounded`` (on the reported ``result``);
- revisions: ``<var> is X, not Y`` -> ``param``; ``Correction: <col> = OLD for <key col> KEY ...; the true value is
  NEW`` -> ``corrected_cell``; ``Exclude every row with <col> VALUE`` -> ``excluded_rows``, on every frame the
  revising turn wrote; ``what are <label> (turn N) now?`` re-reads turn N's words on the recomputed variables; a
  revision stands: every later turn re-checks it (latest first).

Sources come from the turns the question names (``Using the result of turn N``, ``Go back to the result of turn N``,
``Using the results of turns N, M``): their variables, chosen by the words (``the cleaned <rows>`` -> a ``*_clean``
frame; a variable whose name, underscores as spaces, the question quotes). Column words are matched against the
frames' columns (:func:`match_column`). A turn gets at most :data:`MAX_SPECS` specs: its own first, then the standing
revisions.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from harness.checks.spec import (
    Aggregate,
    CheckSpec,
    CompleteRows,
    CorrectedCell,
    ExcludedRows,
    Filter,
    GroupAggregate,
    IqrOutliers,
    JoinRows,
    NanCounts,
    Normalized,
    Overlap,
    Param,
    Resample,
    Rounded,
    Share,
    TopK,
    UnitScale,
)
from harness.manager.relations import named_turns

MAX_SPECS = 5
"""Specs per turn (with ``check_execution``, an activation of 8 actions has room for them and the decision)."""

AGG_WORDS = {"total": "sum", "sum": "sum", "mean": "mean", "average": "mean", "median": "median", "count": "count"}
OP_WORDS = (
    ("no fewer than", ">="),
    ("no less than", ">="),
    ("at least", ">="),
    ("no more than", "<="),
    ("at most", "<="),
    ("more than", ">"),
    ("greater than", ">"),
    ("above", ">"),
    ("over", ">"),
    ("exceeding", ">"),
    ("less than", "<"),
    ("fewer than", "<"),
    ("below", "<"),
    ("under", "<"),
)
_STOP = {"the", "of", "in", "a", "an", "no", "per", "and", "or", "its", "their", "values", "value", "names"}
_NUMBER = r"-?\d+(?:\.\d+)?"


@dataclass(frozen=True)
class Variable:
    """A worker variable as ``check_execution`` lists it: ``kind`` is ``frame``, ``series`` or ``scalar`` (anything
    else); ``columns`` the frame's column labels (empty when not a frame or not known)."""

    name: str
    kind: str = "scalar"
    columns: tuple[str, ...] = ()


@dataclass(frozen=True)
class NotedTurn:
    """An earlier turn as the reader noted it: its id, question, context and the variables it wrote."""

    turn_id: str
    question: str
    context: str = ""
    variables: tuple[Variable, ...] = field(default_factory=tuple)


def variable_kind(type_name: str | None) -> str:
    """``frame``/``series``/``scalar`` of a sandbox type name (``pd.DataFrame``, ``pd.Series``, ``float`` ...)."""
    text = type_name or ""
    return "frame" if text.endswith("DataFrame") else "series" if text.endswith("Series") else "scalar"


def summary_columns(summary: str) -> tuple[tuple[str, ...], bool]:
    """The columns a DataFrame summary shows (``DataFrame 10x3 columns=[a, b, c]``) and whether it cut some off."""
    match = re.search(r"columns=\[(.*)\]", summary or "")
    if not match:
        return (), False
    parts = [p.strip() for p in match.group(1).split(",") if p.strip()]
    cut = bool(parts) and parts[-1] in ("...", "…")
    return tuple(p for p in parts if p not in ("...", "…")), cut


# ---------------------------------------------------------------- words -> columns and numbers
def _tokens(text: str) -> list[str]:
    return [t for t in re.split(r"[^0-9a-z]+", text.lower()) if t and t not in _STOP]


def ident(text: str) -> str:
    """A phrase as a snake-case identifier (``unit price`` -> ``unit_price``)."""
    return "_".join(re.split(r"[^0-9a-z]+", text.lower())).strip("_")


def match_column(phrase: str, columns: Iterable[str]) -> str | None:
    """The column ``phrase`` names: an exact snake-case match, else the column sharing the most words with it (ties:
    the one with the fewest other words); None when no column shares a word."""
    columns = list(dict.fromkeys(columns))
    wanted = ident(phrase)
    if wanted in columns:
        return wanted
    words = set(_tokens(phrase))
    best: tuple[int, int] | None = None
    found = None
    for column in columns:
        parts = [p for p in column.lower().split("_") if p]
        overlap = len(words & set(parts))
        if not overlap:
            continue
        score = (overlap, -(len(parts) - overlap))
        if best is None or score > best:
            best, found = score, column
    return found


def _column(phrase: str, columns: Iterable[str]) -> str:
    """:func:`match_column`, else the phrase as an identifier."""
    return match_column(phrase, columns) or ident(phrase)


def _number(text: str) -> int | float:
    value = float(text)
    return int(value) if "." not in text and value.is_integer() else value


def _scalar(text: str) -> int | float | str:
    text = text.strip().strip("'\"")
    try:
        return _number(text)
    except ValueError:
        return text


def decimals_of(text: str) -> int | None:
    """The rounding a text asks for (``rounded to 2 decimals``, ``Round ... to 4 decimals``, ``2 decimal places``,
    ``2 d.p.``), else None."""
    match = re.search(r"\b(\d+)\s*(?:decimals?\b|decimal places|d\.p\.)", text, re.IGNORECASE)
    return int(match.group(1)) if match else None


# ---------------------------------------------------------------- the reading context
@dataclass
class _Reading:
    question: str
    context: str
    written: tuple[Variable, ...]
    sources: tuple[Variable, ...]  # the variables of the turns the question names, latest first
    known: tuple[Variable, ...]  # every variable noted so far (columns for matching)

    @property
    def text(self) -> str:
        return f"{self.question} {self.context}"

    def columns(self) -> list[str]:
        return [c for v in (*self.written, *self.sources, *self.known) for c in v.columns]

    def written_of(self, *kinds: str) -> list[Variable]:
        return [v for v in self.written if v.kind in kinds]

    def source_frame(self, column: str | None = None, exclude: Sequence[str] = ()) -> str | None:
        """The frame a turn reads, among the named turns' frames: one with ``column``; for ``For <rows>, ...`` the
        one whose name shares the most words with ``<rows>``; else the cleaned table (``*_clean``) first."""
        frames = [v for v in self.sources if v.kind == "frame" and v.name not in exclude]
        frames = sorted(frames, key=lambda v: "clean" not in v.name)
        rows = re.match(r"(?:.*?: )?For ([^,?]+),", self.question)
        if rows:
            words = set(_tokens(rows.group(1)))
            frames = sorted(frames, key=lambda v: -len(words & set(v.name.lower().split("_"))))
        if column is not None:
            frames = sorted(frames, key=lambda v: bool(v.columns) and column not in v.columns)
        return frames[0].name if frames else None

    def quoted_source(self, kinds: Sequence[str]) -> str | None:
        """The named turns' variable of ``kinds`` whose name the question quotes (underscores as spaces), else the
        first of those kinds."""
        spaced = self.question.lower()
        candidates = [v for v in self.sources if v.kind in kinds]
        for v in sorted(candidates, key=lambda v: -len(v.name)):
            if v.name.replace("_", " ").lower() in spaced:
                return v.name
        return candidates[0].name if candidates else None


def _first(variables: Sequence[Variable], hint: str = "") -> str | None:
    if hint:
        for v in variables:
            if hint in v.name:
                return v.name
    return variables[0].name if variables else None


# ---------------------------------------------------------------- the phrases of one turn
def _filter_specs(r: _Reading, decimals: int | None) -> list[CheckSpec]:
    ops = "|".join(re.escape(w) for w, _ in OP_WORDS)
    match = re.search(rf"\b(?:have|has|with|where) ([a-zA-Z][\w ]*?) (?:is |are )?({ops}) ({_NUMBER})", r.question)
    if not match:
        return []
    frame = _first(r.written_of("frame"))
    if frame is None:
        return []
    column = _column(match.group(1), r.columns())
    op = dict(OP_WORDS)[match.group(2)]
    source = r.source_frame(column)
    out: list[CheckSpec] = []
    if source is not None:
        out.append(Filter(frame, source, column, op, _number(match.group(3))))
    total = re.search(r"\btheir total ([a-zA-Z][\w ]*?)\?", r.question)
    scalar = _first(r.written_of("scalar"), "total")
    if total and scalar is not None:
        out.append(Aggregate(scalar, frame, _column(total.group(1), r.columns()), "sum", decimals))
    return out


def _group_specs(r: _Reading, decimals: int | None) -> list[CheckSpec]:
    aggs = "|".join(AGG_WORDS)
    match = re.search(rf"\b({aggs}) ([a-zA-Z][\w ]*?) per ([a-zA-Z][\w ]*?)[?,]", r.question)
    if not match or match.group(3).strip().lower() == "month":
        return []
    agg = AGG_WORDS[match.group(1).lower()]
    column, by = _column(match.group(2), r.columns()), _column(match.group(3), r.columns())
    series = _first(r.written_of("series")) or _first(r.written_of("scalar"))
    if series is None:
        return []
    join = re.search(r"\bJoin (?:the [\w ]+? with the ([\w ]+?) )?on (\w+)", r.text)
    if join is None:
        source = r.source_frame(by)
        return [] if source is None else [GroupAggregate(series, source, by, column, agg, decimals)]
    on = join.group(2)
    how = "inner" if re.search(r"\binner join\b", r.text, re.IGNORECASE) else "left"
    dim = next((v.name for v in r.sources if v.kind == "frame" and by in v.columns and on in v.columns), None)
    merged = _first(r.written_of("frame"))
    if merged is not None:  # joined into a frame the turn wrote, then grouped
        left = r.source_frame(on, exclude=[dim] if dim else [])
        out: list[CheckSpec] = []
        if left is not None and dim is not None:
            out.append(JoinRows(merged, left, dim, on, how))
        out.append(GroupAggregate(series, merged, by, column, agg, decimals))
        return out
    left = r.source_frame(on, exclude=[dim] if dim else [])
    if left is None:
        return []
    if dim is None:
        return [GroupAggregate(series, left, by, column, agg, decimals)]
    return [GroupAggregate(series, left, by, column, agg, decimals, join_right=dim, join_on=on, join_how=how)]


def _top_specs(r: _Reading) -> list[CheckSpec]:
    q = r.question
    words = r"(\d+|one|two|three|four|five|six|seven|eight|nine|ten)"
    numbers = {"one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8, "nine": 9}
    numbers["ten"] = 10
    order, k = None, None
    if m := re.search(rf"\bWhich {words} [\w ]*?(?:have|has) the (highest|largest|lowest|smallest)\b", q, re.I):
        k, order = m.group(1), m.group(2)
    elif m := re.search(rf"\b(top|bottom) {words}\b", q, re.I):
        order, k = ("highest" if m.group(1).lower() == "top" else "lowest"), m.group(2)
    elif m := re.search(rf"\b(?:the )?{words} (highest|largest|lowest|smallest)\b", q, re.I):
        k, order = m.group(1), m.group(2)
    elif m := re.search(r"\bWhich month had the (highest|largest|lowest|smallest)\b", q, re.I):
        k, order = "1", m.group(1)
    if order is None or k is None:
        return []
    count = numbers[k.lower()] if k.lower() in numbers else int(k)
    written = r.written_of("series", "scalar", "frame")
    source = r.quoted_source(("series",))
    if not written or source is None:
        return []
    largest = order.lower() in ("highest", "largest")
    return [TopK(written[0].name, source, count, "largest" if largest else "smallest")]


def _share_specs(r: _Reading) -> list[CheckSpec]:
    if not re.search(r"\b(share|shares|fraction|fractions|proportion)\b", r.question, re.IGNORECASE):
        return []
    named = [v for v in r.written if re.search(r"share|fraction", v.name)]
    target = (named or list(r.written))[:1]
    return [Share(target[0].name)] if target else []


def _iqr_specs(r: _Reading) -> list[CheckSpec]:
    match = re.search(r"\boutliers? in ([a-zA-Z][\w ]*?)[,?]", r.question)
    if not re.search(r"\bIQR\b", r.text) or not match:
        return []
    frame, column = _first(r.written_of("frame")), _column(match.group(1), r.columns())
    source = r.source_frame(column)
    if frame is None or source is None:
        return []
    k = re.search(rf"Q3 \+ ({_NUMBER}) \*", r.text)
    limit = re.search(r"\blimit to (\d+) decimals?", r.text, re.IGNORECASE)
    decimals = int(limit.group(1)) if limit else None
    return [IqrOutliers(frame, source, column, float(k.group(1)) if k else 1.5, decimals)]


def _missing_specs(r: _Reading) -> list[CheckSpec]:
    if not re.search(r"\bmissing values?\b|\bCount NaN\b", r.text) or not re.search(r"how many", r.question, re.I):
        return []
    target = _first(r.written_of("series", "scalar"))
    of = re.search(r"\bcolumns of the (\w+)", r.question)
    frames = [v.name for v in r.sources if v.kind == "frame"]
    source = of.group(1) if of and of.group(1) in frames else frames[0] if frames else None
    return [] if target is None or source is None else [NanCounts(target, source)]


def _clean_specs(r: _Reading) -> list[CheckSpec]:
    out: list[CheckSpec] = []
    frame = _first(r.written_of("frame"))
    if frame is None:
        return out
    drop = re.search(
        r"\bDrop \w+ (?:with no|without|with (?:a )?missing) ([\w ]+?) (?:or|and) "
        r"(?:no |a missing |missing )?([\w ]+?)[.,;]",
        r.text,
        re.IGNORECASE,
    )
    source = r.source_frame(exclude=[frame])
    if drop and source is not None:
        columns = tuple(_column(drop.group(i), r.columns()) for i in (1, 2))
        out.append(CompleteRows(frame, source, columns))
    norm = re.search(r"\b([A-Z][\w ]*?) (?:names|values) have [^.]*?normali[sz]e them to title case", r.context)
    if norm:
        variants = re.search(r"synonyms \(([^)]*)\)", r.context)
        found = tuple(p.split("=")[0].strip() for p in variants.group(1).split(",")) if variants else ()
        out.append(Normalized(frame, _column(norm.group(1), r.columns()), found))
    return out


def _overlap_specs(r: _Reading, decimals: int | None) -> list[CheckSpec]:
    both = re.search(r"\b(?:are both|appear in both)\b", r.question)
    if not both:
        return []
    written = r.written_of("frame", "series", "scalar")
    named = [v for v in r.sources if v.kind in ("frame", "series") and v.name not in {w.name for w in r.written}]
    if not written or len(named) < 2:
        return []
    target = written[0].name
    out: list[CheckSpec] = [Overlap(target, named[-1].name, named[0].name)]
    total = re.search(r"\btheir total ([a-zA-Z][\w ]*?)\?", r.question)
    scalar = _first([v for v in r.written_of("scalar") if v.name != target], "total")
    if total and scalar is not None:
        out.append(Aggregate(scalar, target, _column(total.group(1), r.columns()), "sum", decimals))
    return out


def _monthly_specs(r: _Reading, decimals: int | None) -> list[CheckSpec]:
    match = re.search(r"\b(total|mean|median|average) ([a-zA-Z][\w ]*?) (?:per|by|each|a) month\b", r.question)
    match = match or re.search(r"\bmonthly (total|mean|median|average) ([a-zA-Z][\w ]*?)[?,.]", r.question)
    if not match:
        return []
    target = _first(r.written_of("series", "scalar"))
    date = re.search(r"\bParse (\w+) as dates", r.context)
    if target is None or date is None:
        return []
    column = _column(match.group(2), r.columns())
    source = r.source_frame(date.group(1))
    if source is None:
        return []
    factor = 1000.0 if re.search(r"\bin thousands\b", r.text, re.IGNORECASE) else 1.0
    out: list[CheckSpec] = [
        Resample(target, source, date.group(1), column, AGG_WORDS[match.group(1).lower()], "MS", factor, decimals)
    ]
    if factor != 1.0:
        out.append(UnitScale(target, source, column, factor))
    return out


def _own_specs(r: _Reading) -> list[CheckSpec]:
    """The specs of the requirements a (non-revision) turn states."""
    decimals = decimals_of(r.text)
    out: list[CheckSpec] = []
    out += _clean_specs(r) if re.search(r"\bClean the data\b|\bDrop \w+ with(?:out)?\b", r.text, re.I) else []
    if not out and re.search(r"normali[sz]e them", r.context):
        out += _clean_specs(r)
    out += _missing_specs(r)
    out += _iqr_specs(r)
    out += _overlap_specs(r, decimals)
    if not any(isinstance(s, Overlap) for s in out):
        out += _filter_specs(r, decimals)
    out += _monthly_specs(r, decimals)
    out += _group_specs(r, decimals)
    out += _top_specs(r)
    out += _share_specs(r)
    if decimals is not None:
        out.append(Rounded("result", decimals))
    return out


# ---------------------------------------------------------------- revisions
_PARAM = re.compile(rf"\b([A-Za-z_]\w*) is (?:now ({_NUMBER})|({_NUMBER}), not {_NUMBER})")
_CORRECTION = re.compile(
    rf"\bCorrection: (\w+) = ({_NUMBER}) for (\w+) ([\w.-]+) is a data-entry error; the true value is ({_NUMBER})"
)
_CORRECTION_ROW = re.compile(
    rf"\bCorrection: (\w+) = ({_NUMBER}) in data row (\d+)\b.*?the true value is ({_NUMBER})", re.DOTALL
)
_EXCLUDE = re.compile(r"\b(?:Exclude|excluding|Drop) every row with (\w+) (?:= )?'?([\w.-]+?)'?\.(?:\s|$)", re.I)
_EXCLUDE_EQ = re.compile(r"\bThe rows with (\w+) = '([^']*)' are [\w ]+? excluded")


def revision_specs(text: str, variables: Sequence[Variable]) -> list[CheckSpec]:
    """The specs of the revisions ``text`` states, on the frames the revising turn wrote (``variables``)."""
    out: list[CheckSpec] = []
    frames = [v.name for v in variables if v.name != "result"]  # the reported result holds no rows
    if m := _PARAM.search(text):
        out.append(Param(m.group(1), _number(m.group(2) or m.group(3))))
    if m := _CORRECTION.search(text):
        column, key_column, key, new = m.group(1), m.group(3), _scalar(m.group(4)), _number(m.group(5))
        out += [CorrectedCell(v, column, key, new, key_column) for v in frames]
    elif m := _CORRECTION_ROW.search(text):
        column, key, new = m.group(1), int(m.group(3)), _number(m.group(4))
        out += [CorrectedCell(v, column, key, new, None) for v in frames]
    if m := _EXCLUDE.search(text) or _EXCLUDE_EQ.search(text):
        out += [ExcludedRows(v, m.group(1), _scalar(m.group(2))) for v in frames]
    if any(isinstance(s, Param) for s in out):  # the revised parameter is not a frame to correct or filter
        param = next(s.variable for s in out if isinstance(s, Param))
        out = [s for s in out if isinstance(s, Param) or s.variable != param]
    return out


def _is_revision(text: str) -> bool:
    return bool(_PARAM.search(text) or _CORRECTION.search(text) or _CORRECTION_ROW.search(text)) or bool(
        _EXCLUDE.search(text) or _EXCLUDE_EQ.search(text)
    )


# ---------------------------------------------------------------- one turn
def _sources(question: str, earlier: Sequence[NotedTurn]) -> tuple[Variable, ...]:
    by_id = {t.turn_id: t for t in earlier}
    named = [by_id[n] for n in named_turns(question) if n in by_id]
    return tuple(v for t in reversed(named) for v in t.variables)


def _unique(specs: Iterable[CheckSpec]) -> list[CheckSpec]:
    seen: set[str] = set()
    out = []
    for spec in specs:
        key = repr(spec.to_dict())
        if key not in seen:
            seen.add(key)
            out.append(spec)
    return out


def read_turn(
    question: str,
    context: str,
    written: Sequence[Variable],
    earlier: Sequence[NotedTurn] = (),
    constraints: Sequence[str] = (),
) -> list[CheckSpec]:
    """The check specs of one turn: what its question and context state (at most :data:`MAX_SPECS`), about the
    variables it ``written``, read from the variables of the ``earlier`` turns it names; then the revisions of the
    earlier turns, which still stand (latest first); then what its public ``constraints`` texts state."""
    known = tuple(v for t in earlier for v in t.variables)
    written = tuple(sorted(written, key=lambda v: v.name == "result"))  # the reported dict is never a computed value
    own: list[CheckSpec] = []
    if _is_revision(context):  # "what are X (turn 4) now?": every earlier turn's requirements, on what it recomputed
        # what must be recomputed: what the turn wrote and the results of the turns it names, rewritten or not (a
        # result the worker left stale is checked against the revised data all the same)
        named = set(re.findall(r"\(turns? (\d+)\)", question))
        due = {v.name: v for v in written}
        due.update({v.name: v for t in earlier if t.turn_id in named for v in t.variables if v.name not in due})
        recomputed = set(due) - {"result"}  # the reported result is this turn's own
        for reading in _readings_again(earlier, tuple(due.values()), known):
            own += [s for s in _own_specs(reading) if s.variable in recomputed]
        own += revision_specs(context, tuple(due.values()))
    else:
        own += _own_specs(_Reading(question, context, written, _sources(question, earlier), known))
    standing: list[CheckSpec] = []
    for turn in reversed(earlier):
        if _is_revision(turn.context):
            standing += revision_specs(turn.context, turn.variables)
    stated = _unique(own + standing)[:MAX_SPECS]
    return _unique(stated + _constraint_specs(question, context, written, earlier, constraints))


def _constraint_specs(
    question: str, context: str, written: Sequence[Variable], earlier: Sequence[NotedTurn], texts: Sequence[str]
) -> list[CheckSpec]:
    """The specs public constraint texts state: ``Round every value to N decimals`` (``rounded`` on the values the
    turn computed), ``fractions in [0, 1]`` (``share``), ``A left join keeps every ...`` (``join_rows``), ``...
    amounts are in thousands`` (``unit_scale``) and a revision restated (``X is V.``, ``No row has C V.``, ``C of K V
    is N.``, on the revised frame). On a revision the first four are about the turns it names (``(turn N)``), read
    again on the recomputed variables."""
    readings = [_Reading(question, context, tuple(written), _sources(question, earlier), ())]
    if _is_revision(context):
        named = set(re.findall(r"\(turns? (\d+)\)", question))
        names = {v.name for v in written}
        readings = [
            _Reading(r.question, r.context, tuple(v for v in r.written if v.name in names), r.sources, r.known)
            for r, turn_id in _readings_again(earlier, written, (), with_ids=True)
            if turn_id in named
        ]
    frames = [v.name for v in written if v.kind == "frame"]
    out: list[CheckSpec] = []
    for text in texts:
        found: list[CheckSpec] = []
        for r in readings:
            values = [v for v in r.written if v.kind != "frame"]
            if m := re.search(r"\bRound every value to (\d+) decimals?", text):
                found = [Rounded(v.name, int(m.group(1))) for v in values[:1]]
            elif re.search(r"\bfractions (?:are )?in \[0, 1\]", text, re.IGNORECASE):
                found = _share_specs(_Reading(f"{r.question} share", r.context, r.written, (), ()))
            elif re.search(r"\bamounts are in thousands\b", text, re.IGNORECASE):
                found = [s for s in _monthly_specs(r, None) if isinstance(s, UnitScale)]
            elif re.search(r"\bjoin keeps every\b", text):
                found = [s for s in _group_specs(r, None) if isinstance(s, JoinRows)]
            if found:
                break
        if m := re.fullmatch(rf"([A-Za-z_]\w*) is ({_NUMBER})\.", text.strip()):
            found = [Param(m.group(1), _number(m.group(2)))]
        elif (m := re.fullmatch(r"No row has (\w+) (?:= )?'?([^']+?)'?\.", text.strip())) and frames:
            found = [ExcludedRows(frames[0], m.group(1), _scalar(m.group(2)))]
        elif (m := re.fullmatch(rf"(\w+) of (\w+) ([\w.-]+) is ({_NUMBER})\.", text.strip())) and frames:
            found = [CorrectedCell(frames[0], m.group(1), _scalar(m.group(3)), _number(m.group(4)), m.group(2))]
        elif (m := re.fullmatch(rf"(\w+) of row (\d+) is ({_NUMBER})\.", text.strip())) and frames:
            found = [CorrectedCell(frames[0], m.group(1), int(m.group(2)), _number(m.group(3)), None)]
        out += found
    return out


def _readings_again(
    earlier: Sequence[NotedTurn], written: Sequence[Variable], known: tuple[Variable, ...], with_ids: bool = False
) -> list:
    """The readings of the earlier non-revision turns whose variables a revision recomputed (``written``), on the
    recomputed variables; with ``with_ids``, ``(reading, turn id)`` pairs."""
    recomputed = {v.name for v in written}
    redo = [NotedTurn(t.turn_id, t.question, t.context, _current(t.variables, written)) for t in earlier]
    out: list = []
    for index, again in enumerate(redo):
        if _is_revision(again.context) or not recomputed & {v.name for v in again.variables}:
            continue
        reading = _Reading(
            again.question, again.context, again.variables, _sources(again.question, redo[:index]), known
        )
        out.append((reading, again.turn_id) if with_ids else reading)
    return out


def _current(variables: Sequence[Variable], written: Sequence[Variable]) -> tuple[Variable, ...]:
    """``variables`` with the kinds and columns of the same names in ``written`` (a revision recomputed them)."""
    now = {v.name: v for v in written}
    return tuple(now.get(v.name, v) for v in variables)
