"""Many words, one test: a set of literal words compiled into a regular expression factored as a trie.

The failure scanner's cheap test asks whether a line holds any of ~200 words before any form's regex runs. One
regex alternating the words tries every branch at every position; ``any(word in text …)`` scans the line once a
word. Factored by common prefixes, the alternation tries at each position only the branches its character opens
(:func:`any_of`). A log repeats its lines' shapes (an iteration line is its last one with other numbers), so
:class:`Words` answers once per shape: the line without its digits (docs/performance.md).
"""

from __future__ import annotations

import re
from collections.abc import Iterable


def any_of(words: Iterable[str]) -> re.Pattern[str]:
    """A pattern that matches where any of ``words`` occurs (a word that holds another is matched by that one)."""
    trie: dict = {}
    for word in words:
        node = trie
        for char in word:
            node = node.setdefault(char, {})
        node[""] = {}  # a word ends here
    return re.compile(_branches(trie) if trie else "(?!)")


#: Deletes a line's digits: what is left is its shape.
_DIGITS = str.maketrans("", "", "0123456789")


class Words:
    """Whether a line holds any of ``words``, answered by the line's shape (its text without digits) once per shape.

    A word holds in a line's shape wherever it holds in the line, unless it has digits: those are looked for in the
    line itself. The shape may join a word around digits the line splits (``Bus1 error``): a line is then said to
    hold one it does not — a cheap test's false yes, which the forms' own regexes answer. At most ``shapes``
    shapes are remembered (then forgotten at once).
    """

    def __init__(self, words: Iterable[str], shapes: int = 4096) -> None:
        words = tuple(dict.fromkeys(words))
        numbered = tuple(word for word in words if word != word.translate(_DIGITS))
        self._plain = any_of(word for word in words if word not in numbered)
        self._numbered = any_of(numbered) if numbered else None
        self._said: dict[str, bool] = {}
        self._shapes = shapes

    def said_in(self, text: str) -> bool:
        """Whether ``text`` (may) hold one of the words."""
        shape = text.translate(_DIGITS)
        said = self._said.get(shape)
        if said is None:
            if len(self._said) >= self._shapes:
                self._said.clear()
            said = self._said[shape] = self._plain.search(shape) is not None
        return said or (self._numbered is not None and self._numbered.search(text) is not None)


def _branches(node: dict) -> str:
    if "" in node:  # a word ends here: the longer ones need not be matched
        return ""
    alternatives = [re.escape(char) + _branches(child) for char, child in sorted(node.items())]
    return alternatives[0] if len(alternatives) == 1 else "(?:" + "|".join(alternatives) + ")"
