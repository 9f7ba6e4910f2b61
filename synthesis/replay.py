"""Joining a faulted run to a recorded run once their kernels hold the same state (faster, and exact).

After its faulted turn, a gold-managed run has usually repaired the fault: its namespace is then the clean run's at
the same turn boundary, and every later cell and probe is the clean run's, from the same state, so the kernel would
answer exactly as it did there. Likewise an unmanaged faulty run whose fault changed nothing continues exactly as
the clean unmanaged run. Measured on the default config: 94 % of the gold runs and ~20 % of the faulty runs join;
their later turns were ~17 % and ~3 % of the synthesis wall time.

:class:`ReplayTap` is the :class:`harness.sandbox.ReplyTap` that does it:

- **recording** (the clean runs): every execute/probe and its raw reply, in order, and before each turn that a
  faulted run could join at, the kernel's :meth:`~harness.sandbox.Kernel.digest` and the position in that list;
- **following** (a faulted run, from the boundary after its faulted turn): when the live kernel's digest equals the
  recorded one there, each operation that is the recorded run's next one gets the recorded reply; the host applies
  its bookkeeping as for a real reply (variable versions, the workspace scan), so the episode record is the one a
  real run gives. At the first operation that differs (or a reply that cannot be served, below) the tap first runs
  the served operations in the kernel process, checks that it answers as recorded (else :class:`ReplayDiverged`,
  and the caller plays the run again without the tap), and from then on the kernel answers for real. A run that
  follows to its end leaves the kernel process behind: the next run restores a checkpoint anyway.

A reply is served only when nothing in it can depend on the run's own history rather than on the state: no
``<cell-N>`` name (the cell counter differs: a repaired turn ran one more cell), no object address (``0x...`` in a
repr), no workspace change. The digest covers the namespace (pickled as one object: aliasing counts; a function or
class defined in a cell does not pickle, so such a state never joins), the variable tracker's entries, the random
generators' states and the workspace listing (see ``Kernel.digest``).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from harness.sandbox import ExecutionResult, Kernel

_HISTORY = re.compile(r"<cell-\d+>|0x[0-9a-fA-F]{6,}")


class ReplayDiverged(RuntimeError):
    """The kernel process did not answer a served operation as recorded: the state digest missed a difference."""


@dataclass
class _Op:
    op: str
    code: str
    timeout: float
    reply: str  # the raw reply as JSON, without its duration
    servable: bool


@dataclass
class Recording:
    """One run's operations in order and, per turn index, ``(digest, position)`` before that turn (and the host's
    view of the variables there, a cheap first check)."""

    ops: list[_Op] = field(default_factory=list)
    joins: dict[int, tuple[str, int]] = field(default_factory=dict)
    views: dict[int, Any] = field(default_factory=dict)


def _view(kernel: Kernel) -> list[tuple[Any, ...]]:
    """The host's record of the variables without their versions: states that differ here differ (the digest of
    the kernel, ~4 ms, is then not asked for)."""
    return sorted((v.name, v.type, v.shape, v.summary) for v in kernel.variables().values())


def _reply_text(raw: dict[str, Any]) -> str:
    return json.dumps({k: v for k, v in raw.items() if k != "duration_s"}, ensure_ascii=False)


class ReplayTap:
    """Records a kernel's operations, or serves a recorded run's replies to a run that joined it (module docs)."""

    def __init__(self, kernel: Kernel) -> None:
        self.kernel = kernel
        self.recording: Recording | None = None
        self._following: Recording | None = None
        self._start = self._cursor = 0
        self.served = 0  # operations answered from a recording
        self.joined = 0  # runs that joined a recording
        self.verify = False  # tests: sync() even at the end of a followed run, so every served reply is checked

    # ---- recording ------------------------------------------------------------------------------------------------
    def record(self) -> Recording:
        """Start recording (ends any following); returns the recording being filled."""
        self.discard()
        self.recording = Recording()
        return self.recording

    def mark(self, index: int) -> None:
        """Note the kernel's digest before turn ``index`` of the run being recorded (no digest: not joinable)."""
        assert self.recording is not None
        digest = self.kernel.digest()
        if digest is not None:
            self.recording.joins[index] = (digest, len(self.recording.ops))
            self.recording.views[index] = _view(self.kernel)

    def stop(self) -> None:
        self.recording = None

    # ---- following ------------------------------------------------------------------------------------------------
    def follow(self, recording: Recording, index: int) -> bool:
        """Join ``recording`` before its turn ``index`` if the kernel's state is the one recorded there."""
        if index not in recording.joins or self.recording is not None:
            return False
        digest, position = recording.joins[index]
        if _view(self.kernel) != recording.views[index] or self.kernel.digest() != digest:
            return False
        self._following, self._start, self._cursor = recording, position, position
        self.joined += 1
        return True

    def leave(self) -> None:
        """End a followed run: the kernel process stays behind (``verify``: it is brought up to date and checked)."""
        if self.verify:
            self.sync()
        self.discard()

    # ---- the ReplyTap protocol ------------------------------------------------------------------------------------
    def reply(self, op: str, code: str) -> dict[str, Any] | None:
        recording = self._following
        if recording is None:
            return None
        if self._cursor < len(recording.ops):
            entry = recording.ops[self._cursor]
            if entry.servable and entry.op == op and entry.code == code:
                self._cursor += 1
                self.served += 1
                return {**json.loads(entry.reply), "duration_s": 0.0}
        self.sync()
        return None

    def seen(self, op: str, code: str, timeout: float, raw: dict[str, Any] | None, result: ExecutionResult) -> None:
        if self.recording is None:
            return
        text = "" if raw is None else _reply_text(raw)
        servable = raw is not None and not result.files and not _HISTORY.search(text)
        self.recording.ops.append(_Op(op, code, timeout, text, servable))

    def sync(self) -> None:
        recording, self._following = self._following, None
        if recording is None:
            return
        for entry in recording.ops[self._start : self._cursor]:
            raw = self.kernel._exchange(entry.op, entry.code, entry.timeout)
            if _reply_text(raw) != entry.reply:
                raise ReplayDiverged(
                    f"kernel {self.kernel.kernel_id}: replaying {entry.op} {entry.code[:80]!r} gave another reply "
                    "than the recorded run at the same state digest"
                )

    def discard(self) -> None:
        self._following = None
