"""Framework adapters: each framework's own metric vocabulary -> the contract's training payload.

One module per framework (``generic``, ``pytorch``, ``deepspeed``, ``megatron``,
``huggingface``, ``lightning``, ``torchtitan``), each exposing ``ADAPTER`` (an
:class:`Adapter`), ``translate(payload) -> Translation`` and
``normalize(payload) -> TrainingSample``; the log-reading ones also
``translate_text``/``parse_text``. Third-party adapters plug in through the
``trainpulse.adapters`` entry-point group
(:func:`trainpulse_otel.runtime.plugins.load_adapters`). Every mapping: docs/api.md.
"""

from .base import Adapter, Translation

__all__ = ["Adapter", "Translation"]
