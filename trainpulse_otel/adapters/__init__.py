"""Framework adapters: each framework's own metric vocabulary -> the contract's training payload.

One module per framework (``generic``, ``pytorch``, ``deepspeed``, ``megatron``,
``huggingface``, ``lightning``, ``torchtitan``), each exposing ``ADAPTER`` (an
:class:`Adapter`), ``translate(payload) -> Translation`` and
``normalize(payload) -> TrainingSample``; the log-reading ones also
``translate_text``/``parse_text``. They are found through the
``trainpulse.adapters`` entry-point group (:func:`trainpulse_otel.runtime.plugins.load_adapters`),
built-ins included, so third-party adapters plug in the same way.
"""

from .base import Adapter, Translation

__all__ = ["Adapter", "Translation"]
