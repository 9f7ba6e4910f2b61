"""Kernel.digest (a hash of the state later cells can observe) and the ReplyTap hook that lets a caller answer an
operation from a record instead of the kernel process."""

from __future__ import annotations

from typing import Any

import pytest


def _state(kernel, *cells: str) -> str | None:
    """The digest after ``cells`` in a fresh namespace (same kernel: same workspace path, which the state names)."""
    kernel.reset()
    for cell in cells:
        assert kernel.execute(cell).ok, cell
    return kernel.digest()


LOAD = "import pandas as pd\ndf = pd.read_csv(f'{DATA_DIR}/data/sales.csv')"


def test_equal_states_have_equal_digests_whatever_their_history(kernel):
    a = _state(kernel, LOAD, "total = int(df['amount'].sum())")
    b = _state(kernel, LOAD, "total = 0", "x = 1\ndel x", "total = int(df['amount'].sum())")
    assert isinstance(a, str) and len(a) == 64
    assert a == b


@pytest.mark.parametrize(
    "other",
    [
        ["total = int(df['amount'].sum()) + 1"],  # another value
        ["total = int(df['amount'].sum())", "df.loc[0, 'amount'] = 11"],  # a frame mutated in place
        ["total = int(df['amount'].sum())", "extra = 1"],  # one more name
        ["total = int(df['amount'].sum())", "import numpy as np\nnp.random.seed(3)"],  # numpy's global generator
    ],
)
def test_any_observable_difference_changes_the_digest(kernel, other):
    base = _state(kernel, LOAD, "total = int(df['amount'].sum())", "import numpy as np\nnp.random.seed(0)")
    assert base != _state(kernel, LOAD, *other)


def test_aliasing_between_names_is_part_of_the_state(kernel):
    # ``a.append`` later changes b too in the first state only: the two must not look alike
    assert _state(kernel, "a = [1]\nb = a") != _state(kernel, "a = [1]\nb = [1]")


def test_a_function_defined_in_a_cell_gives_no_digest(kernel):
    assert _state(kernel, "def f(x):\n    return x + 1") is None
    assert _state(kernel, "f = lambda x: x") is None


def test_the_workspace_listing_is_part_of_the_digest(kernel):
    before = kernel.digest()
    assert kernel.execute("open('out.txt', 'w').write('x')").ok
    assert kernel.digest() != before


class _Serve:
    """A ReplyTap that answers one given code with a fixed reply and remembers what it saw and owed."""

    def __init__(self, code: str, raw: dict[str, Any]) -> None:
        self.code, self.raw = code, raw
        self.seen_ops: list[tuple[str, str, bool]] = []
        self.synced = self.discarded = 0

    def reply(self, op: str, code: str) -> dict[str, Any] | None:
        return dict(self.raw) if code == self.code else None

    def seen(self, op, code, timeout, raw, result) -> None:
        self.seen_ops.append((op, code, raw is not None))

    def sync(self) -> None:
        self.synced += 1

    def discard(self) -> None:
        self.discarded += 1


def test_a_tap_reply_gets_the_host_bookkeeping_of_a_real_one(kernel):
    first = kernel.execute("x = 41")
    raw = {
        "ok": True,
        "stdout": "served\n",
        "stderr": "",
        "display": None,
        "error_type": None,
        "error_message": None,
        "traceback": None,
        "timed_out": False,
        "memory_exceeded": False,
        "cpu_exceeded": False,
        "output_truncated": False,
        "duration_s": 0.0,
        "results": [],
        "changes": [{"name": "x", "kind": "changed", "type": "int", "shape": None, "summary": "42"}],
    }
    tap = _Serve("x = 42", raw)
    kernel.tap = tap
    served = kernel.execute("x = 42")
    assert served.stdout == "served\n"
    assert [(v.name, v.version) for v in served.variables] == [("x", first.variables[0].version + 1)]
    assert kernel.variables()["x"].summary == "42"
    assert tap.seen_ops == []  # a served reply is not "seen": the kernel process did not answer
    real = kernel.execute("y = x")
    assert tap.seen_ops == [("execute", "y = x", True)]
    assert real.ok  # the process never ran x = 42: it still holds 41
    kernel.tap = None
    assert kernel.execute("print(x, y)").stdout == "41 41\n"


def test_a_tap_is_synced_before_a_snapshot_and_discarded_on_restore(kernel):
    tap = _Serve("never", {})
    kernel.tap = tap
    cp = kernel.checkpoint()
    assert tap.synced == 1
    kernel.checkpoint(restorable=False)  # an id without a snapshot needs nothing
    assert tap.synced == 1
    kernel.execute("z = 1")
    kernel.restore(cp)
    assert tap.discarded == 1
    kernel.digest()
    assert tap.synced == 2


def test_a_kernel_that_hangs_in_the_digest_is_restarted(kernel):
    # pickling runs the user's __reduce__: one that never returns must not wedge the host
    cell = "class Slow:\n    def __reduce__(self):\n        while True: pass\nslow = Slow()\ndel Slow"
    assert kernel.execute(cell).ok
    assert kernel.digest() is None
    assert kernel.restarts == 1 and "slow" not in kernel.variables()
    assert kernel.execute("x = 1\nprint(x)").stdout == "1\n"  # the next request gets its own reply
