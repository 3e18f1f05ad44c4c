"""Many words, one test (:func:`trainpulse_otel.logs.marks.any_of`): it finds a line holding any of the words, as
scanning for each would, and the failure scanner's words are all found by it."""

from __future__ import annotations

import pytest

from trainpulse_otel.logs import failures
from trainpulse_otel.logs.marks import any_of


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
