"""SFT samples from gold-managed runs, in TRL's conversational format, for the flat and the hierarchical manager.

Formats (the ``format`` column, :data:`FORMATS`):

- ``flat``: exactly what the ``llm`` policy sends at inference: for every activation the runtime's last
  :class:`~harness.manager.policy_types.PolicyInput` to the gold policy goes through
  :meth:`harness.manager.llm_policy.LLMPolicy.messages` (system, the activation's user message, then each earlier
  response and its ``<tool_response>``), followed by ``{"role": "assistant", "content": <the gold response>}``; the
  tools are :func:`~harness.manager.actions.tool_schemas`.
- ``hier``: exactly what tier 1 of the ``hier`` policy (:class:`~harness.manager.hier.HierPolicy`) is sent at
  inference. A gold run is a hierarchical run with the actors attributed: every input of a gold activation goes
  through the steps of :meth:`HierPolicy.respond <harness.manager.hier.HierPolicy.respond>` with the gold's response
  as tier 1's reply, so the policy's own rules say which responses are tier 0's (open, update and commit; in the
  check activation its ``check_execution`` of the latest step and the repair of a failed execution) and which are
  tier 1's (:func:`hier_part`). An activation with a tier-1 part gives one ``atomic`` sample: tier 1's
  conversation for the activation's last response (system :data:`~harness.manager.hier_prompts.HIER_SYSTEM`, the
  decision prompt, tier 1's earlier calls with their results), followed by the gold's decision; the tools are
  :func:`~harness.manager.hier_prompts.tier1_tool_schemas`. An activation where a gold response before tier 1's part
  is not tier 0's, or where tier 1 would reject a gold response, gives none and is counted (:func:`build_samples`
  ``drops``).
- ``hier_checks``: tier 1 of the ``hier`` policy as a check writer (``writes="checks"``): per state, the request it
  is sent at the first check activation (:func:`checks_part`) and, as the target, the canonical reply listing the
  specs the gold manager ran with ``run_check`` there (``{"checks": [...]}``); no tools.

Kinds (the flat format; a hier or hier_checks sample is always ``atomic``):

- ``atomic``: one activation (observation -> tool calls -> one control action);
- ``full``: a whole episode: one system message, then each activation's user message and exchanges in order.

Labels (per activation): ``repair`` (ends in REPAIR), ``post_repair`` (the faulted state after its repair),
``benign`` (the turn-end activations of a benign fault's turn), ``undetectable`` (the turn-end activations of the turn
of a harmful fault that no check of the gold manager revealed: it commits), else ``clean``. A full sample's label is
the episode's: ``repair`` when it holds a repair, ``benign`` for a benign fault, ``undetectable`` for an undetectable
one, else ``clean``.

Filtering (:func:`filter_samples`): every sample's action sequence is replayed on a
:class:`~harness.manager.lifecycle.Lifecycle` from the phase its first activation started in (illegal -> dropped; a
hier sample replays its whole check activation: tier 0's checks, then tier 1's actions), duplicates by a normalized
content hash are dropped, and samples whose chat-template rendering (with the sample's own tools) is longer than the
context budget in Qwen3 tokens are dropped. Every drop is counted by reason.
"""

from __future__ import annotations

import functools
import hashlib
import json
import unicodedata
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from harness.llm import ChatReply, Message
from harness.manager.actions import tool_schemas
from harness.manager.hier import HierPolicy
from harness.manager.hier_checks import render_checks_reply
from harness.manager.hier_prompts import tier1_tool_schemas
from harness.manager.lifecycle import CONTROL_ACTIONS, Lifecycle, Phase
from harness.manager.llm_policy import LLMPolicy
from harness.manager.wire import parse_response
from synthesis.gold import LoggedResponse

KINDS = ("atomic", "full")
LABELS = ("clean", "repair", "post_repair", "benign", "undetectable")
FORMATS = ("flat", "hier", "hier_checks")
"""Sample formats: the flat ``llm`` manager's conversations, tier 1's of the ``hier`` manager deciding, or tier 1's
of the ``hier`` manager writing the turn's checks (``writes="checks"``)."""


class _NoModel:
    """A backend that is never called: :meth:`LLMPolicy.messages` needs a policy object, not a model."""

    def chat(self, messages: Any, tools: Any = None) -> ChatReply:  # pragma: no cover - never called
        raise RuntimeError("the sample builder never calls a model")


MESSAGE_BUILDER = LLMPolicy(_NoModel())
"""The exact message builder of the ``llm`` policy."""


@dataclass(frozen=True)
class Activation:
    """One gold activation: its responses in order (the last is the control action) and what the samples need."""

    turn_id: str
    event_type: str
    entries: tuple[LoggedResponse, ...]
    start_phase: str
    start_repairs: int
    label: str

    @functools.cached_property
    def messages(self) -> list[dict[str, str]]:
        """Built once (atomic and full samples share it); the samples never modify it."""
        last = self.entries[-1]
        return [*MESSAGE_BUILDER.messages(last.inp), {"role": "assistant", "content": last.response}]

    @property
    def actions(self) -> list[str]:
        return [e.response for e in self.entries]

    @property
    def control(self) -> str:
        """The control action that ends the activation ("" when its last response does not parse)."""
        return _action_name(self.entries[-1].response) or ""


@functools.lru_cache(maxsize=8192)
def _action_name(response: str) -> str | None:
    parsed = parse_response(response)
    return parsed.action.name if parsed.ok and parsed.action is not None else None


def split_activations(
    log: Sequence[LoggedResponse], fault_turn: str | None, benign: bool, undetectable: bool = False
) -> list[Activation]:
    """Group a gold policy's log into activations (a new one starts where ``previous`` is empty) and label them."""
    groups: list[list[LoggedResponse]] = []
    for entry in log:
        if not entry.inp.previous or not groups:
            groups.append([])
        groups[-1].append(entry)
    activations = []
    lifecycle = Lifecycle()
    repaired_turns: set[str] = set()
    for group in groups:
        first = group[0].inp
        obs = json.loads(first.observation)
        turn_id = first.turn.turn_id if first.turn is not None else ""
        start_phase, start_repairs = lifecycle.phase.value, lifecycle.repair_attempts
        lifecycle.begin_activation()
        names = [_action_name(e.response) for e in group]
        for name in names:
            lifecycle.apply(name or "(unparseable response)")
        if names[-1] == "REPAIR":
            label = "repair"
            repaired_turns.add(turn_id)
        elif turn_id in repaired_turns and turn_id == fault_turn:
            label = "post_repair"
        elif benign and turn_id == fault_turn and obs["event_type"] != "turn_start":
            label = "benign"
        elif undetectable and turn_id == fault_turn and obs["event_type"] != "turn_start":
            label = "undetectable"
        else:
            label = "clean"
        activations.append(Activation(turn_id, obs["event_type"], tuple(group), start_phase, start_repairs, label))
    return activations


def legal_sequence(activations: Sequence[Activation]) -> str | None:
    """None when the activations' actions are a legal lifecycle path from the first one's start phase, else why."""
    if not activations:
        return "no activations"
    lifecycle = Lifecycle(phase=Phase(activations[0].start_phase), repair_attempts=activations[0].start_repairs)
    for activation in activations:
        lifecycle.begin_activation()
        for index, response in enumerate(activation.actions):
            name = _action_name(response)
            if name is None:
                return f"turn {activation.turn_id}: unparseable response"
            transition = lifecycle.apply(name)
            if not transition.legal:
                return f"turn {activation.turn_id}: {transition.message}"
            is_last = index == len(activation.actions) - 1
            if (name in CONTROL_ACTIONS) != is_last:
                return f"turn {activation.turn_id}: a control action must end the activation, and only it"
    return None


@functools.lru_cache(maxsize=2)
def _tools(format: str = "flat") -> list[dict[str, Any]]:
    return tier1_tool_schemas() if format == "hier" else [] if format == "hier_checks" else tool_schemas()


def _sample(
    messages: list[dict[str, str]],
    kind: str,
    label: str,
    last: Activation,
    turn_id: str,
    meta: dict[str, Any],
    format: str = "flat",
) -> dict:
    """One sample ending with the ``last`` activation (its ``control`` action is a column: what an SFT subset can be
    stratified by); its ``tools`` list is shared by every sample of its format (built once; nothing modifies it)."""
    return {
        "messages": messages, "tools": _tools(format), "kind": kind, "label": label, "control": last.control,
        "turn_id": turn_id, "format": format, **meta,
    }  # fmt: skip


# ---------------------------------------------------------------- the hier format
_HIER = HierPolicy(None)
"""The ``hier`` policy's own rules and message builder (default settings); it has no model and is never asked to
call one."""


def hier_part(activation: Activation) -> tuple[int, list[list[Message]]] | str | None:
    """Tier 1's part of a gold activation, by the steps of :meth:`HierPolicy.respond
    <harness.manager.hier.HierPolicy.respond>` with the gold's responses as tier 1's replies: the index of its first
    response and, per tier-1 response, tier 1's conversation (:meth:`~harness.manager.hier.HierPolicy.tier1_messages`,
    byte for byte what the policy sends at inference). None when tier 0 answers the whole activation (open, update,
    commit, the repair of a failed execution); a string (why) when the gold's activation is not a hier one: a
    response before tier 1's part that is not tier 0's (:meth:`~harness.manager.hier.HierPolicy.tier0_respond`), or
    a gold response tier 1 could not give (its turn is tier 0's, or :meth:`~harness.manager.hier.HierPolicy.vet`
    rejects it)."""
    entries = activation.entries
    conversations = [_HIER.tier1_messages(entry.inp) for entry in entries]
    asked = [k for k, conversation in enumerate(conversations) if conversation is not None]
    if not asked:
        return None
    start = asked[0]
    try:
        if any(_HIER.tier0_respond(entry.inp) != entry.response for entry in entries[:start]):
            return "hier: a gold response before tier 1's part is not tier 0's"
        for entry, conversation in zip(entries[start:], conversations[start:], strict=True):
            why = "tier 0 answers it" if conversation is None else _HIER.vet(entry.response, entry.inp)
            if why is not None:
                return f"hier: tier 1 would not take the gold response ({why.split(':')[0][:80]})"
    finally:
        _HIER.rejected.clear()  # tier 0's record of rejected replies: nothing to keep here
    return start, conversations[start:]  # type: ignore[return-value]


_HIER_CHECKS = HierPolicy(None, writes="checks")
"""The ``hier`` policy whose tier 1 writes checks: its own rules and request builder (default settings)."""


def checks_part(activation: Activation, asked: set[tuple[str, str]]) -> list[Message] | None:
    """Tier 1's check-writing sample of a gold check activation: the conversation the ``hier`` policy with
    ``writes="checks"`` sends (:meth:`~harness.manager.hier.HierPolicy.tier1_messages`: the first request after tier
    0's ``check_execution``, once per state; ``asked`` holds the ``(turn, state)`` pairs already asked in this run),
    followed by the canonical reply listing the specs of the gold's ``run_check`` calls in this activation
    (:func:`~harness.manager.hier_checks.render_checks_reply`; a constraint the gold checks with its own code has no
    spec and is left out). None when tier 1 is not asked here (tier 0's activations, a failed execution, a state
    already asked)."""
    for entry in activation.entries:
        conversation = _HIER_CHECKS.tier1_messages(entry.inp)
        if conversation is None:
            continue
        draft = json.loads(entry.inp.observation)["current_draft"]
        key = (activation.turn_id, str(draft.get("id")))
        if key in asked:
            return None
        asked.add(key)
        specs = []
        for response in activation.actions:
            parsed = parse_response(response)
            if parsed.ok and parsed.action is not None and parsed.action.name == "run_check":
                specs.append(parsed.action.arguments["spec"])
        return [*conversation, {"role": "assistant", "content": render_checks_reply(specs)}]
    return None


def build_samples(
    log: Sequence[LoggedResponse],
    meta: dict[str, Any],
    *,
    fault_turn: str | None,
    benign: bool,
    kinds: Iterable[str],
    atomic_labels: Iterable[str] = LABELS,
    undetectable: bool = False,
    formats: Iterable[str] = ("flat",),
    drops: Counter[str] | None = None,
) -> list[dict[str, Any]]:
    """Samples of one gold run. ``meta``: the metadata columns (task_id, domain, fault_type, fault_id, ...).

    ``kinds``: which of :data:`KINDS` to build in the flat format; ``atomic_labels``: the labels of the activations
    kept as atomic samples, in either format (e.g. leave ``clean`` out of the faulted runs: their clean activations
    repeat the clean run's); ``formats``: which of :data:`FORMATS` to build (hier: one atomic sample per activation
    with a tier-1 part, :func:`hier_part`); ``drops``: counts, by reason, the activations that give no hier sample
    because the gold's is not a hier activation."""
    activations = split_activations(log, fault_turn, benign, undetectable)
    samples = []
    keep = set(atomic_labels)
    kinds, formats = set(kinds), set(formats)
    if "flat" not in formats:
        kinds = set()
    if "atomic" in kinds:
        for activation in activations:
            if activation.label in keep:
                sample = _sample(activation.messages, "atomic", activation.label, activation, activation.turn_id, meta)
                sample["_activations"] = [activation]
                samples.append(sample)
    if "full" in kinds and activations:
        messages = activations[0].messages[:1]
        for activation in activations:
            messages += activation.messages[1:]
        labels = {a.label for a in activations}
        label = "repair" if "repair" in labels else "benign" if benign else "undetectable" if undetectable else "clean"
        sample = _sample(messages, "full", label, activations[-1], fault_turn or "", meta)
        sample["_activations"] = activations
        samples.append(sample)
    if "hier" in formats:
        for activation in activations:
            if activation.label in keep:
                part = hier_part(activation)
                if isinstance(part, str):
                    if drops is not None:
                        drops[part] += 1
                    continue
                if part is None:
                    continue
                messages = [*part[1][-1], {"role": "assistant", "content": activation.entries[-1].response}]
                sample = _sample(messages, "atomic", activation.label, activation, activation.turn_id, meta, "hier")
                sample["_activations"] = [activation]
                samples.append(sample)
    if "hier_checks" in formats:
        asked: set[tuple[str, str]] = set()
        for activation in activations:
            messages = checks_part(activation, asked)
            if messages is not None and activation.label in keep:
                sample = _sample(
                    messages, "atomic", activation.label, activation, activation.turn_id, meta, "hier_checks"
                )
                sample["_activations"] = [activation]
                samples.append(sample)
    return samples


def content_hash(sample: dict[str, Any]) -> str:
    """The dedupe key: sha256 of the messages with whitespace collapsed and case folded."""
    text = json.dumps(sample["messages"], ensure_ascii=False, sort_keys=True)
    return hashlib.sha256(" ".join(text.split()).lower().encode()).hexdigest()  # split(): the runs of \s


def filter_samples(
    samples: Iterable[dict[str, Any]],
    count_tokens: Callable[[dict[str, Any]], int] | None,
    max_tokens: int,
    seen: set[str] | None = None,
) -> tuple[list[dict[str, Any]], Counter[str]]:
    """Drop illegal sequences, duplicates (``seen`` carries hashes across calls) and samples over ``max_tokens``
    (``count_tokens`` None: no length filter). Returns the kept samples (with ``n_tokens`` and ``content_hash`` set,
    the private ``_activations`` removed) and the drop counts by reason."""
    seen = set() if seen is None else seen
    kept, dropped = [], Counter()
    samples = list(samples)
    lengths: dict[int, int] = {}  # by id(sample); longest first: a full sample covers its atomic ones (token_counter)
    if count_tokens is not None:
        for sample in sorted(samples, key=lambda sample: -len(sample["messages"])):
            lengths[id(sample)] = count_tokens(sample)
    for sample in samples:
        activations = sample.pop("_activations", None)
        if activations is not None and legal_sequence(activations) is not None:
            dropped["illegal sequence"] += 1
            continue
        key = content_hash(sample)
        if key in seen:
            dropped["duplicate"] += 1
            continue
        n_tokens = lengths.get(id(sample), 0)
        if count_tokens is not None and n_tokens > max_tokens:
            dropped["over context budget"] += 1
            continue
        seen.add(key)
        kept.append({**sample, "n_tokens": n_tokens, "content_hash": key})
    return kept, dropped


SPLIT_TOKEN = "<|im_start|>"


def token_counter(tokenizer: Any, encoding: Any = None) -> Callable[[dict[str, Any]], int]:
    """Count a sample as the SFT trainer sees it: the chat-template rendering of its messages with its tools, in the
    tokenizer's tokens.

    The rendering is split before every ``<|im_start|>`` (a special token, so the encoder never merges across it and
    the count of the whole equals the sum of the chunks' counts — ``tests/synthesis/test_samples.py`` checks this
    against encoding the whole text) and each distinct chunk is encoded once: the system prompt with the tool list
    and the activations shared by atomic and full samples are then counted once per process.

    The rendering itself is skipped where it is known: the template (``harness/chat_template.jinja``) renders a
    conversation of system, user and assistant messages as a head (system prompt and tools) followed by one
    ``<|im_start|>`` chunk per message that depends on that message alone. So once a rendering has split into
    exactly one chunk per message, each message's count is remembered (by role and content, and the head's by
    system prompt and tool list), and a later sample made only of remembered messages — an atomic sample after the
    full sample holding its activation — is the sum, without a rendering. Samples with ``tool`` messages, other
    message fields or a message that itself holds ``<|im_start|>``, and every sample of a tokenizer with another
    chat template, are always rendered.

    ``encoding``: a ``tiktoken.Encoding`` over the same vocabulary (for the embedded Qwen3 tokenizer,
    :func:`harness.tokenizer.qwen3_tiktoken_encoding`, whose ids equal the fast tokenizer's on NFC text) encodes
    the chunks instead of the tokenizer: the same counts, about 2x faster on the synthesized samples."""
    chunks_seen: dict[str, int] = {}
    messages_seen: dict[tuple[str, str], int] = {}
    heads_seen: dict[tuple[str | None, int], int] = {}
    tools_held: dict[int, Any] = {}  # keeps each tool list keyed by id alive, so that the id is never reused
    from harness.tokenizer import load_chat_template

    # other templates may render a message differently by its position (stock Qwen3 drops earlier <think> blocks)
    per_message = getattr(tokenizer, "chat_template", None) == load_chat_template()

    def encode(chunk: str) -> int:
        if encoding is not None:
            return len(encoding.encode(unicodedata.normalize("NFC", chunk), allowed_special="all"))
        return len(tokenizer(chunk, add_special_tokens=False)["input_ids"])

    def keys(sample: dict[str, Any]) -> tuple[tuple[str | None, int], list[tuple[str, str]]] | None:
        messages, tools = sample["messages"], sample["tools"]
        if len(tools_held) > 64:
            tools_held.clear()
            heads_seen.clear()
        tools_held.setdefault(id(tools), tools)
        if tools_held[id(tools)] is not tools:
            return None
        system = messages[0]["content"] if messages and messages[0].get("role") == "system" else None
        body = []
        for message in messages[1:] if system is not None else messages:
            role, content = message.get("role"), message.get("content")
            if role not in ("user", "assistant") or not isinstance(content, str) or len(message) != 2:
                return None
            body.append((role, content))
        if not isinstance(system, str | None) or (system is not None and len(messages[0]) != 2):
            return None
        return (system, id(tools)), body

    def count(sample: dict[str, Any]) -> int:
        known = keys(sample) if per_message else None
        if known is not None:
            head, body = known
            if head in heads_seen and all(key in messages_seen for key in body):
                return heads_seen[head] + sum(messages_seen[key] for key in body)
        text = tokenizer.apply_chat_template(sample["messages"], tools=sample["tools"], tokenize=False)
        chunks = text.split(SPLIT_TOKEN)
        chunks = chunks[:1] + [SPLIT_TOKEN + chunk for chunk in chunks[1:]]
        counts = []
        for chunk in chunks:
            if chunk not in chunks_seen:
                chunks_seen[chunk] = encode(chunk)
            counts.append(chunks_seen[chunk])
        if known is not None:
            head, body = known
            # the text before the first <|im_start|> (empty) and the system block, if any; then the messages
            n_head = 2 if head[0] is not None or sample["tools"] else 1
            if len(chunks) == n_head + len(body):  # exactly one chunk per message
                heads_seen[head] = sum(counts[:n_head])
                messages_seen.update(zip(body, counts[n_head:], strict=True))
        if len(chunks_seen) > 50_000 or len(messages_seen) > 50_000:
            chunks_seen.clear()
            messages_seen.clear()
        return sum(counts)

    return count


def exact_token_count(tokenizer: Any, sample: dict[str, Any]) -> int:
    """The token count of the whole rendering encoded at once (the reference for :func:`token_counter`)."""
    text = tokenizer.apply_chat_template(sample["messages"], tools=sample["tools"], tokenize=False)
    return len(tokenizer(text, add_special_tokens=False)["input_ids"])
