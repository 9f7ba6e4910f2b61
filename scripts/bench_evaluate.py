"""Benchmark ``stateguard evaluate`` against a slow endpoint: episodes per minute with 1 and with N ``workers``.

    python scripts/bench_evaluate.py                              # 64 episodes, 200 ms a reply, 1 vs 16 workers
    python scripts/bench_evaluate.py --runs 4 --workers 1 4 --latency-ms 50

A stand-in OpenAI-compatible server (:class:`StandInServer`: threaded, HTTP/1.1 keep-alive, in this process) answers
``GET /v1/models`` at once and every ``POST /v1/chat/completions`` after ``--latency-ms`` with one fixed manager
action (``ABSTAIN`` as a structured tool call), so every reply is the same whatever order the requests come in. The
suite is the built-in retail task (``harness/builtin_tasks/retail-sales``, 5 turns), scripted worker, manager
``llm:URL``, every episode played ``--runs`` times. Each worker count runs one evaluation into its own folder, the
first count being the reference (put 1 first); wall = :func:`harness.evaluation.evaluate.run_evaluation`'s time
(sandboxes, endpoint preflight and the summary included).

``identical``: every run's episode records equal the reference run's, in the same order, and its ``results.json``
equals the reference's, once the keys that differ between any two runs (:data:`UNEQUAL`: the timings and the random
episode id) are removed. ``connections``: the TCP
connections the server accepted (one per thread's backend when they are reused, plus the preflight's).

The LAST line printed is one JSON object: ``{"episodes", "latency_ms", "runs": {"<workers>": {"wall_s",
"episodes_per_min", "requests", "connections"}}, "ratio": {"<workers>": episodes_per_min / the reference's},
"identical": bool}``.
"""

from __future__ import annotations

import argparse
import json
import socket
import sys
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from harness.evaluation.evaluate import EvaluationConfig, run_evaluation, variant_file

REPO = Path(__file__).resolve().parents[1]
SUITE = REPO / "harness" / "builtin_tasks" / "retail-sales"
ABSTAIN = {"id": "call_0", "type": "function", "function": {"name": "ABSTAIN", "arguments": "{}"}}


class StandInServer:
    """An OpenAI-compatible chat server in a thread of this process: ``GET /v1/models`` lists ``stand-in``; every
    ``POST /v1/chat/completions`` waits ``latency_s`` and answers ``reply`` (an assistant message). Counts the
    requests and the connections it accepted. A context manager; ``url`` is the API root."""

    def __init__(self, latency_s: float = 0.2, reply: dict[str, Any] | None = None):
        self.latency_s = latency_s
        self.reply = reply or {"role": "assistant", "content": "", "tool_calls": [ABSTAIN]}
        self.requests = self.connections = 0
        lock = threading.Lock()
        stand_in = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"  # keep-alive: a client may send many requests on one connection

            def setup(self) -> None:
                super().setup()
                self.request.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # as vLLM's server does
                with lock:
                    stand_in.connections += 1

            def do_GET(self) -> None:  # noqa: N802
                self._send({"object": "list", "data": [{"id": "stand-in", "object": "model"}]})

            def do_POST(self) -> None:  # noqa: N802
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                with lock:
                    stand_in.requests += 1
                time.sleep(stand_in.latency_s)
                usage = {"prompt_tokens": 100, "completion_tokens": 10, "total_tokens": 110}
                choice = {"index": 0, "message": stand_in.reply, "finish_reason": "tool_calls"}
                self._send({"object": "chat.completion", "model": "stand-in", "choices": [choice], "usage": usage})

            def _send(self, payload: dict[str, Any]) -> None:
                data = json.dumps(payload).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_port}/v1"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> StandInServer:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()


UNEQUAL = ("duration_s", "latency_s", "episode_id")
"""The keys of a record (and of results.json) that differ between any two runs: timings and the random episode id."""


def without_timings(value: Any) -> Any:
    """``value`` (a record's JSON) with every :data:`UNEQUAL` key removed, at any depth."""
    if isinstance(value, dict):
        return {k: without_timings(v) for k, v in value.items() if k not in UNEQUAL}
    if isinstance(value, list):
        return [without_timings(v) for v in value]
    return value


def outputs(out: Path, variant: str) -> tuple[list[Any], Any]:
    """The episode records of ``variant`` in file order (timings removed) and ``results.json``."""
    lines = variant_file(out, variant).read_text(encoding="utf-8").splitlines()
    results = json.loads((out / "results.json").read_text(encoding="utf-8"))
    return [without_timings(json.loads(line)) for line in lines if line.strip()], without_timings(results)


def evaluate(server: StandInServer, out: Path, runs: int, workers: int, isolation: str) -> dict[str, Any]:
    """One evaluation of the bench suite with ``workers``; its figures."""
    manager = f"llm:{server.url}"
    config = EvaluationConfig.from_dict(
        {
            "suite": str(SUITE),
            "out": str(out),
            "managers": [manager],
            "labels": ["llm"],
            "runs": runs,
            "workers": workers,
            "isolation": isolation,
            "report": False,
            "n_resamples": 100,
        }  # fmt: skip
    )
    requests, connections = server.requests, server.connections
    start = time.perf_counter()
    results = run_evaluation(config)
    wall = time.perf_counter() - start
    episodes = results["variants"]["llm"]["n_episodes"] + results["errored"]["llm"]
    return {
        "wall_s": round(wall, 2),
        "episodes_per_min": round(episodes / wall * 60, 1),
        "requests": server.requests - requests,
        "connections": server.connections - connections,
    }


def bench(runs: int, workers: list[int], latency_ms: float, isolation: str) -> dict[str, Any]:
    figures: dict[str, dict[str, Any]] = {}
    identical = True
    with tempfile.TemporaryDirectory(prefix="bench-evaluate-") as tmp, StandInServer(latency_ms / 1000) as server:
        reference = None
        for count in workers:
            out = Path(tmp) / f"workers-{count}"
            figures[str(count)] = evaluate(server, out, runs, count, isolation)
            print(f"workers {count:>3}: {json.dumps(figures[str(count)])}", flush=True)
            got = outputs(out, "llm")
            got[1]["config"].pop("out")
            if reference is None:
                reference = got
            identical = identical and got == reference
    first = figures[str(workers[0])]["episodes_per_min"]
    ratio = {str(count): round(figures[str(count)]["episodes_per_min"] / first, 2) for count in workers[1:]}
    episodes = runs  # the retail task has no faults: one episode per run
    return {"episodes": episodes, "latency_ms": latency_ms, "runs": figures, "ratio": ratio, "identical": identical}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=64, help="Episodes (the task played this many times).")
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 16], help="Worker counts; the first: reference.")
    parser.add_argument("--latency-ms", type=float, default=200.0, help="The stand-in server's delay per reply.")
    parser.add_argument("--isolation", choices=("bwrap", "none"), default="bwrap", help="Sandbox isolation.")
    args = parser.parse_args(argv)
    summary = bench(args.runs, args.workers, args.latency_ms, args.isolation)
    for count, ratio in summary["ratio"].items():
        print(f"{count} workers: {ratio}x the episodes per minute of {args.workers[0]}", flush=True)
    print(json.dumps(summary), flush=True)
    return 0 if summary["identical"] else 1


if __name__ == "__main__":
    sys.exit(main())
