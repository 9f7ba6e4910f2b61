"""The served model is owned by whoever starts it: `stateguard serve` (`run_owned`, in a real subprocess) forwards
SIGTERM/SIGINT to the server's process group, frees the port and exits 0 after a clean shutdown on SIGTERM, the
server dies with `kill -9` of its owner (PR_SET_PDEATHSIG), and `serve_in_background` kills the whole group,
grandchildren too, when its body raises.

A stand-in HTTP server (a few lines of stdlib Python) replaces vLLM / `transformers serve`; after each case a new
server starts on the same port and answers, so the normal path still works."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from harness.serving import ServeConfig, serve_in_background

REPO = Path(__file__).resolve().parents[2]

# argv: PORT PID_FILE [--grandchild] [--ignore-term]. Writes "SERVER_PID [GRANDCHILD_PID]" to PID_FILE once listening.
STANDIN = """\
import http.server, json, os, signal, subprocess, sys

class Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        body = json.dumps({"object": "list", "data": [{"id": "stand-in", "pid": os.getpid()}]}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass

port, pid_file = int(sys.argv[1]), sys.argv[2]
if "--ignore-term" in sys.argv:
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
server = http.server.HTTPServer(("127.0.0.1", port), Handler)
pids = [os.getpid()]
if "--grandchild" in sys.argv:  # it holds the listening socket too: the port is free only once it is dead as well
    sleeper = "import time; time.sleep(600)"
    pids.append(subprocess.Popen([sys.executable, "-c", sleeper], pass_fds=[server.fileno()]).pid)
with open(pid_file + ".tmp", "w") as f:
    f.write(" ".join(map(str, pids)))
os.replace(pid_file + ".tmp", pid_file)
server.serve_forever()
"""

# `stateguard serve` after it has built the server command: argv GRACE_S COMMAND...
SERVE = (
    "import sys; from harness.serving import run_owned; sys.exit(run_owned(sys.argv[2:], grace_s=float(sys.argv[1])))"
)


@pytest.fixture
def standin(tmp_path):
    path = tmp_path / "standin.py"
    path.write_text(STANDIN)
    return path


@pytest.fixture
def checkpoint(tmp_path):
    """What ServeConfig checks of a checkpoint; the stand-in never reads it."""
    path = tmp_path / "ckpt"
    path.mkdir()
    (path / "config.json").write_text("{}")
    (path / "chat_template.jinja").write_text("{{ messages }}")
    return path


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def port_is_free(port: int) -> bool:
    """Nothing listens on the port: a bind succeeds (SO_REUSEADDR, as servers do, so TIME_WAIT does not count)."""
    with socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True


def alive(pid: int) -> bool:
    """The process exists and is not a zombie (an orphan's zombie waits for PID 1, which may not reap it)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False
    except OSError:  # no /proc
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        return True


def wait_for(predicate, timeout_s: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.05)
    return predicate()


def read_pids(pid_file: Path) -> list[int]:
    assert wait_for(pid_file.exists), "the stand-in server did not start"
    return [int(pid) for pid in pid_file.read_text().split()]


def models(port: int) -> dict:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/v1/models", timeout=5) as response:
        return json.loads(response.read())


def start_serve(standin: Path, port: int, pid_file: Path, *flags: str, grace_s: float = 5.0) -> subprocess.Popen:
    """A real `stateguard serve`-equivalent process running the stand-in; returns once the stand-in answers."""
    command = [sys.executable, str(standin), str(port), str(pid_file), *flags]
    parent = subprocess.Popen([sys.executable, "-c", SERVE, str(grace_s), *command], cwd=REPO)
    read_pids(pid_file)
    assert models(port)["data"][0]["id"] == "stand-in"
    return parent


def assert_serves_again(checkpoint: Path, standin: Path, port: int, tmp_path: Path) -> None:
    """The normal path: a new server starts on the same port, answers, and frees the port when its block ends."""
    pid_file = tmp_path / "again.pid"
    command = [sys.executable, str(standin), str(port), str(pid_file)]
    config = ServeConfig(str(checkpoint), port=port)
    with serve_in_background(config, log_path=tmp_path / "again.log", startup_timeout_s=10, command=command) as url:
        assert url == f"http://127.0.0.1:{port}/v1"
        [pid] = read_pids(pid_file)
        assert models(port)["data"][0]["pid"] == pid
    assert not alive(pid) and port_is_free(port)


@pytest.mark.parametrize(("signum", "status"), [(signal.SIGTERM, 0), (signal.SIGINT, 130)])
def test_a_signal_to_serve_stops_the_server_group_and_frees_the_port(signum, status, standin, checkpoint, tmp_path):
    port, pid_file = free_port(), tmp_path / "server.pid"
    parent = start_serve(standin, port, pid_file, "--grandchild")
    server, grandchild = read_pids(pid_file)
    parent.send_signal(signum)
    # the stand-in dies of the forwarded signal within the grace period: after SIGTERM that is a clean shutdown (0);
    # SIGINT (KeyboardInterrupt) keeps 128 + 2
    assert parent.wait(timeout=10) == status
    assert wait_for(lambda: not alive(server) and not alive(grandchild), 5)
    assert port_is_free(port)
    with pytest.raises(OSError):
        models(port)
    assert_serves_again(checkpoint, standin, port, tmp_path)


def test_a_server_that_ignores_sigterm_is_killed_after_the_grace_period(standin, checkpoint, tmp_path):
    port, pid_file = free_port(), tmp_path / "server.pid"
    parent = start_serve(standin, port, pid_file, "--ignore-term", grace_s=1.0)
    [server] = read_pids(pid_file)
    started = time.monotonic()
    parent.terminate()
    assert parent.wait(timeout=10) == 128 + signal.SIGKILL
    assert 1.0 <= time.monotonic() - started < 8
    assert not alive(server) and port_is_free(port)
    assert_serves_again(checkpoint, standin, port, tmp_path)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux-only")
def test_kill_9_of_serve_kills_the_server(standin, checkpoint, tmp_path):
    port, pid_file = free_port(), tmp_path / "server.pid"
    parent = start_serve(standin, port, pid_file)
    [server] = read_pids(pid_file)
    parent.kill()
    parent.wait(timeout=10)
    assert wait_for(lambda: not alive(server), 5), "the server outlived `kill -9` of its owner"
    assert wait_for(lambda: port_is_free(port), 5)
    assert_serves_again(checkpoint, standin, port, tmp_path)


def test_serve_in_background_kills_the_whole_group_when_its_body_raises(standin, checkpoint, tmp_path):
    port, pid_file = free_port(), tmp_path / "server.pid"
    command = [sys.executable, str(standin), str(port), str(pid_file), "--grandchild"]
    config = ServeConfig(str(checkpoint), port=port)
    with pytest.raises(RuntimeError, match="the evaluation failed"):
        with serve_in_background(config, log_path=tmp_path / "serve.log", startup_timeout_s=10, command=command):
            server, grandchild = read_pids(pid_file)
            assert os.getpgid(grandchild) == os.getpgid(server) == server  # the server leads its own group
            raise RuntimeError("the evaluation failed")
    assert wait_for(lambda: not alive(server) and not alive(grandchild), 5)
    assert port_is_free(port)
    assert_serves_again(checkpoint, standin, port, tmp_path)
