"""Rollouts in the manager env, token-exact: what the model sampled and what the env inserted, nothing re-rendered.

**What one rollout is (per-activation sequences).** The served manager (:class:`harness.manager.llm_policy.LLMPolicy`)
sends one conversation per *activation*: the system prompt with the tools, the rendered activation, then each earlier
response of the activation and its ``<tool_response>``. A rollout trains on exactly that conversation, so training and
inference see the same context token for token. A rollout is therefore one activation of a replay-pool episode,
played by the model in the real :class:`envs.ManagerEnv`:

1. the episode is reset and the activations before the start point are played by the reference manager (the
   synthesis gold policy of that pool entry, :meth:`envs.pool.PoolEntry.gold_policy`), so every rollout of a group
   reaches the same state and the same prompt;
2. the model plays the start activation: tool calls, their ``<tool_response>`` and more calls, until a control action
   ends it (or the runtime's ``max_actions`` does); this is the multi-turn part the loss sees;
3. the reference manager finishes the episode; the composed reward of the whole episode (:func:`rewards.score_episode`)
   is the rollout's reward, so its differences within a group come from the model's activation alone. A model that
   ends its part without a legal control action (flat format: its responses spent on tool calls or on text the runtime
   refused) has not decided, and the harness confirms in its place (:func:`undecided_confirm`) at the next check
   request of that pause, so the gold's later decision at the same pause is never credited to the model
   (:attr:`Rollout.harness_confirmed`). Only sampled responses are the model's :attr:`Rollout.actions`.

A :class:`StartPoint` is ``(episode id, activation index)``; :func:`start_points` lists them from the pool's recorded
gold episodes, optionally only those the gold ended with given control actions (``gold_controls``, e.g. ``("REPAIR",
"FINALIZE_RELATIONS")``: the check activations where the gold repairs or confirms).

**Where the model takes over** (:class:`EpisodePlayer`'s ``takeover``): ``"activation"`` (default) as above, the model
plays the whole start activation. ``"decision"``: inside the start activation the reference manager keeps answering
while its response is not a control action (:func:`gold_decision`), so its verification calls (``check_execution``,
``run_probe``) run in the env and are answered as usual; at the first request where the gold's response would be a
control action that response is not sent and the model answers that request and any later one of the activation. The
rollout's prompt is then the whole conversation up to that request (the activation, the gold's calls and their
``<tool_response>``, the assistant header: :meth:`EpisodeTokens.conversation`), and the loss sees the model's
decision and whatever it answers after it. In ``hier`` the gold's calls are tier 1's and the takeover is at the gold's
tier-1 decision. A start activation the gold ends without a decision (its budget ran out) is refused with a
``RuntimeError``.

**The hierarchical format** (``format="hier"``, :class:`envs.ManagerEnv`'s ``hier``): the model is tier 1 of the
:class:`~harness.manager.hier.HierPolicy`. The env answers every tier-0 request itself and stops only at tier-1
requests, so a rollout's conversation is tier 1's (:meth:`HierPolicy.messages
<harness.manager.hier.HierPolicy.messages>`): the tier-1 system prompt with the tier-1 tools, the decision prompt as
the first user turn, then tier 1's calls and their ``<tool_response>``. The start points are the gold's check
activations that have a tier-1 part (:func:`has_tier1_part`: response 0 is the ``check_execution`` of the latest step
and it did not fail, a decision ends the activation; a failed execution is repaired by tier 0, no start point); the
reference manager (the gold) answers the tier-1 requests of every other check activation, so its decisions there are
the gold's. A model response the env rejects (:meth:`HierPolicy.vet <harness.manager.hier.HierPolicy.vet>`:
unparseable, not a tier-1 action, illegal, a REPAIR without evidence, ...) is replaced by tier 0's confirmation, which
ends the activation; it counts as not legal in :attr:`Rollout.actions`.

**Token layout.** :class:`EpisodeTokens` holds the chat-template pieces (``harness/chat_template.jinja``, the SFT
template): ``prompt(text)`` is the system turn with the tools, the activation as the first user turn and the assistant
header; ``conversation(messages)`` renders a longer conversation (the env's ``info["messages"]``) up to the next
assistant header the same way (the decision takeover's prompt); after a model response the env inserts
``suffix(result_text, closed)``: ``"\\n"`` after the model's own ``<|im_end|>`` (or ``<|im_end|>\\n`` when a token
limit cut the response), the ``<tool_response>`` user turn and the next assistant header; ``end(closed)`` closes the
last model turn. :class:`Rollout` keeps ``prompt_ids``, ``completion_ids`` and ``env_mask`` (1 = sampled by the
model, 0 = inserted by the env).

**Where the ids may differ from rendering the conversation with the chat template** (the golden test checks equality
everywhere else, ``tests/training/test_rl_rollout.py``):

- a response the model did not end with ``<|im_end|>`` (cut by ``max_new_tokens`` or the rollout's token budget):
  the env's ``<|im_end|>`` follows it, exactly as the template renders the cut text, but it is an env token;
- sampled ids that are not the tokenizer's canonical encoding of their own text (the text is equal, the ids are not);
  the trainer keeps the sampled ids, inference re-encodes the text;
- a blank response (only whitespace before ``<|im_end|>``): the ``llm`` policy drops it from the conversation it
  replays, the rollout keeps its tokens (so the loss can push them down) and the env's refusal after it (``hier``:
  the env rejects it and tier 0's confirmation ends the activation);
- a ``<think>`` block that is not in the template's canonical form (``<think>\\n...\\n</think>\\n\\n``): the template
  would normalise its whitespace when replaying it.

Responses after the rollout's budget is spent (``max_responses`` sampled responses, its tokens, or the context window
``max_context_length`` that a tool response would overflow) are not sampled:
an undecided flat rollout gets the harness's confirmation, any other request ``""`` (no tokens), which the runtime
refuses like a failed backend call and the ``llm`` policy leaves out of the conversation, as here (``hier``: the env
rejects the first one and tier 0 confirms).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Generator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from envs.manager import CONVERSATION, check_format
from harness.manager.hier import CONFIRM
from harness.manager.hier_prompts import CHECKS_SYSTEM, DECISIONS, HIER_SYSTEM, tier1_tool_schemas
from harness.manager.lifecycle import CONTROL_ACTIONS
from harness.manager.policies import execution_evidence
from harness.manager.policy_types import PolicyInput, call
from harness.manager.prompt_view import check_prompt_view
from harness.manager.wire import parse_response

if TYPE_CHECKING:
    from envs.manager import ManagerEnv
    from envs.pool import ReplayPool

IM_END = "<|im_end|>"
TAKEOVERS = ("activation", "decision")
"""Where the model takes over in the start activation (:class:`EpisodePlayer`'s ``takeover``, see the module
docstring)."""
_USER_PROBE = "\x1fUSER\x1f"
_MODEL_PROBE = "\x1fMODEL\x1f"


class EpisodeTokens:
    """The chat-template pieces of the manager protocol as token ids (see the module docstring).

    The pieces are cut out of renderings of probe conversations with the tokenizer's own chat template, so they are
    whatever that template writes; a template that is not prefix-preserving is refused with a ``ValueError``.
    """

    def __init__(
        self,
        tokenizer: Any,
        system: str | None = None,
        tools: list[dict[str, Any]] | None = None,
        *,
        prompt_view: str = "full",
        format: str = "flat",
    ):
        """``prompt_view``: ``full`` (the served ``llm`` policy's conversation: system prompt and tools block first) or
        ``bare`` (neither: the activation is the first turn; the view ``training.study`` trains and serves small
        models with). ``format``: whose system prompt and tools (when ``system`` / ``tools`` are not given): ``flat``
        the ``llm`` policy's, ``hier`` tier 1's (:data:`~harness.manager.hier_prompts.HIER_SYSTEM`,
        :func:`~harness.manager.hier_prompts.tier1_tool_schemas`), ``hier_checks`` the check writer's
        (:data:`~harness.manager.hier_prompts.CHECKS_SYSTEM`, no tools)."""
        self.tokenizer = tokenizer
        self.bare = check_prompt_view(prompt_view) == "bare"
        own = {"flat": (CONVERSATION.system, CONVERSATION.tools), "hier": (HIER_SYSTEM, tier1_tool_schemas()),
               "hier_checks": (CHECKS_SYSTEM, [])}[check_format(format)]  # fmt: skip
        self.system = own[0] if system is None else system
        self.tools = own[1] if tools is None else tools
        self.eos_id = int(tokenizer.convert_tokens_to_ids(IM_END))
        user = {"role": "user", "content": _USER_PROBE}
        opened = self._render([user], generation_prompt=True)
        closed = self._render([user, {"role": "assistant", "content": _MODEL_PROBE}], generation_prompt=False)
        followed = self._render(
            [user, {"role": "assistant", "content": _MODEL_PROBE}, {"role": "user", "content": _USER_PROBE}],
            generation_prompt=True,
        )
        if not (closed.startswith(opened + _MODEL_PROBE + IM_END) and followed.startswith(closed)):
            raise ValueError(
                "the tokenizer's chat template is not prefix-preserving across turns; use the project template "
                "(harness/chat_template.jinja, e.g. harness.tokenizer.build_qwen3_tokenizer())"
            )
        self.turn_end = closed[len(opened) + len(_MODEL_PROBE) + len(IM_END) :]  # "\n" after <|im_end|>
        self.user_head, self.user_tail = followed[len(closed) :].split(_USER_PROBE)

    def _render(self, messages: list[dict[str, str]], generation_prompt: bool) -> str:
        if self.bare:
            conversation, tools = list(messages), None
        else:
            conversation, tools = [{"role": "system", "content": self.system}, *messages], self.tools
        return self.tokenizer.apply_chat_template(
            conversation, tools=tools, tokenize=False, add_generation_prompt=generation_prompt
        )

    def encode(self, text: str) -> list[int]:
        """Plain encoding, no special tokens added (the tokenizer still reads ``<|im_end|>`` etc. in the text)."""
        return list(self.tokenizer(text, add_special_tokens=False)["input_ids"])

    def decode(self, ids: list[int]) -> str:
        return self.tokenizer.decode(ids, skip_special_tokens=False)

    def system_text(self) -> str:
        """The system turn with the tools: the text every prompt starts with (closed by ``<|im_end|>\\n``); empty in
        the bare view."""
        return "" if self.bare else self._render([], generation_prompt=False)

    def prompt(self, text: str) -> list[int]:
        """System turn with the tools, ``text`` as the first user turn, the assistant header."""
        return self.conversation([{"role": "user", "content": text}])

    def conversation(self, messages: list[dict[str, str]]) -> list[int]:
        """``messages`` (e.g. the env's ``info["messages"]``) and the assistant header of the next response, in this
        prompt view: their system turn is replaced by this one's system prompt and tools (none in the bare view), as
        :meth:`prompt` writes it."""
        return self.encode(self._render([m for m in messages if m["role"] != "system"], generation_prompt=True))

    def suffix(self, text: str, closed: bool = True) -> list[int]:
        """The env's ids after a model turn: the turn's close (the model's ``<|im_end|>`` already sampled when
        ``closed``), the next user turn holding ``text`` and a new assistant header."""
        return self.encode(self._close_text(closed) + self.user_head + text + self.user_tail)

    def end(self, closed: bool) -> list[int]:
        """The env's ids closing the last model turn of a rollout."""
        return self.encode(self._close_text(closed))

    @property
    def close_ids(self) -> list[int]:
        """The env's ids closing a last model turn that a token limit cut (``<|im_end|>`` and the newline)."""
        return self.end(closed=False)

    def _close_text(self, closed: bool) -> str:
        return self.turn_end if closed else IM_END + self.turn_end


@dataclass
class Rollout:
    """One rollout's token ids: ``prompt_ids``, then ``completion_ids`` with ``env_mask`` (1 = model, 0 = env)."""

    episode_id: str
    prompt_ids: list[int] = field(default_factory=list)
    completion_ids: list[int] = field(default_factory=list)
    env_mask: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)  # sampling log-probabilities (0.0 at env tokens)
    activation: int = 0
    actions: list[dict[str, Any]] = field(default_factory=list)  # per sampled model response: name, legal, variable
    harness_confirmed: bool = False  # the model left its start point undecided; the harness confirmed there
    truncated: bool = False  # a model response was cut by a token limit
    env_reward: float = 0.0  # the composed episode reward (rewards.score_episode total; 0 for a truncated episode)
    reward_terms: dict[str, float | None] = field(default_factory=dict)
    overlong: float = 0.0  # DAPO's overlong shaping (0 or negative)
    episode_activations: int = 0  # policy activations in the whole episode
    stop_reason: str = ""  # "context_cap": a tool response would have filled the context window (RolloutLimits)

    def extend(self, ids: list[int], model: bool, logprobs: list[float] | None = None) -> None:
        """Append ``ids``: sampled by the model (``model=True``, with their sampling log-probabilities) or inserted
        by the env."""
        if logprobs is not None and len(logprobs) != len(ids):
            raise ValueError(f"{len(ids)} ids but {len(logprobs)} log-probabilities; pass one per id")
        self.completion_ids += ids
        self.env_mask += [int(model)] * len(ids)
        self.logprobs += list(logprobs) if logprobs is not None else [0.0] * len(ids)

    @property
    def model_tokens(self) -> int:
        return sum(self.env_mask)

    @property
    def reward(self) -> float:
        """What the advantage sees: the episode reward plus the overlong shaping."""
        return self.env_reward + self.overlong

    def trimmed(self) -> tuple[list[int], list[int], list[float]]:
        """``completion_ids``, ``env_mask`` and ``logprobs`` without the trailing env ids (the close of the last
        turn): they carry no loss and no earlier logit depends on them, and without them the last id tells whether
        the last response was cut (what TRL's ``completions/clipped_ratio`` reads)."""
        end = len(self.env_mask)
        while end and not self.env_mask[end - 1]:
            end -= 1
        return self.completion_ids[:end], self.env_mask[:end], self.logprobs[:end]


@dataclass(frozen=True)
class StartPoint:
    """Where a rollout starts: the ``activation``-th policy activation (0-based) of pool episode ``episode_id``."""

    episode_id: str
    activation: int
    gold_control: str | None = None  # the control action that ended it in the gold episode (None: budget ran out)


def start_points(
    pool: ReplayPool,
    event_types: tuple[str, ...] | None = None,
    format: str = "flat",
    gold_controls: tuple[str, ...] | None = None,
) -> list[StartPoint]:
    """Every policy activation of the pool's recorded gold episodes (clean entries: the clean run), in index order;
    ``event_types`` keeps only activations of those events (e.g. ``("turn_end",)``); ``format="hier"`` only the
    check activations with a tier-1 part (:func:`has_tier1_part`); ``gold_controls`` only the activations the gold
    ended with one of those control actions (e.g. ``("REPAIR",)``)."""
    hier = check_format(format) == "hier"
    if gold_controls is not None:
        gold_controls = check_gold_controls(gold_controls)
    points = []
    for entry in pool.entries.values():
        record = pool.record(entry, "gold" if "gold" in entry.episodes else "clean")
        activations = [a for a in record.activations if a["actor"] == "policy"]
        for index, activation in enumerate(activations):
            if event_types is not None and activation["event_type"] not in event_types:
                continue
            if hier and not has_tier1_part(activation):
                continue
            control = _control(activation["actions"])
            if gold_controls is not None and control not in gold_controls:
                continue
            points.append(StartPoint(entry.id, index, control))
    if not points:
        raise ValueError(
            f"the pool at {pool.root} has no {'check activation with a tier-1 part' if hier else 'policy activation'} "
            f"of event types {event_types} with gold controls {gold_controls}"
        )
    return points


def check_gold_controls(names: Sequence[str]) -> tuple[str, ...]:
    """``names`` as a tuple when each is a control action (:data:`~harness.manager.lifecycle.CONTROL_ACTIONS`), else a
    one-line ``ValueError`` naming them."""
    unknown = [name for name in names if name not in CONTROL_ACTIONS]
    if unknown or not names:
        what = f"unknown control actions {unknown}" if unknown else "keeps no start point (leave it unset for all)"
        raise ValueError(f"gold_controls={list(names)}: {what}; use some of: {', '.join(CONTROL_ACTIONS)}.")
    return tuple(names)


def gold_decision(response: str) -> bool:
    """Whether the wire-format ``response`` is a control action (a decision that ends the activation, e.g. ``REPAIR``
    or ``FINALIZE_RELATIONS``) rather than a tool call or an unparseable text."""
    parsed = parse_response(response)
    return parsed.action is not None and parsed.action.name in CONTROL_ACTIONS


HARNESS_CONFIRM = call("FINALIZE_RELATIONS", CONFIRM)
"""The harness's confirmation (``FINALIZE_RELATIONS``, mode confirm) that ends a start point the model left
undecided (see :func:`undecided_confirm`)."""


def undecided_confirm(inp: PolicyInput) -> str | None:
    """:data:`HARNESS_CONFIRM` when ``inp`` is a request of a check activation (a draft is open,
    ``FINALIZE_RELATIONS`` is legal and ``COMMIT_STATE`` is not), else None.

    A model that takes over a start point and ends its part without a legal control action (its responses spent on
    tool calls, unparseable or illegal text, or the activation's action budget spent) has not decided. The point is
    then scored as a confirmation: the harness confirms at the next check request of the same pause (in the start
    activation, or in the next activation at that pause if the runtime ended the start one) instead of the gold
    manager, which would otherwise decide there and have its decision credited to the model. A request that is not a
    check request (the pause is over) means there is nothing left to confirm."""
    try:
        draft = json.loads(inp.observation).get("current_draft")
    except (TypeError, ValueError, AttributeError):
        return None
    legal = set(inp.legal_actions)
    checking = draft is not None and "FINALIZE_RELATIONS" in legal and "COMMIT_STATE" not in legal
    return HARNESS_CONFIRM if checking else None


def decided(actions: Sequence[dict[str, Any]]) -> bool:
    """Whether the model's ``actions`` (:func:`action_stats` dicts) hold a legal control action."""
    return any(a["legal"] and a["name"] in CONTROL_ACTIONS for a in actions)


@dataclass
class HarnessConfirm:
    """The bookkeeping of :func:`undecided_confirm` for one model part (a rollout's start activation, a study
    decision point), shared by the loops that play them.

    The part ends either when the runtime ends its activation (:meth:`part_ended`) or when the model's response budget
    is spent (:meth:`over_budget`). If the model's ``actions`` then hold no legal control action, the harness answers
    the next check request of the pause with :data:`HARNESS_CONFIRM` (:meth:`due`) and :attr:`confirmed` is set.
    ``enabled`` False (the ``hier`` env, whose tier 0 confirms on its own) never confirms."""

    enabled: bool = True
    pending: bool | None = None
    """None while the part runs; True once it ended undecided and the confirmation is not yet sent; False after."""
    confirmed: bool = False

    def part_ended(self, actions: Sequence[dict[str, Any]]) -> None:
        """The runtime ended the part's activation: it is undecided unless ``actions`` hold a legal control action."""
        if self.pending is None:
            self.pending = self.enabled and not decided(actions)

    def due(self, inp: PolicyInput) -> str | None:
        """The confirmation of ``inp`` when one is pending (it is then spent), else None (the gold answers)."""
        if not self.pending:
            return None
        response, self.pending = undecided_confirm(inp), False
        self.confirmed = response is not None
        return response

    def over_budget(self, inp: PolicyInput, actions: Sequence[dict[str, Any]]) -> str:
        """The answer to a request after the model's budget is spent: at the first, if ``actions`` hold no legal
        control action, the harness's confirmation (or ``""`` when ``inp`` is no check request); otherwise ``""`` (a
        refusal, after which the runtime's fallback ends the activation)."""
        if self.pending is not None:
            return ""
        self.pending = False
        if not self.enabled or decided(actions):
            return ""
        response = undecided_confirm(inp) or ""
        self.confirmed = response != ""
        return response


def has_tier1_part(activation: dict[str, Any]) -> bool:
    """Whether a recorded gold activation is a check activation in which the ``hier`` manager asks tier 1: its first
    response is a legal ``check_execution`` whose step did not fail (a failed one is tier 0's to repair), and a
    decision (:data:`~harness.manager.hier_prompts.DECISIONS`) ends it after at least that check."""
    actions = activation["actions"]
    first = actions[0] if actions else None
    if first is None or not first.get("legal") or (first.get("parsed") or {}).get("name") != "check_execution":
        return False
    if len(actions) < 2 or _control(actions) not in DECISIONS:
        return False
    try:
        result = json.loads(first["result"])
    except (TypeError, json.JSONDecodeError):
        return False
    draft = (activation.get("observation") or {}).get("current_draft") or {}
    names = [v["name"] for v in draft.get("used_variables", [])]
    return isinstance(result, dict) and execution_evidence([result], names) is None


def _control(actions: list[dict[str, Any]]) -> str | None:
    last = actions[-1] if actions else None
    if last is None or not last.get("legal") or not isinstance(last.get("parsed"), dict):
        return None
    name = last["parsed"].get("name")
    return name if name in CONTROL_ACTIONS else None


class Session(Protocol):
    """One rollout's generation state (e.g. a KV cache); each call's context extends the previous call's."""

    def sample(self, context_ids: list[int], max_new_tokens: int) -> tuple[list[int], list[float]]: ...


@dataclass(frozen=True)
class SampleRequest:
    """What :meth:`EpisodePlayer.steps` asks the model for: one response to ``context_ids`` (the rollout's prompt and
    completion so far), at most ``max_new_tokens`` ids. An engine's ``generate_many`` takes a list of them; ``n`` > 1
    asks for that many independent responses to the same context (a group's shared first request)."""

    context_ids: list[int]
    max_new_tokens: int
    n: int = 1


def drive(
    steps: Generator[SampleRequest, tuple[list[int], list[float]], Rollout], new_session: Callable[[], Session]
) -> Rollout:
    """Run a rollout generator (:meth:`EpisodePlayer.steps`) to its end, answering each request with one session of
    ``new_session``, made at the first request."""
    session = None
    try:
        request = next(steps)
        while True:
            if session is None:
                session = new_session()
            request = steps.send(session.sample(request.context_ids, request.max_new_tokens))
    except StopIteration as stop:
        return stop.value


@dataclass
class RolloutLimits:
    max_new_tokens: int = 64  # per response
    max_completion_length: int = 256  # model tokens per rollout (the overlong shaping's maximum)
    max_responses: int = 8  # sampled responses per rollout; later requests get the harness confirm or "" (no tokens)
    max_context_length: int | None = None  # whole context (prompt, responses, tool responses) + a response's budget
    """The engine's context window (vLLM's ``max_model_len``): no request's context plus its ``max_new_tokens``
    exceeds it. A tool response that would leave no room for one more id is not inserted; the rollout stops sampling
    there (:attr:`Rollout.stop_reason` ``"context_cap"``) and ends as a spent budget does. None: no cap."""


def check_takeover(takeover: str) -> str:
    """``takeover`` when it is one of :data:`TAKEOVERS`, else a one-line ``ValueError`` naming them."""
    if takeover not in TAKEOVERS:
        raise ValueError(f"takeover={takeover!r} is not understood; use one of: {', '.join(TAKEOVERS)}.")
    return takeover


class EpisodePlayer:
    """Plays rollouts on one :class:`~envs.manager.ManagerEnv` (one sandbox; a group's resets recycle its kernel), in
    the env's format (``flat`` or ``hier``), the model taking over at the start of the start activation or at the
    gold's decision in it (``takeover``, see the module docstring)."""

    def __init__(self, env: ManagerEnv, tokens: EpisodeTokens, limits: RolloutLimits, takeover: str = "activation"):
        if env.pool is None:
            raise ValueError("EpisodePlayer replays pool episodes; build the ManagerEnv with pool=...")
        self.env, self.tokens, self.limits = env, tokens, limits
        self.takeover = check_takeover(takeover)
        self.inputs: list[PolicyInput] = []  # the last rollout's inputs the model answered
        self.conversations: list[list[dict[str, str]]] = []  # the model's conversation at each of them (env info)
        self.record: Any = None  # the last rollout's EpisodeRecord (None when the episode was truncated)

    def play(self, start: StartPoint, new_session: Callable[[], Session]) -> Rollout:
        """One rollout from ``start`` (see the module docstring), sampled from a session of ``new_session`` (made at
        the first response the model samples)."""
        return drive(self.steps(start), new_session)

    def steps(self, start: StartPoint) -> Generator[SampleRequest, tuple[list[int], list[float]], Rollout]:
        """The rollout from ``start`` as a generator: it yields a :class:`SampleRequest` wherever the model samples,
        takes the sampled ``(ids, logprobs)`` back (``send``) and returns the :class:`Rollout`. :meth:`play` drives it
        with a session in this process; :class:`training.rl.workers.EnvWorker` drives it in a Ray actor holding
        the env, the sampling staying in the trainer process."""
        assert self.env.pool is not None
        reference = self.env.pool.entry(start.episode_id).gold_policy()
        obs, info = self.env.reset(options={"episode_id": start.episode_id})
        rollout = Rollout(start.episode_id, activation=start.activation)
        self.inputs, self.conversations, self.record = [], [], None
        took_over, closed = False, None  # closed: how the last model response ended (None: no tokens)
        reached = False  # whether the episode reached the start activation
        confirm = HarnessConfirm(enabled=self.env.hier is None)  # the harness confirms an undecided start point
        while True:
            inp: PolicyInput = info["policy_input"]
            activation: int = info["activation"]
            if activation > start.activation and not took_over:
                raise self._never_took_over(start, reached)
            reached |= activation == start.activation
            action = None  # None: the model answers
            if activation != start.activation or (not took_over and self.takeover == "decision"):
                if took_over and closed is not None:  # the model's activation just ended
                    rollout.extend(self.tokens.end(closed), model=False)
                    closed = None
                if took_over:  # the runtime ended the start activation
                    confirm.part_ended(rollout.actions)
                action = confirm.due(inp)  # the next check request of the pause: the harness's, not the gold's
                if action is None:
                    action = reference.respond(inp)
                    if activation == start.activation and gold_decision(action):
                        action = None  # the decision takeover: the model answers in place of the gold's decision
            model = action is None
            sampled = False
            if model:
                if not took_over:  # the conversation so far: the activation (flat) or the decision prompt (hier),
                    took_over = True  # and with takeover="decision" the gold's calls and their results
                    rollout.prompt_ids = self.tokens.conversation(info["messages"])
                elif closed is not None and not rollout.stop_reason:  # obs: the <tool_response> of the last call
                    suffix = self.tokens.suffix(obs, closed)
                    if self._fits(rollout, len(suffix) + 1):
                        rollout.extend(suffix, model=False)
                        closed = None
                    else:  # the last model turn stays open: the close below ends it
                        rollout.stop_reason = "context_cap"
                self.inputs.append(inp)
                self.conversations.append(info["messages"])
                text, ended = yield from self._respond(rollout)
                sampled = text is not None
                if sampled:
                    action, closed = text, ended
                else:  # over the budget: the harness confirms an undecided part, else refused like a failed call
                    action = confirm.over_budget(inp, rollout.actions)
            obs, reward, terminated, truncated, info = self.env.step(action)
            if sampled:
                rollout.actions.append(action_stats(action, info.get("legal", False)))
            if terminated or truncated:
                break
        rollout.harness_confirmed = confirm.confirmed
        if not took_over:
            raise self._never_took_over(start, reached)
        if closed is not None:
            rollout.extend(self.tokens.end(closed), model=False)
        rollout.env_reward = float(reward)
        rollout.reward_terms = dict(info.get("reward_terms") or {})
        record = self.record = info.get("record")
        rollout.episode_activations = (
            activation + 1 if record is None else len([a for a in record.activations if a["actor"] == "policy"])
        )
        return rollout

    def _never_took_over(self, start: StartPoint, reached: bool) -> RuntimeError:
        """The error of a rollout whose start activation ended (or never came) without a model response."""
        where = f"episode {start.episode_id}, start activation {start.activation}"
        if reached:  # only the decision takeover waits inside the start activation
            return RuntimeError(
                f"{where}: the gold never decided (its responses there were all tool calls until the activation "
                "ended), so the model never took over; with takeover='decision' start from activations the gold ends "
                "with a control action (gold_controls)"
            )
        what = "a tier-1 request of " if self.env.hier is not None else ""
        return RuntimeError(
            f"{where}: the episode passed or ended without {what}the start activation; the pool's gold record and its "
            "replay disagree (re-synthesize the pool)"
        )

    def _respond(
        self, rollout: Rollout
    ) -> Generator[SampleRequest, tuple[list[int], list[float]], tuple[str | None, bool | None]]:
        """The model's next response text and whether it ended with ``<|im_end|>``; ``(None, None)`` when its budget
        (``max_responses`` sampled responses, the rollout's tokens, the context window) is spent and nothing is
        sampled; a request never asks for more ids than the context window has left."""
        context = rollout.prompt_ids + rollout.completion_ids
        budget = min(self.limits.max_new_tokens, self.limits.max_completion_length - rollout.model_tokens)
        if self.limits.max_context_length is not None:
            room = self.limits.max_context_length - len(context)
            if room <= 0 and not rollout.stop_reason:
                rollout.stop_reason = "context_cap"
            budget = min(budget, room)
        if rollout.stop_reason or budget <= 0 or len(rollout.actions) >= self.limits.max_responses:
            return None, None
        ids, logprobs = yield SampleRequest(context, budget)
        rollout.extend(ids, model=True, logprobs=logprobs)
        closed = bool(ids) and ids[-1] == self.tokens.eos_id
        rollout.truncated |= not closed
        return self.tokens.decode(ids[:-1] if closed else ids), closed

    def _fits(self, rollout: Rollout, more: int) -> bool:
        """Whether ``more`` ids after the rollout's context stay within ``max_context_length``."""
        cap = self.limits.max_context_length
        return cap is None or len(rollout.prompt_ids) + len(rollout.completion_ids) + more <= cap


def action_stats(text: str, legal: bool) -> dict[str, Any]:
    """What the training metrics need of one model response: its action name (None: unparseable), legality and,
    for a REPAIR, the variable it names."""
    parsed = parse_response(text) if text.strip() else None
    action = parsed.action if parsed is not None and parsed.ok else None
    stats: dict[str, Any] = {"name": action.name if action else None, "legal": bool(legal), "error_variable": None}
    if action is not None and action.name == "REPAIR":
        hint = action.arguments.get("error_hint") or {}
        stats["error_variable"] = hint.get("error_variable") if isinstance(hint, dict) else None
    return stats
