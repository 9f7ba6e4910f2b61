"""DAPO over whole check activations in which the model writes its own specs (``format: hier_checks``).

The model is tier 1 of the check-writing hier manager (``HierPolicy(writes="checks")``), in
:class:`envs.ManagerEnv` with ``format="hier_checks"``: at the start point's check activation it reads tier 1's
checks request (:meth:`~harness.manager.hier.HierPolicy.tier1_messages`) and replies ``{"checks": [...]}``; tier 0
runs every spec it kept in the clean verifier and decides (REPAIR iff a written check fails). Nobody checks for the
model: there is no gold prefix inside the activation and no takeover at a decision.

- **Start points** (:func:`checks_start_points`): one per (pool entry, turn) of the training split (the tasks of
  ``stats.json``'s validation split are left out), ``StartPoint.activation`` being the turn's index in the task.
  *Faulted* turns: the turn of each harmful fault the gold manager repaired at its turn (a detectable fault),
  ``gold_control`` ``REPAIR``. *Clean* turns: every turn of each clean entry (the clean twin of the faulted tasks and
  the clean tasks), ``gold_control`` ``FINALIZE_RELATIONS``. With ``stratify_controls: true`` an epoch alternates
  the two (half faulted, half clean: the stated mix); without it the pool's own share (about one faulted turn per six
  clean ones on a 6-turn pool with one fault a task).
- **A rollout** (:class:`ChecksPlayer`): the episode is reset; the states before the start turn get no written check
  (``{"checks": []}``: tier 0 alone, which confirms a clean state as the gold does); at the start turn the model
  samples one reply to the checks conversation, which the env grades; the rollout ends there (the later turns do not
  change that reply's reward). Its reward is the env's check-writing reward (:func:`rewards.score_checks`: catch on
  the faulted turn against its clean twin, false alarm, protocol) and ``reward_terms`` its terms, which the trainer
  logs as ``rewards/<term>/mean``. Its one :attr:`~training.rl.rollout.Rollout.actions` entry is tier 0's decision
  (``legal``: the reply parsed), so the trainer's decision and repair metrics read it like a decision.
- **Decoding as evaluated** (:func:`served_settings`): the init checkpoint's ``manager.json``
  (:mod:`harness.manager.checkpoint_settings`) sets the view, the grammar (the checks grammar when
  ``constrained_decoding``) and the token cap of the rollouts; the sampling temperature stays the config's (or the
  probe's). :func:`save_settings` gives the output the init checkpoint's file (or, for a model that had none, the
  settings the rollouts used, greedy).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Generator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from harness.manager.checkpoint_settings import (
    ManagerSettings,
    read_manager_settings,
    write_manager_settings,
)
from harness.manager.hier_checks import ChecksReplyError, parse_checks_reply
from training.rl.rollout import EpisodePlayer, Rollout, SampleRequest, StartPoint

if TYPE_CHECKING:
    from envs.pool import ReplayPool

logger = logging.getLogger(__name__)

NO_CHECKS = '{"checks": []}'
"""The reply before the start turn: no written check (tier 0 alone confirms a clean state)."""
FAULTED, CLEAN = "REPAIR", "FINALIZE_RELATIONS"
"""``StartPoint.gold_control`` of a faulted and of a clean turn (the gold's decision there; the strata)."""


def checks_start_points(pool: ReplayPool) -> list[StartPoint]:
    """The faulted and clean turns of ``pool``'s training split (see the module docstring), in index order."""
    points = []
    held_out = validation_tasks(pool.root)
    for entry in pool.entries.values():
        if entry.task_id in held_out:
            continue
        turns = [t.turn_id for t in pool.task(entry).turns]
        if entry.kind == "clean":
            points += [StartPoint(entry.id, index, CLEAN) for index in range(len(turns))]
            continue
        info = entry.fault_info or {}
        turn = info.get("turn_id")
        if info.get("benign") or turn not in turns or "gold" not in entry.episodes:
            continue
        if any(r.get("turn_id") == turn for r in pool.record(entry, "gold").repairs):
            points.append(StartPoint(entry.id, turns.index(turn), FAULTED))
    if not points:
        raise ValueError(f"the pool at {pool.root} has no turn to write checks for; synthesize into a fresh folder")
    return points


def validation_tasks(root: str | Path) -> set[str]:
    """The task ids of a synthesis output's validation split (``stats.json``: ``tasks.validation``); none without
    the file."""
    path = Path(root) / "stats.json"
    if not path.is_file():
        return set()
    return set((json.loads(path.read_text(encoding="utf-8")).get("tasks") or {}).get("validation") or [])


class ChecksPlayer(EpisodePlayer):
    """Plays ``hier_checks`` rollouts on one :class:`~envs.manager.ManagerEnv` (``format="hier_checks"``)."""

    @staticmethod
    def legal_reply(text: str, legal_actions: Any = ()) -> str | None:
        """``"checks"`` when ``text`` is the checks object (its specs may still be dropped), else None: what the
        temperature probe (:mod:`training.rl.temperature`) counts as a legal reply."""
        try:
            parse_checks_reply(text)
        except ChecksReplyError:
            return None
        return "checks"

    def steps(self, start: StartPoint) -> Generator[SampleRequest, tuple[list[int], list[float]], Rollout]:
        """The rollout from ``start`` as a generator (the protocol of :meth:`EpisodePlayer.steps`): one
        :class:`SampleRequest`, the model's checks reply."""
        env = self.env
        assert env.pool is not None
        turns = [t.turn_id for t in env.pool.task(env.pool.entry(start.episode_id)).turns]
        turn_id = turns[start.activation]
        obs, info = env.reset(options={"episode_id": start.episode_id})
        self.inputs, self.conversations, self.record = [], [], None
        while info["policy_input"].turn is None or info["policy_input"].turn.turn_id != turn_id:
            obs, reward, terminated, truncated, info = env.step(NO_CHECKS)
            if terminated or truncated:
                raise RuntimeError(
                    f"episode {start.episode_id}: tier 1 was never asked for the checks of turn {turn_id}; the pool "
                    "and its replay disagree (re-synthesize the pool)"
                )
        rollout = Rollout(start.episode_id, activation=start.activation)
        rollout.prompt_ids = self.tokens.conversation(info["messages"])
        self.inputs.append(info["policy_input"])
        self.conversations.append(info["messages"])
        text, closed = yield from self._respond(rollout)
        obs, reward, terminated, truncated, info = env.step(text or "")
        checks = info["checks"]
        rollout.actions.append({"name": checks["decision"], "legal": bool(info["legal"]),
                                "error_variable": checks.get("variable")})  # fmt: skip
        if closed is not None:
            rollout.extend(self.tokens.end(closed), model=False)
        rollout.env_reward = float(reward)
        rollout.reward_terms = dict(info["reward_terms"])
        rollout.episode_activations = 1
        return rollout


# ---------------------------------------------------------------- decoding as evaluated
def served_settings(rl_args: Any, model_path: str | Path) -> ManagerSettings | None:
    """``hier_checks``: the init checkpoint's ``manager.json`` (None when it has none), applied to ``rl_args``:
    rollouts take its view, grammar and token cap (without a file the config's fields stay). A file for another
    manager than the check-writing tier 1 is refused with the fix. Other formats: None, nothing changed."""
    if rl_args.format != "hier_checks":
        return None
    settings = read_manager_settings(model_path)
    if settings is None:
        logger.info("hier_checks: the init model has no manager.json; rollouts use the config's view and decoding")
        return None
    if settings.policy != "hier" or settings.writes != "checks":
        raise ValueError(
            f"{model_path}/manager.json serves policy={settings.policy!r} writes={settings.writes!r}; format "
            "hier_checks trains tier 1 of the check-writing hier manager: start from a hier_checks SFT checkpoint "
            "or use the format its manager.json names"
        )
    rl_args.prompt_view = settings.prompt_view
    rl_args.constrained_decoding = settings.constrained_decoding
    rl_args.max_new_tokens = settings.max_new_tokens
    logger.info(
        "hier_checks: rollouts decode as manager.json serves: view %s, constrained %s, max_new_tokens %d",
        settings.prompt_view, settings.constrained_decoding, settings.max_new_tokens,
    )  # fmt: skip
    return settings


def save_settings(settings: ManagerSettings | None, rl_args: Any, output_dir: str | Path) -> Path | None:
    """``hier_checks``: write the output's ``manager.json``: the init checkpoint's, or the rollouts' view and decoding
    (greedy); its path. Other formats: nothing (None)."""
    if rl_args.format != "hier_checks":
        return None
    if settings is None:
        settings = ManagerSettings(
            policy="hier", writes="checks", prompt_view=rl_args.prompt_view,
            constrained_decoding=rl_args.constrained_decoding, max_new_tokens=rl_args.max_new_tokens,
        )  # fmt: skip
    return write_manager_settings(output_dir, settings)


def check_checks_args(rl_args: Any) -> None:
    """``hier_checks`` refuses the fields that choose other start points or a takeover (they would be ignored)."""
    if rl_args.format != "hier_checks":
        return
    for name, unset in (("takeover", "activation"), ("event_types", None), ("gold_controls", None)):
        if getattr(rl_args, name) != unset:
            raise ValueError(
                f"format='hier_checks' with {name}={getattr(rl_args, name)!r}: its start points are the faulted and "
                f"clean turns and the model writes the whole reply; leave {name} at {unset!r}"
            )
