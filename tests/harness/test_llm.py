"""Chat backends (harness/llm.py): the OpenAI-compatible client against a real local HTTP server speaking the
chat-completions shape (text replies, structured tool_calls, /models, a 500, an unreachable URL; the official
``openai`` client parses the same replies), and the in-process transformers backend on a tiny random model built
here from a config and a tokenizer trained in the test (``<tool_call>`` is a special token of it).

The server and the tiny-model builder are reused by tests/harness/manager/test_llm_policy.py."""

from __future__ import annotations

import json
import pickle
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from http.server import BaseHTTPRequestHandler, HTTPServer, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from harness.import_utils import is_available
from harness.llm import (
    DEFAULT_MAX_REPLY_CHARS,
    ChatEndpointError,
    ChatReply,
    HFChatBackend,
    OpenAIChatBackend,
    cut_reply,
)
from harness.manager.actions import tool_schemas

needs_transformers = pytest.mark.skipif(
    not (is_available("transformers") and is_available("torch") and is_available("tokenizers")),
    reason="the train extra (transformers, torch, tokenizers) is not installed",
)
needs_openai = pytest.mark.skipif(not is_available("openai"), reason="the openai client is not installed")


# ---------------------------------------------------------------- a scripted OpenAI-compatible server


def completion(content: str | None = "", tool_calls: list[dict[str, Any]] | None = None, **message: Any) -> dict:
    """A chat.completion body as vLLM returns it (``tool_calls`` when the hermes tool parser found calls)."""
    msg: dict[str, Any] = {"role": "assistant", "content": content, **message}
    if tool_calls is not None:
        msg["tool_calls"] = tool_calls
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 1700000000,
        "model": "tiny-manager",
        "choices": [
            {"index": 0, "message": msg, "finish_reason": "tool_calls" if tool_calls else "stop", "logprobs": None}
        ],
        "usage": {"prompt_tokens": 11, "completion_tokens": 5, "total_tokens": 16},
    }


def tool_call(name: str, arguments: str, call_id: str = "call_0") -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


class FakeOpenAI:
    """A real HTTP server in a thread: ``GET /v1/models`` lists ``models``; each ``POST /v1/chat/completions`` pops
    the next scripted ``(status, body)`` (the last one repeats). Every request is kept in ``requests``, the connections
    it accepted counted in ``connections``. ``keep_alive``: None, HTTP/1.0 (one connection per request); ``"yes"``,
    HTTP/1.1 keep-alive on a threaded server; ``"drop"``, the same but each connection closed after one answer
    without saying so (as a server that drops idle connections)."""

    def __init__(
        self,
        replies: list[tuple[int, dict[str, Any] | str]],
        models: tuple[str, ...] = ("tiny-manager",),
        keep_alive: str | None = None,
    ):
        self.replies, self.models = list(replies), models
        self.requests: list[dict[str, Any]] = []
        self.connections = 0
        counting = threading.Lock()
        fake = self

        class Handler(BaseHTTPRequestHandler):
            if keep_alive is not None:  # "yes": HTTP/1.1 keep-alive; "drop": closes each connection unannounced
                protocol_version = "HTTP/1.1"

            def setup(self) -> None:
                super().setup()
                with counting:
                    fake.connections += 1

            def do_GET(self) -> None:  # noqa: N802
                fake.requests.append({"method": "GET", "path": self.path, "auth": self.headers.get("Authorization")})
                self._send(200, {"object": "list", "data": [{"id": m, "object": "model"} for m in fake.models]})

            def do_POST(self) -> None:  # noqa: N802
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                fake.requests.append(
                    {"method": "POST", "path": self.path, "auth": self.headers.get("Authorization"), "body": body}
                )
                status, reply = fake.replies.pop(0) if len(fake.replies) > 1 else fake.replies[0]
                self._send(status, reply)

            def _send(self, status: int, payload: dict[str, Any] | str) -> None:
                data = (payload if isinstance(payload, str) else json.dumps(payload)).encode()  # str: a raw body
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)
                if keep_alive == "drop":
                    self.close_connection = True

            def log_message(self, *args: object) -> None:
                pass

        self.server = (ThreadingHTTPServer if keep_alive else HTTPServer)(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_port}/v1"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> FakeOpenAI:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()

    def posts(self) -> list[dict[str, Any]]:
        return [r for r in self.requests if r["method"] == "POST"]


def test_text_reply_tokens_and_request_shape():
    with FakeOpenAI([(200, completion("Final Answer: 42"))]) as server:
        backend = OpenAIChatBackend(server.url, "tiny-manager", api_key="k", max_tokens=77)
        reply = backend.chat([{"role": "user", "content": "hi"}])
    assert reply == ChatReply("Final Answer: 42", 11, 5)
    assert reply.message == {"role": "assistant", "content": "Final Answer: 42"}
    (post,) = server.requests
    assert post["path"] == "/v1/chat/completions" and post["auth"] == "Bearer k"
    assert post["body"]["model"] == "tiny-manager" and post["body"]["max_tokens"] == 77
    assert post["body"]["messages"] == [{"role": "user", "content": "hi"}] and "tools" not in post["body"]


def test_model_none_uses_the_first_listed_model_once():
    with FakeOpenAI([(200, completion("a"))], models=("first-model", "second")) as server:
        backend = OpenAIChatBackend(server.url + "/")
        backend.chat([{"role": "user", "content": "1"}])
        backend.chat([{"role": "user", "content": "2"}])
    methods = [(r["method"], r["path"]) for r in server.requests]
    assert methods == [("GET", "/v1/models"), ("POST", "/v1/chat/completions"), ("POST", "/v1/chat/completions")]
    assert [p["body"]["model"] for p in server.posts()] == ["first-model", "first-model"]


def test_structured_tool_calls_come_back_in_the_message_and_tools_are_sent():
    calls = [tool_call("check_execution", '{"step_id": 3}')]
    with FakeOpenAI([(200, completion(None, calls))]) as server:
        reply = OpenAIChatBackend(server.url, "m").chat([{"role": "user", "content": "x"}], tools=tool_schemas())
    assert reply.text == "" and reply.message is not None
    assert reply.message["tool_calls"] == calls
    assert server.posts()[0]["body"]["tools"] == tool_schemas()


def test_an_error_status_names_the_status_and_the_server_message():
    body = {"error": {"message": "KV cache is full", "type": "InternalServerError", "code": 500}}
    with FakeOpenAI([(500, body)]) as server:
        backend = OpenAIChatBackend(server.url, "m")
        with pytest.raises(ChatEndpointError, match=r"answered HTTP 500: KV cache is full") as info:
            backend.chat([{"role": "user", "content": "x"}])
    assert info.value.status == 500


def test_vllm_style_error_body_is_read_too():
    body = {"object": "error", "message": '"auto" tool choice requires --enable-auto-tool-choice', "code": 400}
    with FakeOpenAI([(400, body)]) as server:
        with pytest.raises(ChatEndpointError, match=r"HTTP 400: \"auto\" tool choice requires"):
            OpenAIChatBackend(server.url, "m").chat([{"role": "user", "content": "x"}], tools=tool_schemas())


def test_an_unreachable_endpoint_names_the_url_and_the_fix():
    backend = OpenAIChatBackend("http://127.0.0.1:9/v1", "m", timeout_s=2)
    with pytest.raises(ConnectionError, match=r"127\.0\.0\.1:9/v1/chat/completions failed: .*server is running"):
        backend.chat([{"role": "user", "content": "hi"}])
    with pytest.raises(ConnectionError, match=r"127\.0\.0\.1:9/v1/models failed"):
        OpenAIChatBackend("http://127.0.0.1:9/v1", timeout_s=2).chat([{"role": "user", "content": "hi"}])


def test_one_backend_reuses_connections_across_calls_and_threads():
    with FakeOpenAI([(200, completion("ok"))], keep_alive="yes") as server:
        backend = OpenAIChatBackend(server.url, "m")
        assert [backend.chat([{"role": "user", "content": str(i)}]).text for i in range(5)] == ["ok"] * 5
        assert server.connections == 1 and backend.connections.opened == 1
        with ThreadPoolExecutor(4) as pool:
            texts = list(pool.map(lambda i: backend.chat([{"role": "user", "content": str(i)}]).text, range(40)))
        assert texts == ["ok"] * 40 and len(server.posts()) == 45
        assert server.connections == backend.connections.opened <= 4  # at most one per thread at a time
        copied = pickle.loads(pickle.dumps(backend))  # e.g. sent to a Ray actor: no socket travels
        assert copied.chat([{"role": "user", "content": "x"}]).text == "ok" and copied.connections.opened == 1


def test_a_connection_the_server_dropped_is_replaced_once():
    with FakeOpenAI([(200, completion("ok"))], keep_alive="drop") as server:
        backend = OpenAIChatBackend(server.url, "m")
        assert [backend.chat([{"role": "user", "content": str(i)}]).text for i in range(3)] == ["ok"] * 3
        assert len(server.posts()) == 3 and server.connections == 3


def test_a_base_url_that_is_not_http_is_refused():
    with pytest.raises(ValueError, match=r"'localhost:8000/v1' is not an HTTP URL.*http://localhost:8000/v1"):
        OpenAIChatBackend("localhost:8000/v1")


@needs_openai
def test_cut_reply_keeps_short_replies_and_reports_the_full_length():
    assert cut_reply("abc", 3) == ("abc", None)
    assert cut_reply("abcdef", 4) == ("abcd", 6)
    assert DEFAULT_MAX_REPLY_CHARS == 32_000


def test_a_deep_body_is_an_endpoint_error_and_a_lone_surrogate_arrives_as_escape_text():
    deep = '{"choices": ' + "[" * 100_000 + "]" * 100_000 + "}"
    with FakeOpenAI([(200, deep), (200, completion("a\udc00b"))]) as server:
        backend = OpenAIChatBackend(server.url, "tiny-manager")
        with pytest.raises(ChatEndpointError, match=r"not JSON \(JSON nested deeper than 100 levels"):
            backend.chat([{"role": "user", "content": "hi"}])
        reply = backend.chat([{"role": "user", "content": "hi"}])
    assert reply.text == "a\\udc00b"  # the escape text: it encodes as UTF-8
    reply.text.encode("utf-8")


def test_the_official_openai_client_parses_the_fake_server_replies():
    import openai

    calls = [tool_call("OPEN_STATE", '{"issue": "q", "constraints": [], "relations": [{"type": "init"}]}')]
    with FakeOpenAI([(200, completion(None, calls)), (200, completion("plain text"))]) as server:
        client = openai.OpenAI(base_url=server.url, api_key="k", max_retries=0)
        models = [m.id for m in client.models.list()]
        first = client.chat.completions.create(
            model="tiny-manager", messages=[{"role": "user", "content": "x"}], tools=tool_schemas()
        )
        second = client.chat.completions.create(model="tiny-manager", messages=[{"role": "user", "content": "x"}])
    assert models == ["tiny-manager"]
    message = first.choices[0].message
    assert message.content is None and message.tool_calls is not None
    assert message.tool_calls[0].function.name == "OPEN_STATE"
    assert json.loads(message.tool_calls[0].function.arguments)["relations"] == [{"type": "init"}]
    assert first.usage is not None and (first.usage.prompt_tokens, first.usage.completion_tokens) == (11, 5)
    assert second.choices[0].message.content == "plain text" and second.choices[0].finish_reason == "stop"


# ---------------------------------------------------------------- a tiny in-process transformers model

SPECIAL_TOKENS = (
    "<|endoftext|>",
    "<|im_start|>",
    "<|im_end|>",
    "<tool_call>",
    "</tool_call>",
    "<tool_response>",
    "</tool_response>",
    "<think>",
    "</think>",
)
TINY_TEMPLATE = (
    "{%- for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}"
    "{% if loop.first and tools %}\n<tools>{% for t in tools %}{{ t.function.name }} {% endfor %}</tools>{% endif %}"
    "<|im_end|>\n{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


def build_tiny_chat_model(folder: Path, corpus: list[str]) -> Path:
    """A random-init Qwen3 (hidden 16, one layer) and a byte-level BPE tokenizer trained on ``corpus`` (600 tokens;
    ChatML tokens and the tool-call tags are special), saved to ``folder``. ``TINY_TEMPLATE`` renders the tool
    names. Deterministic (seeded)."""
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast, Qwen3Config, Qwen3ForCausalLM

    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=600,
        special_tokens=list(SPECIAL_TOKENS),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tokenizer.train_from_iterator(corpus, trainer=trainer)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tokenizer,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        additional_special_tokens=list(SPECIAL_TOKENS[3:]),
    )
    fast.chat_template = TINY_TEMPLATE
    config = Qwen3Config(
        vocab_size=tokenizer.get_vocab_size(),
        hidden_size=16,
        intermediate_size=32,
        num_hidden_layers=1,
        num_attention_heads=2,
        num_key_value_heads=1,
        head_dim=8,
        max_position_embeddings=8192,
        eos_token_id=fast.eos_token_id,
        pad_token_id=fast.pad_token_id,
        tie_word_embeddings=True,
    )
    torch.manual_seed(0)
    Qwen3ForCausalLM(config).save_pretrained(folder)
    fast.save_pretrained(folder)
    return folder


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    yield build_tiny_chat_model(tmp_path_factory.mktemp("tiny-chat"), [json.dumps(tool_schemas()), "hello world"])


@needs_transformers
def test_hf_backend_renders_tools_with_the_template_and_counts_tokens(tiny_model):
    backend = HFChatBackend(str(tiny_model), max_new_tokens=6)
    messages = [{"role": "system", "content": "be brief"}, {"role": "user", "content": "which step failed?"}]
    prompt = backend.tokenizer.apply_chat_template(messages, tools=tool_schemas(), add_generation_prompt=True,
                                                   tokenize=False)  # fmt: skip
    assert "<tools>RESUME_WORKER OPEN_STATE" in prompt and prompt.endswith("<|im_start|>assistant\n")
    prompt_ids = backend.tokenizer(prompt, add_special_tokens=False)["input_ids"]
    reply = backend.chat(messages, tools=tool_schemas())
    assert reply.prompt_tokens == len(prompt_ids)
    assert 1 <= reply.completion_tokens <= 6
    assert reply.message is None
    again = backend.chat(messages, tools=tool_schemas())
    assert again == reply  # greedy: the same prompt gives the same reply


@needs_transformers
def test_hf_backend_prefix_cache_changes_no_reply(tiny_model):
    """The kept key/values are reused for a grown conversation and cropped for a shorter one: same greedy replies."""
    plain = HFChatBackend(str(tiny_model), max_new_tokens=8, prefix_cache=False)
    cached = HFChatBackend(str(tiny_model), max_new_tokens=8)
    system = {"role": "system", "content": "be brief"}
    turns = [
        [system, {"role": "user", "content": "which step failed?"}],
        [system, {"role": "user", "content": "which step failed?"}, {"role": "assistant", "content": "step 2"},
         {"role": "user", "content": "why?"}],
        [system, {"role": "user", "content": "which step failed first?"}],
    ]  # fmt: skip
    for messages in turns:
        assert cached.chat(messages, tools=tool_schemas()) == plain.chat(messages, tools=tool_schemas())
        assert len(cached._cached_ids) == cached._cache.get_seq_length() > 0
    # after the third prompt (sharing the first one's prefix up to "which step failed") the cache holds its tokens
    prompt = cached.tokenizer.apply_chat_template(
        turns[2], tools=tool_schemas(), add_generation_prompt=True, return_dict=True
    )["input_ids"]
    assert cached._cached_ids[: len(prompt)] == list(prompt)


@needs_transformers
def test_hf_backend_keeps_tool_call_tags_and_strips_only_end_tokens(tiny_model):
    backend = HFChatBackend(str(tiny_model), max_new_tokens=4)
    tokenizer = backend.tokenizer
    text = '<think>\nok\n</think>\n\n<tool_call>\n{"name": "ABSTAIN", "arguments": {}}\n</tool_call>'
    ids = tokenizer(text, add_special_tokens=False)["input_ids"]
    assert tokenizer.convert_tokens_to_ids("<tool_call>") in ids  # one special token, not split
    end = [tokenizer.convert_tokens_to_ids("<|im_end|>"), tokenizer.pad_token_id, tokenizer.pad_token_id]
    assert backend.decode(ids + end) == text
    # skipping special tokens (the old worker decoding) would erase the wire format
    assert "<tool_call>" not in tokenizer.decode(ids, skip_special_tokens=True)
    # a special token inside the reply is kept; only the trailing end tokens go
    assert backend.decode([end[0], *ids]) == "<|im_end|>" + text


@needs_transformers
def test_hf_backend_logits_processors_are_made_per_reply_and_steer_it(tiny_model):
    """Each factory gets the prompt's length before every reply; its processor sees prompt + reply so far and its
    scores decide the tokens (here: only the first token of "hello" allowed for two steps, then the end of turn)."""
    import torch

    backend = HFChatBackend(str(tiny_model), max_new_tokens=6)
    tokenizer = backend.tokenizer
    word, end = (
        tokenizer("hello", add_special_tokens=False)["input_ids"][0],
        tokenizer.convert_tokens_to_ids("<|im_end|>"),
    )
    made, seen = [], []

    def only_hello_twice(prompt_len: int):
        made.append(prompt_len)

        def processor(input_ids, scores):
            seen.append(int(input_ids.shape[1]) - prompt_len)  # reply tokens so far
            forced = torch.full_like(scores, float("-inf"))
            forced[0, word if seen[-1] < 2 else end] = 0.0
            return forced

        return processor

    messages = [{"role": "user", "content": "say it"}]
    plain = backend.chat(messages)
    backend.logits_processors = [only_hello_twice]
    steered = backend.chat(messages)
    assert made == [steered.prompt_tokens] and seen == [0, 1, 2]
    assert (steered.text, steered.completion_tokens) == (tokenizer.decode([word, word]), 3) and steered.text
    backend.logits_processors = []
    assert backend.chat(messages) == plain


@pytest.mark.skipif(is_available("transformers"), reason="transformers is installed")
def test_hf_backend_without_transformers_names_the_extra():
    with pytest.raises(ImportError, match=r"\.\[train\]"):
        HFChatBackend("/nonexistent")
