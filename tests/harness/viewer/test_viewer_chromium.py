"""The viewer's pages in a real headless Chromium (Debian package ``chromium``): they load from ``file://`` without a
console message or script error, the state graph is drawn (its SVG nodes are in the DOM and its colours are in the
screenshot), ``#at=k`` replays the store, and a ``<script>`` in worker output stays text."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from collections import Counter

import pytest

from harness.viewer.render import NODE_FILL, NODE_GAP, NODE_H, NODE_W, RELATION_COLOURS, commit_activations

WINDOW = (1280, 1100)  # the summary, the reward table and the state graph fit in it


@pytest.fixture(scope="module")
def chromium():
    path = shutil.which("chromium")
    if path is None:
        pytest.fail(
            "the viewer tests need a headless Chromium and `chromium` is not on PATH: install the Debian package "
            "`chromium` (apt-get install -y chromium; `make` installs it with the system dependencies)."
        )
    return path


def headless(chromium, tmp_path, url: str, *args: str) -> subprocess.CompletedProcess:
    command = [
        chromium, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--hide-scrollbars",
        f"--user-data-dir={tmp_path / 'chromium-profile'}", "--enable-logging=stderr", "--v=0", *args, url,
    ]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    return done


def console_lines(stderr: str) -> list[str]:
    """What the page wrote to the console (messages, errors, CSP refusals): Chromium logs each as ``CONSOLE``."""
    return [line for line in stderr.splitlines() if "CONSOLE" in line]


def loaded_dom(chromium, tmp_path, url: str) -> str:
    done = headless(chromium, tmp_path, url, "--dump-dom")
    assert console_lines(done.stderr) == []
    body = re.search(r"<body[^>]*>", done.stdout).group(0)
    assert 'data-ready="1"' in body and "data-errors" not in body  # the script ran, and nothing threw
    return done.stdout


def node_states(dom: str) -> list[tuple[str, int, bool]]:
    """``(state id, committed at, shown)`` of each SVG node in a dumped DOM."""
    nodes = re.findall(r'<g class="node" data-at="(\d+)" data-state="([^"]+)"( style="display: none;")?>', dom)
    return [(state, int(at), not hidden) for at, state, hidden in nodes]


@pytest.fixture(scope="module")
def hostile_page(gold_records, tmp_path_factory):
    """The first gold record with a script in its worker output, rendered by `stateguard view`."""
    from harness.viewer.render import render_episode
    from synthesis.view import episode_reward

    record = json.loads(json.dumps(gold_records[0]))
    record["worker_steps"][0]["execution"]["stdout_tail"] = (
        "</pre><script>document.body.setAttribute('data-pwned', '1')</script>"
        "<img src=x onerror=\"document.body.setAttribute('data-pwned', '2')\">"
    )
    path = tmp_path_factory.mktemp("pages") / "episode.html"
    path.write_text(render_episode(record, episode_reward(record, None)))
    return path, record


def test_page_loads_without_errors_and_scripts_stay_text(chromium, hostile_page, tmp_path):
    path, record = hostile_page
    dom = loaded_dom(chromium, tmp_path, path.as_uri())
    assert "data-pwned=" not in re.search(r"<body[^>]*>", dom).group(0)
    assert dom.count("<script") == 1 and "<img" not in dom
    assert "&lt;script&gt;document.body.setAttribute('data-pwned', '1')&lt;/script&gt;" in dom
    committed = commit_activations(record)
    assert node_states(dom) == [(s["id"], committed[s["id"]], True) for s in record["states"]]
    assert len(committed) == 6
    arcs = [r for s in record["states"] for r in s["relations"] if r["related_state_id"]]
    assert dom.count('<path class="edge"') == len(arcs) == 5


def test_store_replays_to_an_activation(chromium, hostile_page, tmp_path):
    path, record = hostile_page
    full = node_states(loaded_dom(chromium, tmp_path, path.as_uri()))
    third = full[2][1]  # the activation that committed S3
    nodes = node_states(loaded_dom(chromium, tmp_path, f"{path.as_uri()}#at={third}"))
    assert [(s, shown) for s, _, shown in nodes] == [(s, i < 3) for i, (s, _, _) in enumerate(full)]


def rgb(colour: str) -> tuple[int, int, int]:
    return tuple(int(colour[i : i + 2], 16) for i in (1, 3, 5))


def screenshot(chromium, tmp_path, url: str):
    """The page's screenshot as an RGB image of :data:`WINDOW`."""
    from PIL import Image

    shot = tmp_path / "shot.png"
    headless(chromium, tmp_path, url, f"--window-size={WINDOW[0]},{WINDOW[1]}", f"--screenshot={shot}")
    with Image.open(shot) as image:
        assert image.size == WINDOW
        return image.convert("RGB")


def colours(image, box=None) -> Counter:
    return Counter((image.crop(box) if box else image).get_flattened_data())


def test_screenshot_shows_the_state_graph(chromium, hostile_page, tmp_path):
    path, record = hostile_page
    image = screenshot(chromium, tmp_path, path.as_uri())
    assert len(colours(image)) > 50  # not blank: text, tables, the graph
    fill = [(x, y) for x in range(WINDOW[0]) for y in range(WINDOW[1]) if image.getpixel((x, y)) == rgb(NODE_FILL)]
    inner = (NODE_W - 4) * (NODE_H - 4)  # a node's fill, inside its border
    assert 6 * inner * 0.6 <= len(fill) <= 6 * inner  # six nodes, their labels drawn over part of the fill
    left, right = min(x for x, _ in fill), max(x for x, _ in fill)
    top, bottom = min(y for _, y in fill), max(y for _, y in fill)
    assert right - left >= 5 * (NODE_W + NODE_GAP) + NODE_W - 8  # side by side: six node slots wide
    assert bottom - top <= NODE_H  # in one row
    # the arcs, above the nodes (the legend below the graph is left out)
    arcs = colours(image, (left - NODE_W, max(0, top - 200), right + NODE_W, top))
    for kind in ("progress", "branch", "combine"):
        assert arcs[rgb(RELATION_COLOURS[kind])] > 100, kind  # the task's relations
    assert arcs[rgb(RELATION_COLOURS["invalidate"])] == 0  # this task has no invalidate relation
    # replayed to before the first commit: no node is drawn
    empty = screenshot(chromium, tmp_path, f"{path.as_uri()}#at=0")
    assert colours(empty)[rgb(NODE_FILL)] == 0


def test_sample_page_loads_without_errors(chromium, synth_out, view, tmp_path):
    out = tmp_path / "sample.html"
    assert view([synth_out / "dataset", "--sample", "--index", "0", "--out", out]) == 0
    dom = loaded_dom(chromium, tmp_path, out.as_uri())
    assert dom.count('<span class="m" id="model-1" title=') == 1 and dom.count('<span class="e" title=') == 2
