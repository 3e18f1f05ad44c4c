"""The ``generic`` adapter: the contract's own field names, plus the original tool's keys.

For jobs that already report TrainPulse-shaped dicts (or the original tool's
example payloads: ``model``, ``train_tokens_per_second``,
``model_flops_utilization``, ``gradient_allreduce_ms``, ``step``). Anything else
is listed as ignored.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .base import Adapter, Fields, Translation


def translate(payload: Mapping[str, Any]) -> Translation:
    """Map contract names and the original tool's aliases; no unit conversion."""
    return Fields.from_payload(payload).finish(framework=None)


ADAPTER = Adapter("generic", translate, description="TrainPulse field names and the original tool's keys")
normalize = ADAPTER.normalize
