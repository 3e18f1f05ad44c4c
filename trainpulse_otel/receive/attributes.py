"""Attribute sets of data points, read once and remembered across requests.

A node daemon sends the same few attribute sets every export — one per GPU,
rank, throttle reason, XID code — and the same set under every metric of a
GPU or rank; reading one through the generated API (a wrapper per key-value
pair and per value) costs several times what the rest of its point does. So
a point's set is recognised by what the point serializes to once its time and
value are cleared (its attributes, and its flags, start time and exemplars,
which only make two points with the same set look different: a second
reading, never a wrong one), and read only the first time: its dict, its
sorted pairs (the series key) and what its checks found wrong. Identical
bytes are identical content, so what is remembered for them is what reading
them again would give. Bounded: the oldest sets go first.
"""

from __future__ import annotations

from collections.abc import Callable

from opentelemetry.proto.metrics.v1.metrics_pb2 import NumberDataPoint

from .points import AttributeValue, attribute_dict

#: Attribute sets remembered at most (a 64-node job of 8 GPUs and 8 ranks each has ~5,000).
MAX_ATTRIBUTE_SETS = 65_536

Pairs = tuple[tuple[str, AttributeValue], ...]
#: An attribute set as read: its attributes, their sorted pairs, and what is wrong with them (None: nothing).
AttributeSet = tuple[dict[str, AttributeValue], Pairs, str | None]


def identity_of(point: NumberDataPoint) -> bytes:
    """What tells ``point``'s attribute set apart: the point without its time and value (read them first:
    both are cleared, so only decode a request of one's own)."""
    point.ClearField("time_unix_nano")
    point.ClearField("value")
    return point.SerializeToString()


class AttributeSets:
    """The attribute sets read so far, by (check group, identity). Not thread-safe: the receiver's lock covers it."""

    def __init__(self, max_sets: int = MAX_ATTRIBUTE_SETS) -> None:
        self.max_sets = max_sets
        self._known: dict[tuple[str, bytes], AttributeSet] = {}

    def get(self, group: str, identity: bytes) -> AttributeSet | None:
        return self._known.get((group, identity))

    def read(
        self,
        group: str,
        identity: bytes,
        point: NumberDataPoint,
        judge: Callable[[dict[str, AttributeValue]], str | None],
    ) -> AttributeSet:
        """Read ``point``'s attributes, judge them for ``group`` and remember the outcome under ``identity``."""
        attributes = attribute_dict(point.attributes)
        known = self._known[(group, identity)] = (attributes, tuple(sorted(attributes.items())), judge(attributes))
        if len(self._known) > self.max_sets:
            del self._known[next(iter(self._known))]
        return known
