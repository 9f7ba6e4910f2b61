"""The executors (harness.executors) without a Ray cluster: results in submission order, one setup per process (per
thread for the thread executor), a setup error reaching the parent, and bad input (options, Ray missing, an address
where nothing answers) refused before any work starts, in code and on the command line. The Ray runs are in
tests/synthesis/test_ray_executor.py."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from harness import executors
from harness.cli import main
from harness.executors import (
    INSTALL_RAY,
    ExecutorError,
    ExecutorOptions,
    RayUnavailableError,
    Work,
    check_executor,
    open_executor,
)

SMOKE = str(Path(__file__).resolve().parents[2] / "configs" / "synthesis" / "smoke.yaml")
_STATE: dict[str, int] = {}


def _setup(offset: int) -> None:
    _STATE["offset"] = offset
    _STATE["setups"] = _STATE.get("setups", 0) + 1


def _teardown() -> None:
    _STATE["teardowns"] = _STATE.get("teardowns", 0) + 1


def _unit(item: int) -> tuple[int, int, int]:
    time.sleep(0.01 * (item % 3))  # finish out of order in a pool
    return item + _STATE["offset"], os.getpid(), _STATE["setups"]


def _broken_setup() -> None:
    raise ValueError("the sandbox cannot start: bwrap is missing")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.mark.parametrize("workers", [1, 2])
def test_local_executors_yield_in_submission_order_after_one_setup_per_process(workers):
    _STATE.clear()
    work = Work(_unit, setup=_setup, args=(100,), teardown=_teardown)
    with open_executor(ExecutorOptions(), workers=workers) as executor:
        results = list(executor.imap(work, range(12)))
    assert [value for value, _, _ in results] == [100 + i for i in range(12)]
    assert {setups for _, _, setups in results} == {1}  # every process set up once, before its first unit
    pids = {pid for _, pid, _ in results}
    if workers == 1:
        assert pids == {os.getpid()} and _STATE["teardowns"] == 1
    else:
        assert os.getpid() not in pids and "setups" not in _STATE  # the pool's processes, not this one


@pytest.mark.parametrize("workers", [1, 2])
def test_a_setup_that_raises_reaches_the_parent(workers):
    with open_executor(ExecutorOptions(), workers=workers) as executor:
        with pytest.raises(ValueError, match="bwrap is missing"):
            list(executor.imap(Work(_unit, setup=_broken_setup), range(4)))


_THREAD = threading.local()
_THREADS: dict[str, list[str]] = {"setups": [], "teardowns": []}


def _thread_setup(offset: int) -> None:
    _THREAD.offset = offset
    _THREADS["setups"].append(threading.current_thread().name)


def _thread_teardown() -> None:
    _THREADS["teardowns"].append(threading.current_thread().name)


def _thread_unit(item: int) -> tuple[int, str]:
    time.sleep(0.01 * (item % 3))  # finish out of order
    return item + _THREAD.offset, threading.current_thread().name


def test_the_thread_executor_yields_in_order_with_one_setup_and_teardown_per_thread():
    _THREADS["setups"].clear(), _THREADS["teardowns"].clear()
    work = Work(_thread_unit, setup=_thread_setup, args=(100,), teardown=_thread_teardown)
    with open_executor(ExecutorOptions(), threads=3) as executor:
        assert isinstance(executor, executors.ThreadExecutor)
        results = list(executor.imap(work, range(12)))
    assert [value for value, _ in results] == [100 + i for i in range(12)]
    names = {name for _, name in results}
    assert threading.current_thread().name not in names and len(names) > 1
    assert sorted(_THREADS["setups"]) == sorted(_THREADS["teardowns"]) and len(_THREADS["setups"]) == 3
    with open_executor(ExecutorOptions(), threads=2) as executor:
        with pytest.raises(ValueError, match="bwrap is missing"):
            list(executor.imap(Work(_unit, setup=_broken_setup), range(4)))
        started = []
        stopped = executor.imap(Work(lambda item: started.append(item) or time.sleep(0.01) or item), range(1000))
        assert next(stopped) == 0
        stopped.close()  # no new unit starts after the caller stops
    assert len(started) < 1000
    with pytest.raises(ExecutorError, match="workers=2 processes and threads=2: choose one"):
        with open_executor(ExecutorOptions(), workers=2, threads=2):
            pass


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"executor": "dask"}, r"executor='dask': use one of \['local', 'ray'\]"),
        ({"executor": "ray", "address": "headnode"}, r"address='headnode': give HOST:PORT .*ray start --head"),
        ({"executor": "ray", "address": "h:6379", "ray_num_cpus": 4}, r"ray_num_cpus=4 .*ray start --num-cpus N"),
        ({"executor": "ray", "ray_num_cpus": 0}, r"ray_num_cpus=0: use 1 or more"),
        ({"executor": "ray", "ray_max_retries": -1}, r"ray_max_retries=-1"),
    ],
)
def test_bad_options_name_the_value_and_the_fix(options, message):
    with pytest.raises(ExecutorError, match=message):
        ExecutorOptions(**options)


def test_ray_missing_names_the_install_command(monkeypatch):
    monkeypatch.setattr(executors, "is_available", lambda name: False)
    with pytest.raises(RayUnavailableError) as caught:
        check_executor(ExecutorOptions(executor="ray"))
    message = str(caught.value)
    assert INSTALL_RAY in message and "\n" not in message
    assert isinstance(caught.value, ImportError) and isinstance(caught.value, ValueError)
    check_executor(ExecutorOptions())  # local needs nothing


def test_an_address_where_nothing_answers_fails_at_once(monkeypatch):
    monkeypatch.setattr(executors, "is_available", lambda name: True)
    address = f"127.0.0.1:{_free_port()}"
    start = time.perf_counter()
    with pytest.raises(
        ExecutorError, match=rf"nothing answers at address {address} .*ray start --head.*address: null"
    ):
        check_executor(ExecutorOptions(executor="ray", address=address, ray_connect_timeout_s=2.0))
    assert time.perf_counter() - start < 2.0


class FakeServer(threading.Thread):
    """A TCP server that is not Ray: it accepts, sends ``banner`` (maybe nothing) and keeps the connection open."""

    def __init__(self, banner: bytes) -> None:
        super().__init__(daemon=True)
        self.banner, self.accepted = banner, threading.Event()
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.address = f"127.0.0.1:{self.sock.getsockname()[1]}"

    def run(self) -> None:
        with contextlib.suppress(OSError):
            conn, _ = self.sock.accept()
            conn.sendall(self.banner)
            self.accepted.set()
            while conn.recv(1 << 16):  # until the client goes
                pass
            conn.close()

    def __enter__(self) -> FakeServer:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.sock.close()


@pytest.mark.timeout(60)
@pytest.mark.parametrize("banner", [b"SSH-2.0-OpenSSH_9.6\r\n", b""], ids=["garbage", "silent"])
def test_a_server_that_is_not_ray_is_refused_with_one_line(monkeypatch, tmp_path, capsys, banner):
    monkeypatch.setattr(executors, "is_available", lambda name: True)
    with FakeServer(banner) as server:
        options = ExecutorOptions(executor="ray", address=server.address, ray_connect_timeout_s=1.0)
        said = "answered b'SSH-2.0-O', not an HTTP/2" if banner else "sent no HTTP/2 answer within 1 s"
        with pytest.raises(ExecutorError, match=rf"the server at address {server.address} is not Ray: it {said}"):
            check_executor(options)
    with FakeServer(banner) as server:
        out = tmp_path / "synth"
        args = ["synthesize", "--config", SMOKE, "--out", str(out), "--executor", "ray", "--address", server.address]
        assert main([*args, "--ray_connect_timeout_s", "1"]) == 2
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and f"{server.address} is not Ray" in err and "address: null" in err
        assert not (out / "shards").exists()


def test_a_grpc_server_passes_the_probe(monkeypatch):
    grpc = pytest.importorskip("grpc")
    from concurrent.futures import ThreadPoolExecutor

    monkeypatch.setattr(executors, "is_available", lambda name: True)
    server = grpc.server(ThreadPoolExecutor(max_workers=1))
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    try:
        check_executor(ExecutorOptions(executor="ray", address=f"127.0.0.1:{port}", ray_connect_timeout_s=5.0))
    finally:
        server.stop(None)


@pytest.mark.timeout(60)
def test_sigterm_ends_a_command_waiting_on_the_address(tmp_path):
    with FakeServer(b"") as server:
        argv = ["synthesize", "--config", SMOKE, "--out", str(tmp_path / "synth"), "--executor", "ray"]
        argv += ["--address", server.address, "--ray_connect_timeout_s", "50"]
        script = "import sys; from harness import cli, executors; executors.is_available = lambda n: True; "
        script += "sys.exit(cli.main(sys.argv[1:]))"
        proc = subprocess.Popen([sys.executable, "-c", script, *argv], stderr=subprocess.DEVNULL)
        try:
            assert server.accepted.wait(30)
            proc.send_signal(signal.SIGTERM)
            assert proc.wait(timeout=20) == -signal.SIGTERM
        finally:
            proc.kill()
            proc.wait()


def test_the_commands_refuse_bad_executor_input_before_any_work(monkeypatch, tmp_path, capsys):
    monkeypatch.setattr(executors, "is_available", lambda name: True)
    address = f"127.0.0.1:{_free_port()}"
    bad = ["--executor", "ray", "--address", address]
    out = tmp_path / "synth"
    assert main(["synthesize", "--config", SMOKE, "--out", str(out), *bad]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("stateguard synthesize: executor ray: nothing answers at address " + address)
    assert len(err.splitlines()) == 1 and not (out / "shards").exists()  # nothing planned, nothing written
    cache = tmp_path / "suites"
    rc = main(["evaluate", "--suite", "smoke", "--cache", str(cache), "--out", str(tmp_path / "eval"), *bad])
    err = capsys.readouterr().err.strip()
    assert rc == 2 and len(err.splitlines()) == 1 and address in err
    assert not any(cache.iterdir())  # the named suite was not built
    monkeypatch.setattr(executors, "is_available", lambda name: False)
    assert main(["synthesize", "--config", SMOKE, "--out", str(out), "--executor", "ray"]) == 2
    assert INSTALL_RAY in capsys.readouterr().err
