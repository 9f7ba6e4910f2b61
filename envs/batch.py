"""``ManagerEnvBatch``: N independent :class:`~envs.manager.ManagerEnv` instances stepped together, for RL.

``ManagerEnvBatch(episode_ids, pool, tokenizer=None)`` makes one env per episode id (all sharing one sandbox: one
zygote, a kernel per live episode). ``reset()`` resets env ``i`` to ``episode_ids[i]`` and returns the list of
``(obs, info)``; ``step(actions)`` takes one action per env and returns the list of ``(obs, reward, terminated,
truncated, info)``. An env whose episode is over reports ``("", 0.0, terminated, truncated, {"done": True, ...})``
and takes ``None`` as its action (any other action is a :class:`~envs.bridge.StepAfterDoneError`); ``done`` tells
which envs still need actions.

Token ids (with a ``tokenizer``, e.g. :func:`harness.tokenizer.build_qwen3_tokenizer`, whose chat template is
prefix-preserving). The model sees one chat conversation per manager activation, the one the ``llm`` policy would
send (:meth:`harness.manager.llm_policy.LLMPolicy.messages`: system prompt with the tool schemas, the rendered
activation, then each earlier response and its ``<tool_response>``). Token ids are computed as differences of
successive renderings of that conversation (``apply_chat_template(..., add_generation_prompt=True)``):

- ``info["prompt_ids"]`` (at reset, and on the step whose action ended an activation when a new one starts): the
  whole rendering of the new conversation, ending with the assistant header ``<|im_start|>assistant\\n``;
- ``info["model_ids"]`` (every step): the tokens of the response as the template renders it in the conversation
  (equal to the sampled text when the response is in the template's canonical form, e.g. ``<think>\\n...\\n</think>
  \\n\\n`` before the call);
- ``info["env_ids"]`` (every step): the environment's tokens that follow the response: ``<|im_end|>\\n`` closing the
  assistant turn and, when the activation goes on, the ``<tool_response>`` user turn and the next assistant header.

So per conversation ``prompt_ids + model_ids_1 + env_ids_1 + ... + model_ids_k + env_ids_k`` equals the tokenized
rendering of the full conversation (``tests/envs/test_batch.py``): a trainer concatenates its sampled ids with
``env_ids`` and masks the ``env_ids`` (and prompt) out of the loss. (``<|im_end|>`` is counted as an env token here;
a trainer that samples it as the model's stop token keeps its own copy and drops the first env id.)
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from envs.bridge import StepAfterDoneError
from envs.common import default_isolation
from envs.manager import CONVERSATION, ManagerEnv
from envs.pool import ReplayPool
from harness.manager.policies import PolicyInput
from harness.sandbox import Sandbox, SandboxConfig

ASSISTANT_END = "<|im_end|>\n"
"""What the chat template writes after an assistant body (the end of the assistant turn)."""


class ChatTokens:
    """Token ids of one env's conversations as successive renderings (see the module docstring)."""

    def __init__(self, tokenizer: Any):
        self.tokenizer = tokenizer
        self.rendered = ""  # the current conversation rendered with the generation prompt

    def render(self, messages: list[dict[str, Any]], generation_prompt: bool) -> str:
        return self.tokenizer.apply_chat_template(
            messages, tools=CONVERSATION.tools, tokenize=False, add_generation_prompt=generation_prompt
        )

    def encode(self, text: str) -> list[int]:
        return list(self.tokenizer(text, add_special_tokens=False)["input_ids"])

    def start(self, inp: PolicyInput) -> list[int]:
        """A new conversation: its prompt ids."""
        self.rendered = self.render(CONVERSATION.messages(inp), True)
        return self.encode(self.rendered)

    def step(self, inp: PolicyInput, response: str, following: PolicyInput | None) -> dict[str, Any]:
        """The ids of ``response`` (answering ``inp``) and of the env's text after it; ``following`` is the next
        input (None when the episode ended)."""
        messages = CONVERSATION.messages(inp)
        if response.strip():
            closed = self.render([*messages, {"role": "assistant", "content": response}], False)
            if not closed.startswith(self.rendered) or not closed.endswith(ASSISTANT_END):
                raise ValueError("the chat template is not prefix-preserving for this response; use the template "
                                 "of harness/chat_template.jinja (build_qwen3_tokenizer).")  # fmt: skip
            model_text = closed[len(self.rendered) : -len(ASSISTANT_END)]
        else:
            model_text = ""  # the llm policy drops an empty response from the conversation (nothing to replay)
        ids: dict[str, Any] = {"model_ids": self.encode(model_text), "prompt_ids": None}
        head = self.rendered + model_text
        following_text = None if following is None else self.render(CONVERSATION.messages(following), True)
        if following_text is not None and following_text.startswith(head) and (model_text or following_text == head):
            ids["env_ids"] = self.encode(following_text[len(head) :])
            self.rendered = following_text
        else:  # the conversation ended: close the assistant turn; a new activation starts a new conversation
            ids["env_ids"] = self.encode(ASSISTANT_END if model_text else "")
            if following_text is not None:
                self.rendered = following_text
                ids["prompt_ids"] = self.encode(following_text)
        return ids


class ManagerEnvBatch:
    """N manager envs over ``pool`` (see the module docstring); ``env_kwargs`` go to each :class:`ManagerEnv`."""

    def __init__(
        self,
        episode_ids: Sequence[str],
        pool: ReplayPool | str,
        tokenizer: Any = None,
        *,
        isolation: str | None = None,
        **env_kwargs: Any,
    ):
        if not episode_ids:
            raise ValueError("ManagerEnvBatch needs at least one episode id (e.g. pool.ids).")
        self.pool = pool if isinstance(pool, ReplayPool) else ReplayPool(pool)
        for episode_id in episode_ids:
            self.pool.entry(episode_id)  # unknown ids fail here, naming the pool
        self.episode_ids = list(episode_ids)
        self.sandbox = Sandbox(SandboxConfig(isolation=default_isolation(isolation)))
        self.envs = [
            ManagerEnv(pool=self.pool, worker="replay", sandbox=self.sandbox, **env_kwargs) for _ in self.episode_ids
        ]
        self.tokens = [ChatTokens(tokenizer) for _ in self.envs] if tokenizer is not None else None
        self.inputs: list[PolicyInput | None] = [None] * len(self.envs)
        self.done = [True] * len(self.envs)
        self._ended: list[tuple[bool, bool]] = [(False, False)] * len(self.envs)

    def __len__(self) -> int:
        return len(self.envs)

    def reset(self, seed: int | None = None) -> list[tuple[str, dict[str, Any]]]:
        """Reset env ``i`` to ``episode_ids[i]`` (``seed + i`` seeds its ``np_random`` when given)."""
        out = []
        for i, (env, episode_id) in enumerate(zip(self.envs, self.episode_ids, strict=True)):
            obs, info = env.reset(seed=None if seed is None else seed + i, options={"episode_id": episode_id})
            self.inputs[i], self.done[i], self._ended[i] = info["policy_input"], False, (False, False)
            if self.tokens is not None:
                info["prompt_ids"] = self.tokens[i].start(info["policy_input"])
            out.append((obs, info))
        return out

    def step(self, actions: Sequence[str | None]) -> list[tuple[str, float, bool, bool, dict[str, Any]]]:
        if len(actions) != len(self.envs):
            raise ValueError(f"step() got {len(actions)} actions for {len(self.envs)} envs; pass one per env "
                             "(None for the envs whose episode is over).")  # fmt: skip
        out = []
        for i, (env, action) in enumerate(zip(self.envs, actions, strict=True)):
            if self.done[i]:
                if action is not None:
                    raise StepAfterDoneError(
                        f"env {i} (episode {self.episode_ids[i]}) is done; pass None as its action or reset()."
                    )
                out.append(("", 0.0, *self._ended[i], {"done": True, "episode_id": self.episode_ids[i]}))
                continue
            if action is None:
                raise TypeError(f"env {i} (episode {self.episode_ids[i]}) is running and needs an action, not None.")
            obs, reward, terminated, truncated, info = env.step(action)
            following = info.get("policy_input")
            if self.tokens is not None:
                info.update(self.tokens[i].step(self.inputs[i], action, following))
            self.inputs[i] = following
            if terminated or truncated:
                self.done[i], self._ended[i] = True, (terminated, truncated)
            info["done"] = self.done[i]
            out.append((obs, reward, terminated, truncated, info))
        return out

    def close(self) -> None:
        for env in self.envs:
            env.close()
        self.sandbox.close()
