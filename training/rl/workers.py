"""Environment workers for RL: the manager envs in Ray actors, the sampling in the trainer process.

With ``executor: ray`` and ``rollout_workers: N`` (:class:`training.rl.trainer.RLArguments`) the
:class:`~training.rl.trainer.ManagerRollouts` of the trainer holds no env: :class:`EnvWorkers` starts N Ray actors
(:class:`EnvWorker`, a fraction of a CPU each), each with its own :class:`~envs.manager.ManagerEnv` (one sandbox) and
:class:`~training.rl.rollout.EpisodePlayer`. An actor runs the player's rollout generator
(:meth:`~training.rl.rollout.EpisodePlayer.steps`): env resets and steps, the reference manager's responses, the
token bookkeeping; where the model answers it returns a :class:`~training.rl.rollout.SampleRequest` (the context ids
and the token budget) and the trainer samples the response with its own engine session and sends the ids back. The
trainer process only generates and trains.

**Order.** :meth:`EnvWorkers.play` gives each actor one rollout at a time and plays them in waves
(:class:`~training.rl.waves.WaveDriver`): the actors' replies are polled with ``ray.wait`` over all of them, and once
every actor has replied, their pending requests are sampled with one ``engine.generate_many`` call (a group's shared
first request as one request with ``n = num_generations``) and the answers sent back, while the actors step their
envs in parallel. With a deterministic env the waves, and so the sampling calls, are the same on every run with the
same ``rollout_workers``; the ids, masks and rewards of a greedy policy are those of the in-process path
(``executor: local``), with as many envs in this process.

**A crashed actor** (its process killed, out of memory, its node lost) is replaced by a new actor and the rollout it
was playing is replayed from its start: the new env replays the episode and each model response already sampled
is answered from the trainer's log of that rollout (no new sampling), after which sampling continues in the same
session. A replayed request whose context differs from the logged one (a nondeterministic env) is a
``RuntimeError``; a rollout whose actors die more than ``ray_max_retries`` times ends the run. An exception raised
by the env or the player itself is not retried: the trainer sees it as its own type.

Ray is started or joined as by the other commands (:func:`harness.executors.open_executor`: ``address`` null starts a
local Ray with ``rollout_workers`` CPUs for the run, an address joins a cluster whose nodes have the package and the
replay pool at the same path). An actor takes :data:`ENV_ACTOR_CPUS` of a CPU: it mostly waits for the trainer's
sampling, and its sandbox kernel is a subprocess Ray does not count. **One Ray for all GPU processes**: in a run of
several processes (``WORLD_SIZE`` > 1, ``accelerate launch``) ``address`` null would start one local Ray per process,
so it is refused (:func:`check_one_ray`); start one (``ray start --head --num-cpus N`` on the node, ``ray start
--address HEAD:6379`` on the others) and set ``address: auto`` (or ``HEAD:6379``): every process then joins that
cluster in the ``stateguard`` namespace.
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from harness.executors import ExecutorOptions, check_executor, open_executor
from training.rl.checks_rollout import ChecksPlayer
from training.rl.rollout import (
    EpisodePlayer,
    EpisodeTokens,
    Rollout,
    RolloutLimits,
    SampleRequest,
    StartPoint,
)
from training.rl.waves import Slot, WaveDriver

logger = logging.getLogger(__name__)

ENV_ACTOR_CPUS = 0.25
"""Ray CPUs per env actor: it steps the env between the trainer's sampling calls, mostly waiting."""


def check_one_ray(options: ExecutorOptions, world_size: int) -> None:
    """Refuse ``address`` null in a run of ``world_size`` > 1 processes (each would start its own local Ray) with a
    one-line ``ValueError`` naming the fix: one cluster, joined by every process."""
    if options.address is None and world_size > 1:
        raise ValueError(
            f"executor ray with address null in a run of {world_size} processes would start {world_size} separate "
            "Rays, one per GPU process; start one (`ray start --head --num-cpus N`) and set address: auto so that "
            "every process joins it"
        )


@dataclass(frozen=True)
class EnvSpec:
    """Everything an env worker builds its player from (sent once to each actor)."""

    pool: str
    tokenizer: Any
    limits: RolloutLimits
    takeover: str = "activation"
    format: str = "flat"
    prompt_view: str = "full"
    isolation: str | None = None
    max_actions: int = 8
    reward_config: Any = None

    def player(self, pool: Any = None, tokens: EpisodeTokens | None = None) -> EpisodePlayer:
        """A new :class:`~envs.manager.ManagerEnv` (replay worker) over the pool and its player; ``pool`` and
        ``tokens``, when given, are used instead of building them again."""
        from envs import ManagerEnv, ReplayPool
        from harness.manager.runtime import RuntimeConfig

        pool = pool if pool is not None else ReplayPool(self.pool)
        if tokens is None:
            tokens = EpisodeTokens(self.tokenizer, prompt_view=self.prompt_view, format=self.format)
        checks = self.format == "hier_checks"  # reward_config is then a rewards.CheckRewardConfig
        env = ManagerEnv(
            pool=pool, worker="replay", isolation=self.isolation, reward_config=None if checks else self.reward_config,
            checks_reward=self.reward_config if checks else None,
            runtime_config=RuntimeConfig(max_actions=self.max_actions), format=self.format,
        )  # fmt: skip
        if checks:
            return ChecksPlayer(env, tokens, self.limits, self.takeover)
        return EpisodePlayer(env, tokens, self.limits, self.takeover)


class EnvWorker:
    """The body of one env actor: a player over its own env, stepping one rollout generator at a time."""

    def __init__(self, spec: EnvSpec):
        self.player = spec.player()
        self._steps: Any = None

    def begin(self, start: StartPoint) -> SampleRequest | Rollout:
        """Start a rollout from ``start`` (dropping any unfinished one): its first request, or the rollout."""
        self._steps = self.player.steps(start)
        return self._advance(None)

    def answer(self, ids: list[int], logprobs: list[float]) -> SampleRequest | Rollout:
        """The sampled response to the last request: the next request, or the finished rollout."""
        if self._steps is None:
            raise RuntimeError("answer() without a rollout in progress; call begin(start) first")
        return self._advance((ids, logprobs))

    def _advance(self, sent: tuple[list[int], list[float]] | None) -> SampleRequest | Rollout:
        try:
            return next(self._steps) if sent is None else self._steps.send(sent)
        except StopIteration as stop:
            self._steps = None
            return stop.value
        except BaseException:
            self._steps = None
            raise

    def pid(self) -> int:
        return os.getpid()

    def cpu_seconds(self) -> float:
        """CPU seconds (user + system) of this process and its sandbox processes so far, reaped children included."""
        import psutil

        me = psutil.Process()
        total = sum(me.cpu_times()[:4])  # user, system, children_user, children_system
        for child in me.children(recursive=True):
            with contextlib.suppress(psutil.Error):
                total += sum(child.cpu_times()[:4])
        return total

    def close(self) -> None:
        self.player.env.close()


class EnvWorkers:
    """``workers`` Ray actors playing rollouts for this process (see the module docstring).

    Runs :func:`~harness.executors.check_executor` and :func:`check_one_ray` before starting anything; a cluster with
    fewer CPUs than the actors take (:data:`ENV_ACTOR_CPUS` each) is refused with a ``ValueError``."""

    def __init__(self, spec: EnvSpec, workers: int, options: ExecutorOptions):
        if workers < 1:
            raise ValueError(f"rollout_workers={workers}: use 1 or more env actors")
        if options.executor != "ray":
            raise ValueError(f"executor={options.executor!r}: env workers run on Ray; use executor: ray")
        check_executor(options)
        check_one_ray(options, int(os.environ.get("WORLD_SIZE", "1")))
        import ray

        self.options = options
        self._stack = contextlib.ExitStack()
        self._stack.enter_context(open_executor(options, ray_num_cpus=workers))
        try:
            cpus = ray.cluster_resources().get("CPU", 0)
            if cpus < workers * ENV_ACTOR_CPUS:
                raise ValueError(
                    f"rollout_workers={workers}: the Ray cluster has {cpus:g} CPUs and each env actor takes "
                    f"{ENV_ACTOR_CPUS:g}; "
                    "lower rollout_workers, raise ray_num_cpus or add nodes"
                )
            self._spec = ray.put(spec)
            self._actor = ray.remote(num_cpus=ENV_ACTOR_CPUS, max_restarts=0, max_task_retries=0)(EnvWorker)
            self.actors = [self._new_actor() for _ in range(workers)]
        except BaseException:
            self._stack.close()
            raise
        self.replaced = 0  # actors replaced after they died, all calls together
        self.waves = 0  # waves sampled, all calls together
        self._refs: dict[int, Any] = {}  # lane -> the reply of its call in flight

    def _new_actor(self) -> Any:
        return self._actor.remote(self._spec)

    def pids(self) -> list[int]:
        """The process ids of the actors (they wait for the actors to start)."""
        import ray

        return ray.get([actor.pid.remote() for actor in self.actors])

    def cpu_seconds(self) -> list[float]:
        """Each actor's CPU seconds so far (its process and its sandbox's, :meth:`EnvWorker.cpu_seconds`)."""
        import ray

        return ray.get([actor.cpu_seconds.remote() for actor in self.actors])

    def play(self, starts: Sequence[StartPoint], engine: Any, group_size: int = 1) -> list[Rollout]:
        """One rollout from each of ``starts``, in their order, played on the actors in waves sampled by ``engine``
        (:class:`~training.rl.waves.WaveDriver`; ``group_size`` consecutive starts form a group)."""
        driver = WaveDriver(self, engine, group_size)
        try:
            return driver.play(starts)
        finally:
            self._refs.clear()  # an error left calls in flight: the next play begins every actor afresh
            self.waves += driver.waves

    # the Lanes protocol of training.rl.waves: one lane per actor
    def __len__(self) -> int:
        return len(self.actors)

    def begin(self, lane: int, start: StartPoint) -> None:
        self._refs[lane] = self.actors[lane].begin.remote(start)

    def answer(self, lane: int, ids: list[int], logprobs: list[float]) -> None:
        self._refs[lane] = self.actors[lane].answer.remote(ids, logprobs)

    def collect(self, slots: Sequence[Slot | None]) -> list[tuple[int, SampleRequest | Rollout]]:
        """The reply of every actor with a call in flight, polled with ``ray.wait`` over all of them (whichever is
        ready first); an actor that died is replaced and its slot's rollout begun again on the new one."""
        import ray

        replies: dict[int, SampleRequest | Rollout] = {}
        while self._refs:
            lanes = {ref: lane for lane, ref in self._refs.items()}
            ready, _ = ray.wait(list(lanes), num_returns=1)
            for ref in ready:
                lane = lanes[ref]
                del self._refs[lane]
                slot = slots[lane]
                assert slot is not None
                reply = self._reply(lane, slot, ref)
                if reply is not None:
                    replies[lane] = reply
        return sorted(replies.items())

    def _reply(self, worker: int, slot: Slot, ref: Any) -> SampleRequest | Rollout | None:
        """The actor's reply ``ref``; None when the actor died (it is replaced, the rollout begun again on the new
        one)."""
        import ray

        try:
            return ray.get(ref)
        except ray.exceptions.RayTaskError as error:  # the env or the player raised: the trainer sees its own type
            self._refs.clear()
            cause = error.cause if isinstance(error.cause, Exception) else error.as_instanceof_cause()
            raise cause from None
        except ray.exceptions.RayActorError as error:
            slot.deaths += 1
            where = f"episode {slot.start.episode_id}, start activation {slot.start.activation}"
            if slot.deaths > self.options.ray_max_retries:
                self._refs.clear()
                raise RuntimeError(
                    f"{where}: its env actor died {slot.deaths} time(s) ({type(error).__name__}); raise "
                    "ray_max_retries or read the worker logs (/tmp/ray/session_latest/logs on its node)"
                ) from error
            logger.warning("%s: env actor %d died (%s); replacing it and replaying the rollout", where, worker,
                           type(error).__name__)  # fmt: skip
            with contextlib.suppress(Exception):
                ray.kill(self.actors[worker], no_restart=True)
            self.actors[worker] = self._new_actor()
            self.replaced += 1
            slot.position = 0
            self.begin(worker, slot.start)
            return None

    def close(self) -> None:
        """Close the actors' envs, end the actors, and stop (or leave) Ray as :func:`open_executor` started it."""
        import ray

        try:
            with contextlib.suppress(Exception):
                ray.get([actor.close.remote() for actor in self.actors], timeout=30)
            for actor in self.actors:
                with contextlib.suppress(Exception):
                    ray.kill(actor, no_restart=True)
            self.actors = []
        finally:
            self._stack.close()
