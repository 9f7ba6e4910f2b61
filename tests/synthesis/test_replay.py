"""Joining faulted runs to the clean runs' recordings (synthesis.replay): the same records as playing every turn,
served replies checked against the kernel, and a divergence falls back to a full play."""

from __future__ import annotations

import pytest

from harness.sandbox import Kernel
from synthesis import replay
from synthesis.replay import ReplayDiverged, ReplayTap
from synthesis.runs import run_task


def _everything(runs) -> list:
    """Every byte a task's runs hand to the export: records (as JSON), verdicts and the gold policies' responses."""
    rows = [runs.clean.record.to_json(), [e.response for e in runs.clean.log]]
    for o in runs.outcomes:
        rows.append((o.kept, o.reason))
        for run in (o.faulty, o.gold):
            rows.append(None if run is None else (run.record.to_json(), [e.response for e in run.log]))
    return rows


@pytest.fixture(scope="module")
def played(sandbox, task, candidates):
    return run_task(task, candidates, sandbox, join_runs=False)


def test_joined_runs_give_the_records_of_runs_played_in_full(sandbox, task, candidates, played):
    joined = run_task(task, candidates, sandbox, join_runs=True, verify_joins=True)  # verify: no served reply lied
    assert _everything(joined) == _everything(played)
    repaired = sum(o.gold is not None and bool(o.gold.record.repairs) for o in joined.outcomes)
    assert joined.joined >= repaired // 2  # most repaired runs reach the clean state again
    assert joined.served > joined.joined  # ... and then take several replies each
    assert played.joined == played.served == 0


def test_a_divergence_plays_the_run_again_without_joining(sandbox, task, candidates, played, monkeypatch):
    def diverge(self):  # every joined run "finds" at its end that the kernel answers otherwise
        if self._following is not None:
            self._following = None
            raise ReplayDiverged("simulated")

    monkeypatch.setattr(ReplayTap, "leave", diverge)
    held = []
    real_checkpoint = Kernel.checkpoint

    def checkpoint(self, restorable=True):
        cid = real_checkpoint(self, restorable)
        held.append(len(self.checkpoints))
        return cid

    monkeypatch.setattr(Kernel, "checkpoint", checkpoint)
    runs = run_task(task, candidates, sandbox, join_runs=True)
    assert runs.joined > 0
    assert _everything(runs) == _everything(played)
    # the abandoned plays' checkpoints are released: never more held than the snapshots plus one play's own
    fault_turns = {f.turn_id for f in candidates}
    assert max(held) <= 2 * len(fault_turns) + 2 * len(task.turns) + 1


def test_the_tap_checks_served_replies_when_it_brings_the_kernel_up_to_date(sandbox, task):
    """``random`` is not in the digest (CPython reseeds it in every fork), so a restored kernel joins a recording
    that used it, and the check on sync catches that the kernel now answers otherwise."""
    with sandbox.new_kernel(task.public_dir) as kernel:
        tap = ReplayTap(kernel)
        kernel.tap = tap
        start = kernel.checkpoint()
        recording = tap.record()
        tap.mark(1)
        assert kernel.execute("import random\nv = random.random()").ok
        tap.stop()
        kernel.restore(start)
        assert tap.follow(recording, 1)
        served = kernel.execute("import random\nv = random.random()")
        assert tap.served == 1 and served.variables[0].name == "v"
        with pytest.raises(ReplayDiverged, match="another reply"):
            tap.sync()


@pytest.mark.parametrize(
    ("text", "servable"),
    [
        ('{"stdout": "12 rows"}', True),
        ('{"traceback": "File \\"<cell-7>\\", line 1"}', False),  # the cell counter differs between runs
        ('{"display": "<DataFrameGroupBy object at 0x7f3a2c1d9e50>"}', False),  # an address
    ],
)
def test_replies_naming_the_run_history_are_not_served(text, servable):
    assert (replay._HISTORY.search(text) is None) is servable
