"""The episode page (harness.viewer.render) and `stateguard view` on a real synthesized run, without a browser."""

from __future__ import annotations

import argparse
import copy
import html
import json
import re
from html.parser import HTMLParser

import pytest

from harness.viewer.markup import SCRIPT
from harness.viewer.render import commit_activations, render_episode, timeline
from synthesis.view import episode_reward

PAYLOAD = (
    "</pre></td><script>document.body.setAttribute('data-pwned','1')</script>"
    "<img src=x onerror=\"document.body.setAttribute('data-pwned','2')\">"
)


class Tags(HTMLParser):
    """Every start tag of a page with its attributes, and the text of its scripts."""

    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.scripts: list[str] = []
        self._in_script = False

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))
        self._in_script = tag == "script"
        if self._in_script:
            self.scripts.append("")

    def handle_endtag(self, tag):
        self._in_script = False

    def handle_data(self, data):
        if self._in_script:
            self.scripts[-1] += data


def parse(page: str) -> Tags:
    tags = Tags()
    tags.feed(page)
    return tags


def section(page: str, name: str) -> str:
    return re.search(f'<section id="{name}">(.*?)</section>', page, re.S).group(1)


def hostile(record: dict) -> dict:
    """``record`` with the payload in every kind of untrusted text the page shows."""
    record = copy.deepcopy(record)
    step = record["worker_steps"][0]
    step["code"] += "\n# " + PAYLOAD
    step["thought"] = PAYLOAD
    step["execution"]["stdout_tail"] = PAYLOAD
    step["execution"]["variables"][0]["summary"] = PAYLOAD
    action = record["activations"][0]["actions"][0]
    action["raw"], action["result"] = PAYLOAD, PAYLOAD
    action["parsed"]["arguments"]["issue"] = PAYLOAD
    record["states"][0]["issue"] = PAYLOAD
    record["states"][0]["used_variables"][0]["value"] = PAYLOAD
    record["hints"][0]["text"] = PAYLOAD
    record["final_answers"]["1"] = PAYLOAD
    record["episode_id"] = PAYLOAD
    return record


def test_untrusted_text_is_escaped(gold_records):
    page = render_episode(hostile(gold_records[0]))
    tags = parse(page)
    names = [tag for tag, _ in tags.tags]
    assert names.count("script") == 1 and tags.scripts == [SCRIPT]
    assert "img" not in names
    handlers = [(tag, key) for tag, attrs in tags.tags for key in attrs if key.lower().startswith("on")]
    assert handlers == []
    assert page.count(html.escape(PAYLOAD)) >= 9  # shown as text everywhere it was put
    # the Content-Security-Policy pins the one script by its hash
    csp = next(attrs["content"] for tag, attrs in tags.tags if attrs.get("http-equiv") == "Content-Security-Policy")
    assert "script-src 'sha256-" in csp and "default-src 'none'" in csp


def test_state_graph_has_every_committed_state_and_relation(gold_records):
    record = gold_records[0]
    page = render_episode(record)
    tags = parse(page)
    nodes = [attrs for tag, attrs in tags.tags if tag == "g" and attrs.get("class") == "node"]
    assert [n["data-state"] for n in nodes] == [s["id"] for s in record["states"]] == [f"S{i}" for i in range(1, 7)]
    ids = {s["id"] for s in record["states"]}
    relations = sorted(
        (r["type"], r["related_state_id"], s["id"])
        for s in record["states"]
        for r in s["relations"]
        if r["related_state_id"] in ids
    )
    edges = [attrs for tag, attrs in tags.tags if tag == "path" and attrs.get("class") == "edge"]
    assert sorted(e["data-type"] for e in edges) == sorted(t for t, _, _ in relations)
    assert {"progress", "branch", "combine"} <= {t for t, _, _ in relations}  # the task's relation graph
    # each state is placed at the activation whose COMMIT_STATE committed it
    committed = commit_activations(record)
    by_index = {a["index"]: a for a in record["activations"]}
    for sid, index in committed.items():
        results = [a["result"] for a in by_index[index]["actions"] if a["parsed"]["name"] == "COMMIT_STATE"]
        assert results == [f"COMMIT_STATE: committed {sid} (checkpoint {results[0].split('checkpoint ')[1][:-2]})."]
    assert [int(n["data-at"]) for n in nodes] == [committed[s["id"]] for s in record["states"]]
    slider = next(attrs for tag, attrs in tags.tags if attrs.get("id") == "store-at")
    assert slider["max"] == slider["value"] == str(len(record["activations"]))


def test_timeline_puts_repair_steps_after_the_repair(gold_records):
    record = gold_records[0]
    order = [(kind, item.get("step_id", item.get("index"))) for kind, item in timeline(record)]
    assert len(order) == len(record["worker_steps"]) + len(record["activations"])
    (repair,) = record["repairs"]
    (repair_activation,) = [
        a["index"] for a in record["activations"] if any(x["parsed"]["name"] == "REPAIR" for x in a["actions"])
    ]
    position = order.index(("activation", repair_activation))
    assert order[position + 1 : position + 1 + len(repair["steps"])] == [("step", s) for s in repair["steps"]]
    # every check_execution comes after the step it checks, and each turn opens before its first step
    seen: set[int] = set()
    for kind, item in timeline(record):
        if kind == "step":
            seen.add(item["step_id"])
            continue
        for action in item["actions"]:
            if action["parsed"]["name"] == "check_execution":
                assert action["parsed"]["arguments"]["step_id"] in seen
    first_steps = {}
    for step in record["worker_steps"]:
        first_steps.setdefault(step["turn_id"], step["step_id"])
    for activation in record["activations"]:
        if activation["event_type"] == "turn_start":
            opened = order.index(("activation", activation["index"]))
            assert opened < order.index(("step", first_steps[activation["turn_id"]]))


def test_page_shows_steps_activations_hints_and_answers(gold_records):
    record = gold_records[0]
    page = render_episode(record)
    for step in record["worker_steps"]:
        assert f'id="step-{step["step_id"]}"' in page
        assert html.escape(step["code"]) in page
        assert html.escape(step["execution"]["stdout_tail"]) in page
    for activation in record["activations"]:
        assert f'id="activation-{activation["index"]}"' in page
        for action in activation["actions"]:
            assert html.escape(action["raw"]) in page
    assert len(record["hints"]) == 5
    for hint in record["hints"]:
        assert html.escape(hint["text"]) in page
    assert page.count("<b>Hint delivered</b>") == len(record["hints"])
    (repair,) = record["repairs"]
    assert f"<td>{repair['variable']}</td>" in section(page, "store")
    answers = section(page, "answers")
    assert answers.count('class="badge ok">correct<') == len(record["final_answers"]) == 6
    # self-contained: nothing to fetch, links only inside the page (one per turn)
    tags = parse(page).tags
    assert [t for t, a in tags if "src" in a or t in ("link", "iframe", "object", "embed", "img")] == []
    assert [a["href"] for t, a in tags if t == "a"] == [f"#turn-{i}" for i in range(1, 7)]


def test_reward_terms_use_the_fault_label(synth_out, gold_records, view, tmp_path):
    from rewards import score_episode
    from synthesis.labels import fault_infos

    record = gold_records[0]
    expected = score_episode(record, fault_infos(synth_out)[record["config"]["fault_id"]])
    assert expected.terms["intervention"] > 0  # the gold repair of a harmful fault is rewarded
    reward = episode_reward(record, synth_out)
    assert reward.terms == expected.terms and reward.total == expected.total
    out = tmp_path / "gold.html"
    assert view([synth_out / "episodes" / "gold.jsonl", "--index", "0", "--out", out]) == 0  # pool: next to episodes/
    shown = section(out.read_text(), "reward")
    assert f"<b>{expected.total:.3f}</b>" in shown
    for name, value in expected.terms.items():
        assert f"<td>{name}</td><td>{value:.3f}</td>" in shown
    # the same record away from its synthesis folder: not scored, and the page says how to fix it
    moved = tmp_path / "moved.jsonl"
    moved.write_text(json.dumps(record) + "\n")
    assert view([moved, "--out", tmp_path / "moved.html"]) == 0
    assert "Not scored" in section((tmp_path / "moved.html").read_text(), "reward")
    assert "--pool" in section((tmp_path / "moved.html").read_text(), "reward")
    assert view([moved, "--pool", synth_out, "--out", tmp_path / "pooled.html"]) == 0
    assert f"<b>{expected.total:.3f}</b>" in section((tmp_path / "pooled.html").read_text(), "reward")


def test_clean_record_is_scored_without_a_fault(synth_out, view, tmp_path):
    from rewards import score_episode

    clean = json.loads((synth_out / "episodes" / "clean.jsonl").read_text().splitlines()[0])
    expected = score_episode(clean, None)
    assert view([synth_out / "episodes" / "clean.jsonl", "--out", tmp_path / "clean.html"]) == 0
    shown = section((tmp_path / "clean.html").read_text(), "reward")
    assert "Scored as a clean episode" in shown and f"<b>{expected.total:.3f}</b>" in shown


def test_the_harness_pages_take_the_reward_panel_as_data(synth_out, tmp_path):
    """harness.viewer alone: without a reward callback a page says "Not scored" and the index "reward n/a"; with one,
    the panel shows exactly the RewardView it returns."""
    from harness.viewer.cli import add_view_parser, write_pages
    from harness.viewer.render import RewardView

    parser = argparse.ArgumentParser(prog="stateguard")
    add_view_parser(parser.add_subparsers())
    records = synth_out / "episodes" / "gold.jsonl"
    args = parser.parse_args(["view", str(records), "--all", "--out", str(tmp_path / "bare")])
    index, first, *_ = write_pages(args)
    assert "reward n/a" in index.read_text() and "Not scored." in section(first.read_text(), "reward")
    given = RewardView(terms={"protocol": 0.25}, weights={"protocol": 0.2}, total=0.125, note="handed in")
    args = parser.parse_args(["view", str(records), "--out", str(tmp_path / "given.html")])
    (page,) = write_pages(args, episode_reward=lambda record: given)
    shown = section(page.read_text(), "reward")
    assert "handed in" in shown and "<td>protocol</td><td>0.250</td>" in shown and "<b>0.125</b>" in shown


def test_all_writes_an_index_and_one_page_per_record(synth_out, gold_records, view, tmp_path, capsys):
    folder = tmp_path / "pages"
    assert view([synth_out / "episodes" / "gold.jsonl", "--all", "--out", folder]) == 0
    pages = sorted(p.name for p in folder.glob("*.html") if p.name != "index.html")
    assert pages == [f"{i:04d}-{r['episode_id']}.html" for i, r in enumerate(gold_records)]
    index = (folder / "index.html").read_text()
    links = [attrs["href"] for tag, attrs in parse(index).tags if tag == "a"]
    assert links == pages
    printed = capsys.readouterr().out.split()
    assert printed == [str(folder / "index.html"), *(str(folder / p) for p in pages)]
    # --episode-id and --index pick the same record
    second = gold_records[1]["episode_id"]
    assert view([synth_out / "episodes" / "gold.jsonl", "--episode-id", second, "--out", tmp_path / "a.html"]) == 0
    assert view([synth_out / "episodes" / "gold.jsonl", "--index", "1", "--out", tmp_path / "b.html"]) == 0
    assert (tmp_path / "a.html").read_text() == (tmp_path / "b.html").read_text()
    assert f"Episode syn-commerce-0-6 · {second}" in (tmp_path / "a.html").read_text()
    # without --index: the latest record of the (appended) file; --index -1 is the same, -N the first
    capsys.readouterr()
    assert view([synth_out / "episodes" / "gold.jsonl", "--out", tmp_path / "latest.html"]) == 0
    assert view([synth_out / "episodes" / "gold.jsonl", "--index", "-1", "--out", tmp_path / "last.html"]) == 0
    latest = (tmp_path / "latest.html").read_text()
    assert latest == (tmp_path / "last.html").read_text() and gold_records[-1]["episode_id"] in latest
    first = ["--index", str(-len(gold_records)), "--out", tmp_path / "first.html"]
    assert view([synth_out / "episodes" / "gold.jsonl", *first]) == 0
    assert gold_records[0]["episode_id"] in (tmp_path / "first.html").read_text()


def test_faulty_record_without_a_manager(synth_out, view, tmp_path):
    """The unmanaged faulted branch: no activations, no states; the page says so instead of drawing an empty graph."""
    out = tmp_path / "faulty.html"
    assert view([synth_out / "episodes" / "faulty.jsonl", "--out", out]) == 0
    page = out.read_text()
    assert "No committed states" in section(page, "store") and 'id="state-graph"' not in page
    assert section(page, "answers").count('class="badge bad">wrong<') >= 1  # the fault propagates to a wrong answer


@pytest.mark.parametrize(
    ("content", "argv", "expected"),
    [
        (None, [], "no such file; pass the path of an episode-records file"),
        ('{"task_id": "t", "schema_version": "1.0"}\nnot json\n', [], ":1: missing field(s) ['config', 'episode_id'"),
        ("\n\nnot json\n", [], ":3: not JSON"),
        ('{"hello": 1}\n', [], ":1: schema_version (missing)"),
        ("", [], "holds no records"),
        (
            "GOLD",
            ["--index", "7"],
            "--index 7 is out of range; it holds {n} records, so pass --index 0..{last} (or -{n}..-1 from the end).",
        ),
        ("GOLD", ["--index", "-7"], "--index -7 is out of range; it holds {n} records"),
        ("GOLD", ["--episode-id", "nope"], "no episode with id 'nope' among its {n} records"),
        ("GOLD", ["--sample"], "not a training sample"),
    ],
)
def test_bad_input_exits_2_with_the_fix(synth_out, view, tmp_path, capsys, content, argv, expected):
    path = tmp_path / "records.jsonl"
    if content == "GOLD":
        path = synth_out / "episodes" / "gold.jsonl"
        n = sum(1 for line in path.read_text().splitlines() if line.strip())
        assert 1 < n < 7  # a few gold records: index 7 is out of range
        expected = expected.format(n=n, last=n - 1)
    elif content is not None:
        path.write_text(content)
    out = tmp_path / "out.html"
    assert view([path, "--out", out, *argv]) == 2
    err = capsys.readouterr().err
    assert err.startswith("stateguard view: ") and expected in err and str(path) in err
    assert not out.exists()
    if content is not None and content.startswith("{"):
        assert "--sample" in err  # a file of something else: the message says what the command expects


def test_segment_flow_timeline_and_unparsed_actions():
    """A segment-flow record (pauses after steps 0-2, the task end after 3-4) with an unparseable response."""
    steps = [{"step_id": i, "turn_id": "main", "code": f"x{i} = {i}", "execution": None} for i in range(5)]

    def activation(index, event, end, actions):
        observation = {"event_type": event, "pending_start_step": 0 if end is not None else None}
        observation["pending_end_step"] = end
        return {"index": index, "event_type": event, "turn_id": "main", "actor": "policy",
                "observation": observation, "actions": actions}  # fmt: skip

    garbled = {"raw": "OPEN <b>it</b>", "parsed": None, "kind": "invalid", "legal": False, "result": "unparseable"}
    commit = {"raw": "c", "parsed": {"name": "COMMIT_STATE", "arguments": {}}, "kind": "control", "legal": True,
              "result": "COMMIT_STATE: committed S1 (checkpoint cp1)."}  # fmt: skip
    record = {
        "task_id": "t", "episode_id": "e", "config": {"flow": "segment"}, "worker_steps": steps,
        "activations": [activation(1, "segment_pause", 2, [garbled]), activation(2, "segment_pause", 2, []),
                        activation(3, "task_end", 4, [commit])],
        "states": [{"id": "S1", "relations": [{"type": "init", "related_state_id": None}],
                    "constraints": [{"text": "s", "code": None, "check": {"kind": "share", "variable": "<s>"}}]}],
    }  # fmt: skip
    order = [(kind, item.get("step_id", item.get("index"))) for kind, item in timeline(record)]
    steps_0_2 = [("step", 0), ("step", 1), ("step", 2)]
    assert order == [*steps_0_2, ("activation", 1), ("activation", 2), ("step", 3), ("step", 4), ("activation", 3)]
    assert commit_activations(record) == {"S1": 3}
    page = render_episode(record)
    assert "<b>(unparsed)</b>" in page and 'class="badge bad">illegal<' in page
    assert html.escape("OPEN <b>it</b>") in page and "<b>it</b>" not in page
    assert '<pre class="check">' in page and "&quot;share&quot;" in page and "&lt;s&gt;" in page  # the check


def test_an_errored_episode_says_so_in_its_summary(gold_records):
    record = copy.deepcopy(gold_records[0])
    assert "ERRORED" not in render_episode(record)
    record["error"] = {"type": "ChatEndpointError", "message": "the endpoint answered 503"}
    page = render_episode(record)
    assert "ERRORED" in page and "ChatEndpointError: the endpoint answered 503 (not counted in any metric)" in page
