"""Many words, one test (:func:`trainpulse_otel.logs.marks.any_of`): it finds a line holding any of the words, as
scanning for each would, and the failure scanner's words are all found by it; answered once per line shape
(:class:`~trainpulse_otel.logs.marks.Words`), the same for every line of a shape, words with digits included."""

from __future__ import annotations

import pytest

from trainpulse_otel.logs import failures
from trainpulse_otel.logs.marks import Words, any_of


@pytest.mark.parametrize(
    ("text", "found"),
    [
        ("RuntimeError: CUDA error: an illegal memory access", True),
        ("no failure here: step 3 loss 2.31", False),
        ("a(b)c[d]", True),  # regex characters are words' letters
        ("Kill", False),  # a word's prefix is not the word
        ("xxKilledxx", True),  # anywhere in the line
    ],
)
def test_any_of_finds_a_line_holding_any_word(text, found):
    pattern = any_of(["CUDA error", "Killed", "(b)c[", "Killed by signal"])
    assert (pattern.search(text) is not None) is found


def test_every_word_of_the_failure_scanner_is_found_by_one_pattern():
    pattern = any_of(failures.MARKS)
    for word in failures.MARKS:
        assert pattern.search(f"prefix {word} suffix") is not None, word


def test_words_answer_each_line_of_a_shape_by_its_own_digits():
    words = Words(["CUDA error", "Xid 79", "EL0004"])
    assert not words.said_in("step 3 loss 2.31")
    assert not words.said_in("step 4 loss 2.29")  # the same shape: the remembered answer
    assert words.said_in("step 5 CUDA error 2")
    assert words.said_in("NVRM: Xid 79, GPU has fallen off the bus") and not words.said_in("NVRM: Xid 13, ...")
    assert words.said_in("EL0004: FAIL_TO_ALLOCATE_MEMORY") and not words.said_in("EL0005: other")


def test_words_forget_their_shapes_past_the_bound_and_keep_answering():
    words = Words(["Killed"], shapes=2)
    lines = [f"epoch {'x' * n} loss" for n in range(5)] + ["Killed"]
    assert [words.said_in(line) for line in lines] == [False] * 5 + [True]
    assert len(words._said) <= 2


def test_words_of_the_failure_scanner_are_all_said_in_a_line_shaped_like_an_iteration_line():
    words = Words(failures.MARKS)
    for word in failures.MARKS:
        assert words.said_in(f"iteration 12/ 100 | {word} | loss 3.1"), word
