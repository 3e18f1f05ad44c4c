"""Progress nobody listed: a line that comes back with its step, epoch or iteration counter climbing.

The reader's last resort, for a stream no framework and no format has read a report from, and a line no failure
rule claimed. A trainer's progress line is printed again and again in one shape with a number a progress word names
that only grows — ``current step: 7th step``, ``[INFO] epoch 12``, ``step_idx:3000, test_reward:57.5``, rsl_rl's
``Learning iteration 100/101``, Kaldi's ``minibatches 90-99``, Knet's ``(:epoch, 4, :trn, 0.98)``, ``ÉPOCA 3/5``. A
line's shape is its text with every number masked; once a shape has come :data:`SIGHTINGS` times in a row with one
such counter growing each time, each line of it is progress: a step and its time, nothing else. A shape whose
counters stopped growing starts over (a new run, an evaluation's pass), and a stream another reader reports from is
left to it (two readers' steps would interleave). Pure: one stream's text in, step numbers out.
"""

from __future__ import annotations

import re

from .generic import library_chatter

#: Sightings of one shape in a row, a counter growing at each, before its lines are read as progress.
SIGHTINGS = 3
#: Shapes remembered per stream (a memory bound; past it, they are forgotten and learned again).
MAX_SHAPES = 512
#: A number, masked in a line's shape.
NUMBER = re.compile(r"\d+(?:\.\d+)?(?:[eE][-+]?\d+)?")
#: A counter a progress word names (``step 3``, ``epoch: 12``, ``iter=3``, ``step_idx:1400``, ``batch i:12``,
#: ``minibatches 90-99``, ``num_timesteps=2000``): an integer, not a decimal.
COUNTED = re.compile(
    r"(?:step|iter(?:ation)?|epoch|[eé]poca|[eé]poque|batch|minibatch|update|round|episode|generation)(?:e?s)?"
    r"(?:_(?:idx|num|no|id|count))?['\"]?[\s:=,#(\[]{0,4}(?:i:)?(\d+)(?![\d.]|[eE][-+]?\d)",
    re.IGNORECASE,
)


class ProgressCounters:
    """One stream's line shapes and their counters (see the module docstring)."""

    __slots__ = ("_shapes", "counted", "quiet")

    def __init__(self) -> None:
        #: shape → (sightings in a row with a counter growing, its counters at the last, the places still growing)
        self._shapes: dict[str, tuple[int, tuple[int, ...], tuple[int, ...]]] = {}
        self.quiet = False  # another reader reports from the stream: its steps are the stream's
        self.counted = False  # a step was read from a counter

    def step(self, text: str) -> int | None:
        """The counter ``text`` advances, where it is a progress line of a known shape; else None."""
        if self.quiet or library_chatter(text) or (values := tuple(int(m[1]) for m in COUNTED.finditer(text))) == ():
            return None
        shape = NUMBER.sub("#", text.strip())
        seen = self._shapes.get(shape)
        growing = () if seen is None else tuple(i for i in seen[2] if values[i] > seen[1][i])
        if not growing:  # a new shape, or one whose counters stopped growing: it starts over
            if seen is None and len(self._shapes) >= MAX_SHAPES:
                self._shapes.clear()
            self._shapes[shape] = (1, values, tuple(range(len(values))))
            return None
        count = seen[0] + 1 if seen is not None else 1
        self._shapes[shape] = (count, values, growing)
        if count < SIGHTINGS:
            return None
        self.counted = True
        return values[growing[0]]

    def give_way(self) -> bool:
        """Another reader reported from the stream: the counters fall silent. Whether they had read a step (the
        stream's progress so far was theirs, a stand-in)."""
        self.quiet = True
        return self.counted

    def __len__(self) -> int:
        return len(self._shapes)
