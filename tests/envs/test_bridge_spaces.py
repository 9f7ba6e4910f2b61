"""The thread inversion (EpisodeThread) and the text space."""

from __future__ import annotations

import threading

import numpy as np
import pytest

from envs.bridge import EpisodeAborted, EpisodeError, EpisodeThread
from envs.spaces import MAX_TEXT_CHARS, SAMPLE_CHARSET, UnicodeText


def test_unicode_text_accepts_any_string_up_to_its_length_and_samples_printable_ascii():
    space = UnicodeText(seed=0)
    assert space.contains('<tool_call>\n{"name": "ABSTAIN"}\n</tool_call> ∑ é 数据\t"')
    assert space.contains("") and not space.contains("x" * (MAX_TEXT_CHARS + 1)) and not space.contains(b"x")
    sample = UnicodeText(64, seed=3).sample()
    assert len(sample) <= 64 and set(sample) <= set(SAMPLE_CHARSET)
    assert UnicodeText(64) == UnicodeText(64) != UnicodeText(65)


def test_episode_thread_hands_questions_out_and_answers_in_then_returns_the_result():
    thread = EpisodeThread()

    def play():
        first = thread.ask("q1")
        second = thread.ask(f"q2 after {first}")
        return [first, second]

    assert thread.start(play) == ("ask", "q1")
    assert thread.answer("a1") == ("ask", "q2 after a1")
    assert thread.answer("a2") == ("done", ["a1", "a2"])
    assert thread.finished


def test_an_exception_in_the_episode_is_re_raised_with_its_cause():
    thread = EpisodeThread()

    def play():
        thread.ask("q")
        raise KeyError("boom")

    thread.start(play)
    with pytest.raises(EpisodeError, match="KeyError") as caught:
        thread.answer("a")
    assert isinstance(caught.value.__cause__, KeyError)


def test_stop_aborts_a_waiting_episode_even_through_except_exception():
    thread = EpisodeThread()
    seen: list[str] = []

    def play():
        while True:
            try:
                thread.ask("q")
            except Exception:  # the runtime swallows policy errors like this: the abort must pass through
                seen.append("swallowed")
            finally:
                seen.append("unwound")

    before = threading.active_count()
    thread.start(play)
    thread.stop()
    assert seen == ["unwound"] and thread.finished and threading.active_count() == before
    assert issubclass(EpisodeAborted, BaseException) and not issubclass(EpisodeAborted, Exception)
    thread.stop()  # idempotent


def test_unicode_text_sample_is_seeded():
    a, b = UnicodeText(32, seed=7), UnicodeText(32, seed=7)
    assert [a.sample() for _ in range(3)] == [b.sample() for _ in range(3)]
    assert isinstance(a.np_random, np.random.Generator)
