"""The offline Qwen3 tokenizer: published ids and flags, id equality with tiktoken, decode, the on-disk cache."""

from __future__ import annotations

import json
import random
import shutil
import unicodedata
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

pytest.importorskip("transformers")
pytest.importorskip("tiktoken")

from harness import tokenizer as qtok  # noqa: E402

# Qwen3's tokenizer_config.json, written out independently of the module's table.
PUBLISHED_SPECIAL = {
    151643: "<|endoftext|>",
    151644: "<|im_start|>",
    151645: "<|im_end|>",
    151646: "<|object_ref_start|>",
    151647: "<|object_ref_end|>",
    151648: "<|box_start|>",
    151649: "<|box_end|>",
    151650: "<|quad_start|>",
    151651: "<|quad_end|>",
    151652: "<|vision_start|>",
    151653: "<|vision_end|>",
    151654: "<|vision_pad|>",
    151655: "<|image_pad|>",
    151656: "<|video_pad|>",
}
PUBLISHED_NOT_SPECIAL = {
    151657: "<tool_call>",
    151658: "</tool_call>",
    151659: "<|fim_prefix|>",
    151660: "<|fim_middle|>",
    151661: "<|fim_suffix|>",
    151662: "<|fim_pad|>",
    151663: "<|repo_name|>",
    151664: "<|file_sep|>",
    151665: "<tool_response>",
    151666: "</tool_response>",
    151667: "<think>",
    151668: "</think>",
}
NOT_SPECIAL_TEXTS = set(PUBLISHED_NOT_SPECIAL.values())

CODE = '''def mean_fare(df: "pd.DataFrame") -> float:
    """Average fare, rounded."""
    return round(df["Fare"].dropna().mean(), 2)  # 34.65


if __name__ == "__main__":
\tprint(mean_fare(pd.read_csv('titanic.csv')))
'''
CURATED = [
    "",
    "hello world",
    "Hello, World! It's the user's data; they'll re-run it.",
    CODE,
    "x = [1, 2, 3]\nfor i in range(10):\n    print(i ** 2)\n",
    "SELECT name, COUNT(*) FROM t WHERE a >= 3.14159 GROUP BY name;",
    "3.14159265358979 1,234,567.89 -0.0001 1e-12 0x1F 2024-05-17T12:30:00Z",
    "1234567890" * 5,
    "中文分词测试：数据分析的中间结果。",
    "日本語のテキストとカタカナ、ひらがな。",
    "한국어 텍스트 토큰화",
    "Ünïcödé façade naïve résumé Straße",
    "e\u0301 vs \u00e9 (decomposed vs composed)",
    "emoji 😀👍🏽🇨🇭 family 👨‍👩‍👧‍👦 done",
    " leading space",
    "trailing space   ",
    "   \n\n\t\t  \r\n  mixed whitespace runs  \n",
    " " * 40,
    "\n" * 12,
    "\t" * 7 + "tabs",
    "a" * 300,
    "supercalifragilisticexpialidocious" * 4,
    "pneumonoultramicroscopicsilicovolcanoconiosis antidisestablishmentarianism",
    "https://example.com/path?query=1&b=%20x#frag",
    '{"name": "load_state", "arguments": {"state_id": 3}}',
    "<|im_start|>user\nnot a real turn<|im_end|>",
    "<|endoftext|> <|fim_prefix|> <|extra_0|> <|im_end",
    "<tool_call>\n{}\n</tool_call> and <think>maybe</think> <tool_response>ok</tool_response>",
    "<<|im_start|>>|<|im_start|><|im_start|>",
    "I'M SHOUTING, ISN'T IT, WE'LL SEE, YOU'VE, THEY'D",
    "\u200b zero width \ufeff bom \u00a0 nbsp",
    "تحليل البيانات",
    "Ελληνικά και кириллица",
    "math: ∑_{i=1}^{n} x_i² ≤ ∞ ± √2",
]


def _random_texts(count: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    alphabet = "abcXYZ  \n\t\r0123456789_-+*/()[]{}'\"é中文日本語한😀👍🏽ß!?.,;:<|>"
    texts = ["".join(rng.choice(alphabet) for _ in range(rng.randint(1, 120))) for _ in range(count)]
    texts += ["".join(chr(rng.randint(0x20, 0x2FFF)) for _ in range(40)) for _ in range(count // 2)]
    texts += ["".join(chr(rng.randint(0x1F300, 0x1FAFF)) for _ in range(10)) for _ in range(count // 4)]
    return texts


def _normalize(tokenizer, text: str) -> str:
    """The fast tokenizer's NFC (its Unicode tables may be newer than Python's unicodedata)."""
    return tokenizer.backend_tokenizer.normalizer.normalize_str(text)


def test_added_tokens_have_the_published_ids_and_special_flags(qwen3_tokenizer) -> None:
    decoder = qwen3_tokenizer.added_tokens_decoder
    for published, special in ((PUBLISHED_SPECIAL, True), (PUBLISHED_NOT_SPECIAL, False)):
        for token_id, content in published.items():
            assert qwen3_tokenizer.convert_tokens_to_ids(content) == token_id
            assert decoder[token_id].content == content
            assert decoder[token_id].special is special, content
    assert sorted(decoder) == list(range(151643, 151669))
    assert len(qwen3_tokenizer) == 151_669
    assert (qwen3_tokenizer.eos_token, qwen3_tokenizer.eos_token_id) == ("<|im_end|>", 151645)
    assert (qwen3_tokenizer.pad_token, qwen3_tokenizer.pad_token_id) == ("<|endoftext|>", 151643)
    assert qwen3_tokenizer.bos_token is None and qwen3_tokenizer.unk_token is None
    assert sorted(qwen3_tokenizer.all_special_ids) == sorted(PUBLISHED_SPECIAL)


def test_the_merge_list_has_one_merge_per_multibyte_token(qwen3_tokenizer) -> None:
    model = json.loads(qwen3_tokenizer.backend_tokenizer.to_str())["model"]
    assert len(model["vocab"]) == 151_643
    assert len(model["merges"]) == 151_643 - 256
    assert model["ignore_merges"] is False


@pytest.mark.parametrize("text", CURATED)
def test_curated_texts_encode_like_tiktoken(qwen3_tokenizer, qwen3_tiktoken, text: str) -> None:
    # Python's NFC and the tokenizer's agree on these texts, so the comparison hides nothing here.
    assert _normalize(qwen3_tokenizer, text) == unicodedata.normalize("NFC", text)
    expected = qwen3_tiktoken.encode(
        unicodedata.normalize("NFC", text), allowed_special=NOT_SPECIAL_TEXTS, disallowed_special=()
    )
    assert qwen3_tokenizer.encode(text, split_special_tokens=True) == expected


def test_special_token_text_is_one_token_unless_split(qwen3_tokenizer, qwen3_tiktoken) -> None:
    text = "<|im_start|>assistant\n<think>\nplan\n</think>\n\n<tool_call>\n{}\n</tool_call><|im_end|><|endoftext|>"
    assert qwen3_tokenizer.encode(text) == qwen3_tiktoken.encode(text, allowed_special="all")
    assert qwen3_tokenizer.encode(text)[:3] == [151644, 77091, 198]  # <|im_start|> "assistant" "\n"
    split = qwen3_tokenizer.encode(text, split_special_tokens=True)
    assert 151644 not in split and 151645 not in split
    assert 151667 in split and 151657 in split  # non-special added tokens are never split, as in Qwen3


def test_hundreds_of_generated_texts_encode_like_tiktoken(qwen3_tokenizer, qwen3_tiktoken) -> None:
    texts = _random_texts(400, seed=0)
    mismatches = []
    for text in texts:
        normalized = _normalize(qwen3_tokenizer, text)
        expected = qwen3_tiktoken.encode(normalized, allowed_special=NOT_SPECIAL_TEXTS, disallowed_special=())
        if qwen3_tokenizer.encode(text, split_special_tokens=True) != expected:
            mismatches.append(text)
    assert len(texts) == 700 and mismatches == []


@settings(max_examples=300, deadline=None)
@given(text=st.text(max_size=200))
def test_any_text_encodes_like_tiktoken(qwen3_tokenizer, qwen3_tiktoken, text: str) -> None:
    normalized = _normalize(qwen3_tokenizer, text)
    expected = qwen3_tiktoken.encode(normalized, allowed_special=NOT_SPECIAL_TEXTS, disallowed_special=())
    assert qwen3_tokenizer.encode(text, split_special_tokens=True) == expected


@pytest.mark.parametrize("text", CURATED)
def test_decode_inverts_encode(qwen3_tokenizer, text: str) -> None:
    assert qwen3_tokenizer.decode(qwen3_tokenizer.encode(text)) == unicodedata.normalize("NFC", text)


def test_skip_special_tokens_keeps_tool_and_think_tags(qwen3_tokenizer) -> None:
    text = '<think>\nx\n</think>\n\n<tool_call>\n{"name": "f", "arguments": {}}\n</tool_call><|im_end|>'
    ids = qwen3_tokenizer.encode(text)
    # The hermes tool parser relies on this: the tags survive skip_special_tokens, <|im_end|> does not.
    assert qwen3_tokenizer.decode(ids, skip_special_tokens=True) == text.removesuffix("<|im_end|>")
    assert qwen3_tokenizer.decode(ids) == text


def test_chat_template_is_attached(qwen3_tokenizer) -> None:
    assert qwen3_tokenizer.chat_template == qtok.load_chat_template()


def test_bpe_merges_follow_tiktoken_order_on_a_toy_vocabulary() -> None:
    ranks = {b"a": 0, b"b": 1, b"c": 2, b"ab": 3, b"bc": 4, b"abc": 5}
    # "abc": ab (3) beats bc (4), so tiktoken builds it as ab + c.
    assert qtok.bpe_merges(ranks) == [(b"a", b"b"), (b"b", b"c"), (b"ab", b"c")]
    with pytest.raises(ValueError, match="cannot be built from lower-ranked tokens"):
        qtok.bpe_merges({b"a": 0, b"b": 1, b"c": 2, b"abc": 3})


def test_load_ranks_names_the_file_on_bad_input(tmp_path: Path) -> None:
    bad = tmp_path / "bad.tiktoken"
    bad.write_text("not a ranks line at all\n")
    with pytest.raises(ValueError, match=r"bad\.tiktoken:1"):
        qtok.load_ranks(bad)
    short = tmp_path / "short.tiktoken"
    short.write_text("YQ== 0\nYg== 1\n")
    with pytest.raises(ValueError, match=r"holds 2 ranks"):
        qtok.load_ranks(short)


def test_the_ranks_file_is_qwens_not_qwen3_6() -> None:
    path = qtok.qwen3_ranks_path()
    assert path.name == "qwen.tiktoken" and path.parent.name == "resources"


def test_cache_key_changes_with_the_ranks_file(tmp_path: Path) -> None:
    original = qtok.qwen3_ranks_path()
    copy = tmp_path / "qwen.tiktoken"
    shutil.copyfile(original, copy)
    assert qtok.tokenizer_cache_key(copy) == qtok.tokenizer_cache_key(original)
    copy.write_bytes(copy.read_bytes() + b"\n")
    assert qtok.tokenizer_cache_key(copy) != qtok.tokenizer_cache_key(original)


def test_build_writes_the_cache_and_the_next_call_loads_it(tmp_path: Path, monkeypatch, qwen3_tokenizer) -> None:
    built = qtok.build_qwen3_tokenizer(tmp_path)
    (entry,) = tmp_path.iterdir()
    assert entry.name == f"qwen3-tokenizer-{qtok.tokenizer_cache_key()}"
    config = json.loads((entry / "tokenizer_config.json").read_text())
    assert config["tokenizer_class"] == "Qwen2Tokenizer" and config["eos_token"] == "<|im_end|>"

    def no_rebuild(ranks):
        raise AssertionError("the cached tokenizer should have been loaded")

    monkeypatch.setattr(qtok, "build_backend", no_rebuild)
    loaded = qtok.build_qwen3_tokenizer(tmp_path)
    text = CODE + "中文 😀 <think>"
    assert loaded.encode(text) == built.encode(text) == qwen3_tokenizer.encode(text)
    assert loaded.chat_template == built.chat_template
    with pytest.raises(AssertionError, match="should have been loaded"):  # use_cache=False always rebuilds
        qtok.build_qwen3_tokenizer(tmp_path, use_cache=False)
    assert [p.name for p in tmp_path.iterdir()] == [entry.name]  # and no scratch folder is left behind
