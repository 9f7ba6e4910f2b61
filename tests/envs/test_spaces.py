"""The text space of both environments."""

from __future__ import annotations

import numpy as np

from envs.spaces import MAX_TEXT_CHARS, SAMPLE_CHARSET, UnicodeText


def test_unicode_text_accepts_any_string_up_to_its_length_and_samples_printable_ascii():
    space = UnicodeText(seed=0)
    assert space.contains('<tool_call>\n{"name": "ABSTAIN"}\n</tool_call> ∑ é 数据\t"')
    assert space.contains("") and not space.contains("x" * (MAX_TEXT_CHARS + 1)) and not space.contains(b"x")
    sample = UnicodeText(64, seed=3).sample()
    assert len(sample) <= 64 and set(sample) <= set(SAMPLE_CHARSET)
    assert UnicodeText(64) == UnicodeText(64) != UnicodeText(65)


def test_unicode_text_sample_is_seeded():
    a, b = UnicodeText(32, seed=7), UnicodeText(32, seed=7)
    assert [a.sample() for _ in range(3)] == [b.sample() for _ in range(3)]
    assert isinstance(a.np_random, np.random.Generator)
