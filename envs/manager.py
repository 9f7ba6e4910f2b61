"""``ManagerEnv``: a Gymnasium environment in which the agent is the state manager.

The episode is a real :class:`~harness.manager.runtime.ManagerRuntime` episode, stepped directly: ``reset`` starts
it (``runtime.start()``) and returns its first request, each ``step(action)`` answers the pending
:class:`~harness.manager.policy_types.PolicyInput` and runs the episode to the next one (``episode.answer``).
Everything the runtime does (lifecycle, tools, repairs, checkpoints, the harness fallback, grading, the EpisodeRecord)
happens as in ``stateguard run``; the agent takes the place of the policy.

Spaces: observation and action are :class:`~envs.spaces.UnicodeText` (any string of at most
:data:`~envs.spaces.MAX_TEXT_CHARS` characters).

**Formats** (``format``): ``flat`` (default) puts the agent in the place of the flat ``llm`` manager policy: it
answers every request of the episode. ``hier`` puts it in the place of tier 1 of the hierarchical manager
(:class:`~harness.manager.hier.HierPolicy`, one per episode, with the runtime's ``max_actions``, ``max_repairs`` and
``strict_wire``): the env answers every tier-0 request itself (:meth:`~HierPolicy.tier0_respond`, recorded with actor
``harness``) and stops only at tier-1 requests, the check activation's after tier 0's ``check_execution``
(:meth:`~HierPolicy.tier1_messages` is not None). The agent's action there is vetted (:meth:`~HierPolicy.vet`): an
accepted one goes to the runtime as it is (actor ``policy``); a rejected one is replaced by tier 0's confirmation
(:meth:`~HierPolicy.fallback`, recorded in ``env.hier.rejected`` and in the confirming response's ``<think>``), which
ends tier 1's part of the activation.

``hier_checks`` puts it in the place of tier 1 of the check-writing hierarchical manager (``HierPolicy(...,
writes="checks")``): the env stops once per state, at the check activation's first request after tier 0's
``check_execution`` (:meth:`~HierPolicy.tier1_messages`: the checks system prompt and the checks request). The
agent's action is tier 1's reply text (``{"checks": [spec, ...]}``), kept for the state through
:meth:`~HierPolicy.take_checks` (an unparseable reply gives the state no check); tier 0 then sends one ``run_check``
per kept spec (the clean verifier) and decides: REPAIR iff a written check failed, else FINALIZE_RELATIONS. The step's
reward is that reply's check-writing reward (:func:`rewards.score_checks`, :class:`rewards.CheckRewardConfig` given as
``checks_reward``): the verdicts of the specs as tier 0 ran them, and, on the turn of the episode's harmful fault, the
verdicts of the same specs on the clean twin's state of that turn (:class:`~envs.twins.CleanTwins`: the task's
reference programs up to that turn, in a second kernel); the turn's label comes from
:func:`~envs.checks_step.turn_label`. Every step's ``info`` holds ``checks`` (turn, label, parsed, kept and dropped
specs, verdicts here and on the clean state, tier 0's decision) and ``reward_terms`` (``protocol``, ``catch``,
``false_alarm``); the last one also ``record``, ``grade`` and ``episode_reward_terms`` (:func:`rewards.score_episode`'s
terms of the whole episode, for logging; the reward is per reply).

- **Observation**: the newest message of the agent's conversation (``info["messages"]``). ``flat``: the conversation
  the ``llm`` manager policy would send for the current :class:`~harness.manager.policy_types.PolicyInput`
  (:meth:`harness.manager.llm_policy.LLMPolicy.messages`): at the start of an activation the rendered activation
  (:func:`~harness.manager.prompts.render_activation`: observation, public turn, legal actions); within an activation
  the result of the previous action wrapped in ``<tool_response>``
  (:func:`~harness.manager.prompts.render_tool_response`). ``hier``: tier 1's conversation
  (:meth:`HierPolicy.tier1_messages <harness.manager.hier.HierPolicy.tier1_messages>`): the decision prompt at the
  first tier-1 request of a check activation, then the ``<tool_response>`` of each tier-1 call. After the last step
  the observation is ``""``.
- **Action**: one model response in the wire format (``<tool_call>{"name": ..., "arguments": {...}}</tool_call>``,
  optionally after a ``<think>`` block), parsed by the runtime like any policy's response; unparseable or illegal
  responses are recorded and answered with their refusal (``hier``: replaced by the confirmation), never raised.
- **Reward** (``flat``, ``hier``): ``0.0`` until the episode ends, then ``rewards.score_episode(record, fault_info,
  reward_config).total`` (the terms go to ``info["reward_terms"]``).
  A truncated episode has no record and gets ``0.0``. (``hier_checks``: the reward of each reply, above.)
- **terminated**: the runtime finished the task (graded); **truncated**: ``max_env_steps`` agent steps were taken
  first (the runtime's own budgets, actions per activation and review activations, end in the harness fallback,
  so the task always finishes unless this cap cuts it).
- **info**: ``episode_id``, ``task_id``, ``env_steps``; ``policy_input`` (the :class:`PolicyInput` the next action
  answers, so scripted policies such as :class:`synthesis.gold.GoldPolicy` can drive the env:
  ``env.step(policy.respond(info["policy_input"]))``), ``messages`` and ``tools`` (the agent's whole conversation
  for it and its function tools: the ``llm`` policy's, or tier 1's in ``hier``) and ``activation`` (the 0-based index
  of its activation among the episode's policy activations); after a step ``legal`` and ``action_result`` of that
  action (``hier``: ``rejected``, why :meth:`~HierPolicy.vet` rejected it or None; a rejected action is not
  ``legal`` and its ``action_result`` is that of the confirmation that replaced it); at the end ``record`` (the
  :class:`~harness.manager.episode.EpisodeRecord`), ``grade`` and ``reward_terms``.

Workers (``worker``): ``replay`` (default when a :class:`~envs.pool.ReplayPool` is given: a synthesized
counterfactual episode replayed with the scripted worker carrying its fault, so a REPAIR that names a corrupted
variable leads to the recorded repaired branch and anything else to the recorded faulty continuation), ``scripted``
(default without a pool: a task folder or built-in name and an optional faults file, as ``stateguard run``) and
``openai:URL`` / ``hf:PATH`` (the ReAct worker over a model, built by :func:`harness.worker.spec.build_worker`).

``reset(seed=None, options={"episode_id": ...})`` plays that episode; without one it draws an episode id with the
env's ``np_random``. Each reset closes the previous episode (``episode.close()``) and recycles its kernel (same task)
or replaces it, from the env's one sandbox (:class:`~envs.common.SandboxHolder`); ``close`` shuts everything down.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import gymnasium as gym

from envs.checks_step import ChecksStep, check_reward_info, ran_checks, turn_label
from envs.common import SandboxHolder, advance, check_step, merged_config
from envs.errors import EpisodeError
from envs.pool import ReplayPool
from envs.spaces import UnicodeText
from envs.twins import CleanTwins
from harness.llm import Message
from harness.manager.episode import EpisodeRecord
from harness.manager.episode_loop import Episode, Reply
from harness.manager.hier import HARNESS, POLICY, HierPolicy
from harness.manager.llm_policy import LLMPolicy
from harness.manager.policy_types import PolicyInput
from harness.manager.runtime import ManagerRuntime, RuntimeConfig
from harness.manager.wire import parse_response
from harness.sandbox import Sandbox
from harness.tasks import Task, load_task
from harness.worker.spec import build_worker, parse_worker_spec

logger = logging.getLogger(__name__)


CONVERSATION = LLMPolicy(backend=None)  # type: ignore[arg-type]
"""Only its :meth:`~LLMPolicy.messages` is used: the conversation the ``llm`` policy would send (no backend)."""


FORMATS = ("flat", "hier", "hier_checks")
"""The agent's place (``ManagerEnvConfig.format``): the flat ``llm`` policy's, tier 1's of the ``hier`` manager, or
tier 1's of the check-writing ``hier`` manager (``writes="checks"``)."""

CHECK_DECISIONS = ("REPAIR", "FINALIZE_RELATIONS", "ABANDON_STATE")
"""Tier 0's decisions that end a check activation after the written checks ran (``hier_checks``)."""


def check_format(format: str) -> str:
    """``format`` when it is one of :data:`FORMATS`, else a one-line ``ValueError`` naming them."""
    if format not in FORMATS:
        raise ValueError(f"format={format!r} is not understood; use one of: {', '.join(FORMATS)}.")
    return format


def observation_text(inp: PolicyInput) -> str:
    """The newest message of the ``llm`` policy's conversation for ``inp`` (see the module docstring)."""
    return CONVERSATION.messages(inp)[-1]["content"]


@dataclass
class ManagerEnvConfig:
    format: str = field(
        default="flat",
        metadata={
            "help": "flat: the agent answers every request (the llm manager's conversation). hier: the hier manager's "
            "tier 0 answers its requests and the agent is tier 1 (the check activations' decisions)."
        },
    )
    worker: str | None = field(
        default=None,
        metadata={
            "help": "replay | scripted | openai:URL | hf:PATH. None: replay when a pool is given, else scripted."
        },
    )
    pool: str | None = field(
        default=None, metadata={"help": "replay: a `stateguard synthesize` output folder (episodes/index.jsonl)."}
    )
    task: str = field(
        default="retail-sales",
        metadata={"help": "scripted and model workers: a task folder or the name of a built-in task."},
    )
    faults: str | None = field(
        default=None, metadata={"help": "scripted worker: a faults.jsonl to replay (one fault for the task)."}
    )
    fault_line: int | None = field(
        default=None, metadata={"help": "scripted worker: replay only this 1-based line of `faults`."}
    )
    isolation: str | None = field(
        default=None, metadata={"help": "sandbox isolation: bwrap | none. None: bwrap when installed, else none."}
    )
    max_env_steps: int = field(
        default=512, metadata={"help": "agent steps per episode before it is truncated (truncated=True)."}
    )

    def __post_init__(self) -> None:
        check_format(self.format)
        if self.worker not in (None, "replay"):
            parse_worker_spec(
                self.worker,
                flag="worker=",
                also=" | replay, or None",
                faults=self.faults is not None,
                faults_flag=f"faults={self.faults!r}",
            )
        elif self.worker == "replay" and self.faults is not None:
            raise ValueError(
                f"faults={self.faults!r}: replay takes its faults from the pool; drop faults or use worker='scripted'."
            )
        if self.max_env_steps < 1:
            raise ValueError(f"max_env_steps={self.max_env_steps}: an episode needs at least one step; use >= 1.")
        if self.fault_line is not None and self.faults is None:
            raise ValueError(f"fault_line={self.fault_line} picks a line of `faults`; pass faults too.")


class _AgentPolicy:
    """The runtime's policy inside the env: the agent, whose ``step(action)`` answers each request of the episode.
    Never asked directly (the env steps the episode itself)."""

    name = "env"
    active = True
    style = "stateful"

    def respond(self, inp: PolicyInput) -> str:
        raise RuntimeError("ManagerEnv's agent answers through env.step(action); the runtime must not call it.")


@dataclass
class _Episode:
    """What one reset resolved: the task, how to build its worker, and the fault the rewards judge against."""

    episode_id: str
    task: Task
    make_worker: Callable[[Any], Any]  # kernel -> worker
    fault_info: Any


class ManagerEnv(gym.Env[str, str]):
    """The agent is the manager (see the module docstring).

    Args:
        config: :class:`ManagerEnvConfig`; keyword ``overrides`` set its fields (what ``gymnasium.make`` passes).
        pool: a :class:`ReplayPool` or a synthesis output folder (else ``config.pool`` is opened when set).
        runtime_config: the manager runtime's budgets (default :class:`RuntimeConfig`).
        reward_config: ``rewards.RewardConfig`` (default: its defaults).
        checks_reward: ``hier_checks``: ``rewards.CheckRewardConfig`` (default: its defaults).
        sandbox: a sandbox shared with other envs (not closed by this env); default: the env's own.
    """

    metadata = {"render_modes": []}

    def __init__(
        self,
        config: ManagerEnvConfig | None = None,
        *,
        pool: ReplayPool | str | Path | None = None,
        runtime_config: RuntimeConfig | None = None,
        reward_config: Any = None,
        checks_reward: Any = None,
        sandbox: Sandbox | None = None,
        render_mode: str | None = None,
        **overrides: Any,
    ):
        self.config = merged_config(ManagerEnvConfig, config, overrides, render_mode, "ManagerEnv")
        self.render_mode = None
        if pool is None and self.config.pool is not None:
            pool = self.config.pool
        if pool is not None and not isinstance(pool, ReplayPool):
            pool = ReplayPool(pool)
        self.pool = pool
        worker = self.config.worker or ("replay" if pool is not None else "scripted")
        if worker == "replay" and pool is None:
            raise ValueError(
                "worker='replay' plays a synthesis run's episodes: pass pool=ReplayPool(dir) or pool=dir."
            )
        self.worker = worker
        self.runtime_config = runtime_config or RuntimeConfig()
        self.reward_config = reward_config
        self.observation_space = UnicodeText()
        self.action_space = UnicodeText()
        self.sandboxes = SandboxHolder(self.config.isolation, sandbox)
        if worker == "replay":
            assert pool is not None
            self.episode_ids = pool.ids
        else:
            self._task = load_task(_task_path(self.config.task))
            self._faults = self._load_faults() if worker == "scripted" else {}
            self.episode_ids = [self._task.id]
        self._run: Episode | None = None
        self._runtime: ManagerRuntime | None = None
        self._episode: _Episode | None = None
        self._request: PolicyInput | None = None
        self._done = False
        self.env_steps = 0
        self.hier: HierPolicy | None = self._new_hier() if self.config.format != "flat" else None
        """``hier``/``hier_checks``: the episode's hierarchical manager (``rejected`` lists the agent's rejected
        replies; ``written`` the checks it kept)."""
        self.checks_reward = checks_reward
        self.twins: CleanTwins | None = None  # hier_checks: the clean twins of faulted turns (built on first use)

    # ---------------------------------------------------------------- episodes
    def _load_faults(self) -> dict[str, Any]:
        from harness.worker.faults import faults_for_task, load_faults

        if self.config.faults is None:
            return {}
        faults = faults_for_task(load_faults(self.config.faults, line=self.config.fault_line), self._task.id)
        if len(faults) > 1:
            raise ValueError(
                f"faults={self.config.faults!r} holds {len(faults)} faults for task {self._task.id} (turns "
                f"{sorted(faults)}); the rewards judge one fault per episode: pick one with fault_line=N."
            )
        return faults

    def _resolve(self, episode_id: str) -> _Episode:
        from harness.worker.scripted import ScriptedWorker

        if self.worker == "replay":
            assert self.pool is not None
            entry = self.pool.entry(episode_id)
            task = self.pool.task(entry)
            return _Episode(
                entry.id,
                task,
                lambda kernel: ScriptedWorker.for_task(task, kernel, entry.faults),
                self.pool.fault_info(entry) if entry.fault_info is not None else None,
            )
        if episode_id != self._task.id:
            raise ValueError(f"episode_id={episode_id!r}: this env plays task {self._task.id!r} only.")
        task, faults = self._task, self._faults
        if self.worker == "scripted":
            return _Episode(task.id, task, lambda kernel: ScriptedWorker.for_task(task, kernel, faults),
                            _fault_info(task, faults))  # fmt: skip
        return _Episode(task.id, task, lambda kernel: build_worker(self.worker, kernel, task), None)

    # ---------------------------------------------------------------- Gymnasium API
    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
        super().reset(seed=seed)
        self._stop()
        options = dict(options or {})
        unknown = sorted(set(options) - {"episode_id"})
        if unknown:
            raise ValueError(f"reset options {unknown} are not understood; the only option is 'episode_id'.")
        episode_id = options.get("episode_id")
        if episode_id is None:
            episode_id = self.episode_ids[int(self.np_random.integers(len(self.episode_ids)))]
        episode = self._resolve(episode_id)
        kernel = self.sandboxes.new_kernel(episode.task.public_dir)
        runtime = ManagerRuntime(
            episode.task, kernel, episode.make_worker(kernel), _AgentPolicy(), self.runtime_config
        )
        self._runtime, self._episode, self._run = runtime, episode, runtime.start()
        self._done, self.env_steps = False, 0
        if self.hier is not None:
            self.hier = self._new_hier()
        request, messages = self._agent_request(self._advance(None))
        if request is None:
            self._done = True
            where = "tier 1's first request" if self.hier is not None else "the manager's first activation"
            raise EpisodeError(f"episode {episode.episode_id} of task {episode.task.id} ended before {where}")
        return messages[-1]["content"], {**self._base_info(), **self._request_info(request, messages)}

    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        check_step("ManagerEnv", self._run is not None, self._done, action, "one model response string (wire format)")
        assert self._runtime is not None and self._run is not None and self._request is not None
        self.env_steps += 1
        if self.config.format == "hier_checks":
            return self._step_checks(action)
        history = len(self._runtime.lifecycle.history)
        answer: str | Reply = action
        rejected = None
        if self.hier is not None:
            rejected = self.hier.vet(action, self._request)
            if rejected is None:
                answer = Reply(action, POLICY)
            else:
                answer = Reply(self.hier.fallback(self._request, rejected, action), HARNESS)
        request = self._advance(answer)
        legal, result = self._last_action(history, request)
        info = {**self._base_info(), "legal": legal and rejected is None, "action_result": result}
        if self.hier is not None:
            info["rejected"] = rejected
        following = self._next_observation(request, info)
        if following is None:
            record = self._run.record
            reward, terms = self._score(record)
            info.update(record=record, grade=dict(record.grade or {}), reward_terms=terms)
            return "", reward, True, False, info
        return following[0], 0.0, False, following[1], info

    def _next_observation(self, request: PolicyInput | None, info: dict[str, Any]) -> tuple[str, bool] | None:
        """The agent's next request after ``request``: its observation and whether the step budget truncates the
        episode there (its request info added to ``info``); None when the episode is over (the kernel stays up:
        the next reset recycles it)."""
        request, messages = self._agent_request(request)
        if request is None:
            self._done = True
            return None
        assert messages is not None
        info.update(self._request_info(request, messages))
        truncated = self.env_steps >= self.config.max_env_steps
        if truncated:
            self._stop()
        return messages[-1]["content"], truncated

    def _step_checks(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        """``hier_checks``: keep the agent's checks, let tier 0 run them and decide, grade the reply."""
        assert self.hier is not None and self._runtime is not None and self._run is not None
        assert self._episode is not None and self._request is not None
        request: PolicyInput | None = self._request
        turn_id = request.turn.turn_id if request.turn is not None else None
        repaired = any(r.get("turn_id") == turn_id for r in self._runtime.record.repairs)
        label = turn_label(self._episode.task, self._episode.fault_info, turn_id, repaired)
        reply = self.hier.take_checks(request, action)
        decision, previous, variable = None, (), None
        while request is not None and decision is None:  # tier 0 runs the checks; the first decision ends them
            response = self.hier.tier0_respond(request)
            parsed = parse_response(response)
            if parsed.action is not None and parsed.action.name in CHECK_DECISIONS:
                decision, previous = parsed.action.name, request.previous
                variable = (parsed.action.arguments.get("error_hint") or {}).get("error_variable")
            request = self._advance(Reply(response, self.hier.last_actor))
        specs, here = ran_checks(previous)
        clean = None
        if label == "faulted":
            clean = self._twins().verdicts(self._episode.task, str(turn_id), specs) if specs else []
        step = ChecksStep(turn_id, label, reply is not None, len(reply.specs) if reply else 0,
                          len(reply.errors) if reply else 0, here, clean, decision, variable)  # fmt: skip
        reward, graded = check_reward_info(step, self.checks_reward)
        info = {**self._base_info(), "legal": reply is not None, "action_result": decision, **graded}
        info["rejected"] = None if reply is not None else self.hier.rejected[-1]["reason"]
        following = self._next_observation(request, info)
        if following is None:
            record = self._run.record
            info.update(record=record, grade=dict(record.grade or {}), episode_reward_terms=self._score(record)[1])
            return "", reward, True, False, info
        return following[0], reward, False, following[1], info

    def _twins(self) -> CleanTwins:
        if self.twins is None:
            assert self.sandboxes.sandbox is not None  # started by the first reset
            self.twins = CleanTwins(self.sandboxes.sandbox)
        return self.twins

    def close(self) -> None:
        self._stop()
        if self.twins is not None:
            self.twins.close()
        self.sandboxes.close()
        super().close()

    # ---------------------------------------------------------------- helpers
    def _new_hier(self) -> HierPolicy:
        """A fresh hierarchical manager for one episode, with the runtime's budgets (its ``ValueError`` names a
        ``max_actions`` too small for tier 1)."""
        config = self.runtime_config
        writes = "checks" if self.config.format == "hier_checks" else "decisions"
        return HierPolicy(
            None, name="env-hier", max_actions=config.max_actions, max_repairs=config.max_repairs,
            strict_wire=config.strict_wire, writes=writes,
        )  # fmt: skip

    def _agent_request(self, request: PolicyInput | None) -> tuple[PolicyInput | None, list[Message] | None]:
        """The next request the agent answers, from ``request`` on, and the agent's conversation for it; ``(None,
        None)`` at the end. ``hier``: tier 0's requests are answered on the way (actor ``harness``)."""
        self._request = None
        while request is not None:
            if self.hier is None:
                messages: list[Message] | None = CONVERSATION.messages(request)
            else:
                messages = self.hier.tier1_messages(request)
            if messages is not None:
                self._request = request
                return request, messages
            assert self.hier is not None
            request = self._advance(Reply(self.hier.tier0_respond(request), HARNESS))
        return None, None

    def _request_info(self, request: PolicyInput, messages: list[Message]) -> dict[str, Any]:
        assert self._runtime is not None
        tools = CONVERSATION.tools if self.hier is None else self.hier.tools
        activation = sum(a["actor"] == "policy" for a in self._runtime.record.activations)
        return {"policy_input": request, "messages": messages, "tools": tools, "activation": activation}

    def _advance(self, action: str | Reply | None) -> PolicyInput | None:
        """Answer the pending request with ``action`` (None: read the first one); the next request, None at the end.
        An exception inside the episode ends it: the kernel is closed and :class:`EpisodeError` names the episode."""
        assert self._run is not None and self._episode is not None
        episode = self._episode
        where = f"episode {episode.episode_id} of task {episode.task.id}, env step {self.env_steps}"
        try:
            return advance(self._run, action, where)
        except EpisodeError:
            self._stop()
            self.sandboxes.close_kernel()
            raise

    def _stop(self) -> None:
        """Close the running episode (if any; its checkpoints are released); the kernel stays up for the next reset
        to recycle."""
        if self._run is not None:
            self._run.close()
        self._done = True

    def _base_info(self) -> dict[str, Any]:
        assert self._episode is not None
        return {"episode_id": self._episode.episode_id, "task_id": self._episode.task.id, "env_steps": self.env_steps}

    def _last_action(self, history: int, request: PolicyInput | None) -> tuple[bool, str | None]:
        """(legal, result text) of the action just answered: from the next input when the activation goes on,
        else from the recorded activation."""
        assert self._runtime is not None
        if request is not None and request.previous:
            transitions = self._runtime.lifecycle.history
            legal = len(transitions) > history and transitions[history].legal
            return legal, request.previous[-1][1]
        for activation in reversed(self._runtime.record.activations):
            if activation["actor"] == "policy" and activation["actions"]:
                action = activation["actions"][-1]
                return bool(action["legal"]), action["result"]
        return False, None

    def _score(self, record: EpisodeRecord) -> tuple[float, dict[str, Any]]:
        from rewards import RewardConfig, score_episode

        assert self._episode is not None
        config = self.reward_config if self.reward_config is not None else RewardConfig()
        breakdown = score_episode(record, self._episode.fault_info, config)
        return float(breakdown.total), dict(breakdown.terms)


def _task_path(spec: str) -> Path:
    from harness.tasks import resolve_task_path

    return resolve_task_path(spec)


def _fault_info(task: Task, faults: dict[str, Any]) -> Any:
    """``rewards.FaultInfo`` of a scripted episode's one fault (None without one); no gold hint is known."""
    if not faults:
        return None
    from harness.worker.scripted import load_programs
    from rewards import FaultInfo

    ((turn_id, fault),) = faults.items()
    variables = fault.corrupted_variables(load_programs(task)[turn_id])
    return FaultInfo(turn_id=turn_id, fault_type=fault.fault_type, variables=tuple(variables))
