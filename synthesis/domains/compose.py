"""Compose turn templates into a relation graph of ``n_turns`` turns (:func:`compose_task`).

Turn 1 loads the fact table (init) and turn 2 cleans it (progress). Every later turn picks a relation by weight among
those some template can satisfy now, then one template instance of that relation (templates used less often in this
task are preferred). The relation follows from data flow: the turns that last wrote the variables a candidate reads,
reduced to those that are not ancestors of another (``depends_on``): none -> init, the previous turn -> progress, one
earlier non-adjacent turn -> branch, two or more -> combine. An invalidate turn applies a :class:`Revision`, re-runs
the compute statements of one or two recent turns and of every fact-derived step they need, reports their results
again, and makes every other fact-derived variable stale: later turns only read fresh variables.

Every question names in words the earlier turns it builds on, as a real analysis does, so a manager can infer the
relations from the question alone: "Using the result of turn 3: ..." (progress), "Go back to the result of turn 2
(not the turns after it). ..." (branch), "Using the results of turns 2, 4: ..." (combine), "With this revision, what
are ... (turn 4) now?" (invalidate); a question that names no earlier turn is an init. Those are writer a's words;
the schema's question writer (:mod:`synthesis.domains.wording`) words every text, writer b in other words.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping
from dataclasses import dataclass

import pandas as pd

import synthesis.domains.templates as single
import synthesis.domains.templates_combine as double
from synthesis.domains.base import SynthesisError, TaskSpec, TurnSpec, check_n_turns, graph_problems
from synthesis.domains.schema import Schema
from synthesis.domains.templates import Candidate, Fresh, Var, clean_turn, load_turn

RELATION_WEIGHTS: dict[str, float] = {"progress": 0.25, "branch": 0.2, "combine": 1.0, "invalidate": 0.25, "init": 0.2}
"""Relative weight of each relation when the composer picks the next turn (among those available)."""

TEMPLATES: dict[str, Callable[[Schema, Fresh], list[Candidate]]] = {
    "group_agg": single.group_agg,
    "filter": single.filter_subset,
    "subset_group": single.subset_group,
    "top_k": single.top_k,
    "share": single.share_top,
    "monthly": single.monthly,
    "peak": single.monthly_peak,
    "missing": single.missing_report,
    "outliers": single.outliers,
    "load_dim": single.load_dim,
    "join": double.join_group,
    "subset_join": double.subset_by_attr,
    "share_in_top": double.subset_share_in_top,
    "fraction": double.subset_fraction,
    "peak_vs_share": double.peak_vs_share,
    "overlap": double.subset_overlap,
    "common_top": double.common_top,
    "mean_vs_median": double.mean_vs_median,
}
"""Template name -> function listing every instance it can add given the fresh variables."""

KIND_BOOST: dict[str, float] = {"filter": 3.0, "top_k": 2.0, "subset_group": 2.0}
"""Extra weight for templates whose results later combine turns build on."""


@dataclass
class _Step:
    code: str
    requires: tuple[str, ...]
    writes: tuple[str, ...]


@dataclass
class _Placed:
    candidate: Candidate
    relation: str


class _Composer:
    def __init__(self, schema: Schema, rng: random.Random) -> None:
        self.s = schema
        self.rng = rng
        self.fresh: dict[str, Var] = {}
        self.step_of: dict[str, int] = {}
        self.steps: list[_Step] = []
        self.producer: dict[str, int] = {}
        self.ancestors: dict[int, set[int]] = {}
        self.turns: list[TurnSpec] = []
        self.placed: dict[int, _Placed] = {}
        self.uses: dict[str, int] = {}
        self.revisions = list(schema.revisions)
        rng.shuffle(self.revisions)

    # ---- data flow -------------------------------------------------------------------------------------------------
    def classify(self, requires: tuple[str, ...]) -> tuple[str, tuple[int, ...], set[int]]:
        index = len(self.turns) + 1
        producers = {self.producer[name] for name in requires}
        reduced = sorted(p for p in producers if not any(p in self.ancestors[q] for q in producers if q != p))
        if not reduced:
            relation = "init"
        elif len(reduced) >= 2:
            relation = "combine"
        else:
            relation = "progress" if reduced[0] == index - 1 else "branch"
        return relation, tuple(reduced), producers

    def place(
        self,
        cand: Candidate,
        relation: str,
        deps: tuple[int, ...],
        data_deps: set[int],
        code: str,
        writes: tuple[str, ...],
        question: str,
    ) -> None:
        index = len(self.turns) + 1
        self.ancestors[index] = set(data_deps).union(*(self.ancestors[d] for d in data_deps))
        for name in writes:
            self.producer[name] = index
        self.turns.append(
            TurnSpec(
                turn_id=str(index),
                question=question,
                context=cand.context,
                code=code,
                depends_on=tuple(str(d) for d in deps),
                relation=relation,
                precision=cand.precision,
                constraints=cand.constraints,
                writes=writes,
                slots={**cand.slots, "inputs": sorted(set(cand.requires))},
            )
        )
        self.placed[index] = _Placed(cand, relation)
        self.uses[cand.kind] = self.uses.get(cand.kind, 0) + 1

    def add(self, cand: Candidate) -> None:
        relation, deps, data_deps = self.classify(cand.requires)
        code = f"{cand.compute}\nresult = {cand.result}\nprint_result(result)"
        question, w = cand.question, self.s.writer
        if any(v.name in self.step_of for v in cand.writes):  # asked before an invalidation made it stale
            question = w.say("lead.revised_data", question=question)
        if relation == "branch":
            question = w.say("lead.branch", turn=deps[0], question=question)
        elif relation == "combine":
            question = w.say("lead.combine", turns=deps, question=question)
        elif relation == "progress" and self.turns:
            question = w.say("lead.progress", turn=deps[0], question=question)
        self.steps.append(_Step(cand.compute, cand.requires, tuple(v.name for v in cand.writes)))
        for var in cand.writes:
            self.fresh[var.name] = var
            self.step_of[var.name] = len(self.steps) - 1
        self.place(cand, relation, deps, data_deps, code, tuple(v.name for v in cand.writes), question)

    # ---- invalidation ----------------------------------------------------------------------------------------------
    def invalidation_targets(self) -> list[int]:
        out = []
        for index, placed in self.placed.items():
            names = [v.name for v in placed.candidate.writes]
            if (
                index > 2
                and placed.relation != "invalidate"
                and all(self.fresh.get(n) is not None and self.fresh[n].fact_derived for n in names)
                and all(self.producer[n] == index for n in names)
            ):
                out.append(index)
        return out[-4:]

    def add_invalidate(self) -> None:
        revision = self.revisions.pop()
        eligible = self.invalidation_targets()
        targets = sorted(self.rng.sample(eligible, k=min(len(eligible), self.rng.choice((1, 2)))))
        needed: set[int] = set()
        todo = [n for t in targets for n in (v.name for v in self.placed[t].candidate.writes)]
        todo.append(self.s.clean)  # the cleaned table is always recomputed: later turns build on it
        while todo:
            name = todo.pop()
            var = self.fresh[name]
            if name == self.s.fact or not var.fact_derived or self.step_of[name] in needed:
                continue
            needed.add(self.step_of[name])
            todo.extend(self.steps[self.step_of[name]].requires)
        steps = [self.steps[i] for i in sorted(needed)]
        recomputed = tuple(n for st in steps for n in st.writes)
        stale = sorted(
            n for n, v in self.fresh.items() if v.fact_derived and n != self.s.fact and n not in set(recomputed)
        )
        for name in stale:
            del self.fresh[name]
        head = [revision.code] + ([self.s.derive_code] if self.s.derive_code else [])
        results = ", ".join(f"**{self.placed[t].candidate.result}" for t in targets)
        code = "\n".join(head + [st.code for st in steps] + [f"result = {{{results}}}", "print_result(result)"])
        changed = next(iter(revision.slots.values()))["var"]
        writes = tuple(dict.fromkeys((changed, self.s.fact) + recomputed))
        inputs = {n for st in steps for n in st.requires} | {self.s.fact, changed}
        data_deps = set(targets) | {self.producer[n] for n in inputs if n in self.producer}
        labels = [self.placed[t].candidate.label for t in targets]
        w = self.s.writer
        what = " and ".join(
            w.say("invalidate.item", label=label, turn=t) for label, t in zip(labels, targets, strict=True)
        )
        precisions = [p for t in targets if (p := self.placed[t].candidate.precision) is not None]
        constraints = tuple(c for t in targets for c in self.placed[t].candidate.constraints)
        cand = Candidate(
            kind=f"invalidate_{revision.kind}",
            question=w.say("invalidate.question", targets=what),
            label=what,
            compute="",
            result="",
            requires=tuple(sorted(inputs)),
            writes=(),
            slots={**revision.slots, "recompute": list(recomputed), "stale": stale},
            precision=min(precisions) if precisions else None,
            constraints=((revision.check,) if revision.check else ()) + constraints,
            context=w.say("invalidate.context", revision=revision.context),
        )
        self.place(cand, "invalidate", tuple(targets), data_deps, code, writes, cand.question)

    # ---- choosing the next turn ------------------------------------------------------------------------------------
    def next_turn(self) -> None:
        by_relation: dict[str, list[Candidate]] = {}
        for template in TEMPLATES.values():
            for cand in template(self.s, self.fresh):
                by_relation.setdefault(self.classify(cand.requires)[0], []).append(cand)
        last = self.turns[-1].relation
        if self.revisions and last != "invalidate" and len(self.turns) >= 3 and self.invalidation_targets():
            by_relation["invalidate"] = []
        if not by_relation:
            raise SynthesisError(f"no template can extend the {self.s.domain} task after turn {len(self.turns)}")
        names = sorted(by_relation)
        relation = self.rng.choices(names, weights=[RELATION_WEIGHTS[n] for n in names])[0]
        if relation == "invalidate":
            self.add_invalidate()
            return
        pool = by_relation[relation]
        weights = [KIND_BOOST.get(c.kind, 1.0) / (1 + self.uses.get(c.kind, 0)) ** 2 for c in pool]
        self.add(self.rng.choices(pool, weights=weights)[0])


def compose_task(
    schema: Schema, tables: Mapping[str, pd.DataFrame], *, task_id: str, seed: int, n_turns: int
) -> TaskSpec:
    """Build the task: the two opening turns, then ``n_turns - 2`` composed turns (see the module docstring)."""
    check_n_turns(n_turns)
    rng = random.Random(f"{task_id}:{seed}")
    composer = _Composer(schema, rng)
    composer.add(load_turn(schema))
    composer.add(clean_turn(schema))
    while len(composer.turns) < n_turns:
        composer.next_turn()
    files = "\n".join(f"- `{path}`" for path in schema.files.values())
    description = (
        f"# {schema.title}\n\n{schema.intro}\n\nTables:\n{files}\n\nThe analysis proceeds in turns; each turn asks "
        "one question and may build on earlier results, revise an earlier assumption or go back to an earlier "
        "step. Answer each turn by calling `print_result(result)` with a JSON object holding the requested fields."
    )
    spec = TaskSpec(
        task_id=task_id,
        domain=schema.domain,
        seed=seed,
        title=schema.title,
        description=description,
        tables=dict(tables),
        turns=tuple(composer.turns),
    )
    problems = graph_problems(spec)
    if problems:
        raise SynthesisError(f"task {task_id}: invalid relation graph: {'; '.join(problems)}")
    return spec
