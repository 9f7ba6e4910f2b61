"""``WorkerEnv``: a Gymnasium environment in which the agent is the data-science worker.

The episode is a :class:`~harness.manager.runtime.ManagerRuntime` episode with no manager (``none`` policy) and a
:class:`~harness.worker.react.ReActWorker` without a chat backend, stepped directly: each time the worker's model
must reply, the episode's request is the worker's conversation (the chat message list), and ``step(action)`` answers
it with the agent's reply (``episode.answer``). So the ReAct worker's own formatting is what the agent sees and what
it must write: nothing is duplicated here.

- **Observation**: the newest user message of the worker's conversation: first the task contract
  (:func:`harness.worker.spec.task_contract`: objective, sandbox, data profile, first question, output rules), then the
  execution output of each cell (:func:`harness.worker.react.observation_text`), with the next question appended
  when a turn ends. ``info["messages"]`` holds the whole conversation (system prompt included) for chat models.
  After the last step the observation is ``""``.
- **Action**: one reply: a short thought and one fenced ```python cell, or a line ``Final Answer: ...``
  (:func:`harness.worker.react.parse_worker_reply`).
- **Reward**: ``0.0`` until the end, then the task grade's score (:func:`harness.tasks.grade_task`); an invalid
  submission (score ``None``) gets ``0.0`` and ``info["grade"]["valid"]`` is False.
- **terminated**: every question was answered or its step budget (``max_steps_per_turn``) spent; **truncated**:
  ``max_env_steps`` agent steps were taken first.

Spaces: :class:`~envs.spaces.UnicodeText` for both.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import gymnasium as gym

from envs.common import SandboxHolder, advance, check_step, merged_config
from envs.errors import EpisodeError
from envs.spaces import UnicodeText
from harness.llm import Message
from harness.manager.episode_loop import Episode
from harness.manager.policies import NonePolicy
from harness.manager.runtime import ManagerRuntime, RuntimeConfig
from harness.tasks import load_task, resolve_task_path
from harness.worker.react import ReActConfig, ReActWorker
from harness.worker.spec import task_contract


@dataclass
class WorkerEnvConfig:
    task: str = field(default="retail-sales", metadata={"help": "a task folder or the name of a built-in task."})
    max_steps_per_turn: int = field(default=10, metadata={"help": "worker steps per question (ReActConfig)."})
    max_env_steps: int = field(
        default=256, metadata={"help": "agent steps per episode before it is truncated (truncated=True)."}
    )
    isolation: str | None = field(
        default=None, metadata={"help": "sandbox isolation: bwrap | none. None: bwrap when installed, else none."}
    )

    def __post_init__(self) -> None:
        if self.max_steps_per_turn < 1 or self.max_env_steps < 1:
            raise ValueError(
                f"max_steps_per_turn={self.max_steps_per_turn}, max_env_steps={self.max_env_steps}: both must be >= 1."
            )


class WorkerEnv(gym.Env[str, str]):
    """The agent is the worker (see the module docstring). Keyword ``overrides`` set :class:`WorkerEnvConfig`
    fields (what ``gymnasium.make`` passes)."""

    metadata = {"render_modes": []}

    def __init__(
        self,
        config: WorkerEnvConfig | None = None,
        *,
        runtime_config: RuntimeConfig | None = None,
        render_mode: str | None = None,
        **overrides: Any,
    ):
        self.config = merged_config(WorkerEnvConfig, config, overrides, render_mode, "WorkerEnv")
        self.render_mode = None
        self.task = load_task(resolve_task_path(self.config.task))
        self.contract = task_contract(self.task)
        self.runtime_config = runtime_config or RuntimeConfig()
        self.observation_space = UnicodeText()
        self.action_space = UnicodeText()
        self.sandboxes = SandboxHolder(self.config.isolation)
        self._run: Episode | None = None
        self._done = False
        self.env_steps = 0

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
        super().reset(seed=seed)
        self._stop()
        if options:
            raise ValueError(f"reset options {sorted(options)} are not understood; WorkerEnv takes none.")
        kernel = self.sandboxes.new_kernel(self.task.public_dir)
        config = ReActConfig(max_steps=self.config.max_steps_per_turn)
        worker = ReActWorker(None, kernel, config, contract=self.contract)  # its replies: the agent's actions
        runtime = ManagerRuntime(self.task, kernel, worker, NonePolicy(), self.runtime_config)
        self._run, self._done, self.env_steps = runtime.start(), False, 0
        messages = self._advance(None)
        if messages is None:
            self._done = True
            raise EpisodeError(f"task {self.task.id}: the episode ended before the worker's first step")
        return messages[-1]["content"], self._info(messages)

    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        what = "one reply string (thought + cell or Final Answer)"
        check_step("WorkerEnv", self._run is not None, self._done, action, what)
        assert self._run is not None
        self.env_steps += 1
        messages = self._advance(action)
        if messages is None:
            self._done = True  # the kernel stays up: the next reset recycles it
            record = self._run.record
            grade = dict(record.grade or {})
            info = {**self._info(None), "record": record, "grade": grade}
            return "", float(grade.get("score") or 0.0), True, False, info
        truncated = self.env_steps >= self.config.max_env_steps
        if truncated:
            self._stop()
        return messages[-1]["content"], 0.0, False, truncated, self._info(messages)

    def close(self) -> None:
        self._stop()
        self.sandboxes.close()
        super().close()

    def _info(self, messages: list[Message] | None) -> dict[str, Any]:
        info: dict[str, Any] = {"task_id": self.task.id, "env_steps": self.env_steps}
        if messages is not None:
            info["messages"] = [dict(m) for m in messages]
        return info

    def _advance(self, action: str | None) -> list[Message] | None:
        """Answer the worker's pending request with ``action`` (None: read the first one); its next conversation,
        None at the end. An exception inside the episode ends it: the kernel is closed, :class:`EpisodeError`."""
        assert self._run is not None
        try:
            return advance(self._run, action, f"task {self.task.id}, env step {self.env_steps}")
        except EpisodeError:
            self._stop()
            self.sandboxes.close_kernel()
            raise

    def _stop(self) -> None:
        """Close the running episode (if any); the kernel stays up for the next reset to recycle."""
        if self._run is not None:
            self._run.close()
        self._done = True
