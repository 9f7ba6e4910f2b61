"""The executors (harness.executors) without a Ray cluster: results in submission order, one setup per process, a
setup error reaching the parent, and bad input (options, Ray missing, an address where nothing answers) refused
before any work starts, in code and on the command line. The Ray runs are in tests/synthesis/test_ray_executor.py."""

from __future__ import annotations

import os
import socket
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
