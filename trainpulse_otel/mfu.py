"""Model FLOPs utilisation: FLOPs per token from the model, peak FLOP/s from the GPU.

MFU = achieved model FLOP/s per device / peak FLOP/s per device, where the
achieved rate is ``flops_per_token × tokens/s (whole job) / devices``.

FLOPs per token of training (forward + backward, recomputation not counted),
after PaLM (appendix B) and torchtitan: ``6·N + 12·L·H·Dh·S`` — ``N`` the
parameters that take part in a matrix multiply (lookup-only embedding tables
left out; an output projection tied to the token embedding counted), the
second term attention's scores and weighted sum over ``L`` layers of ``H``
query heads of width ``Dh`` at sequence length ``S``, kept as
``12·S·Σ_layers(H·Dh)`` so layers may differ. ``causal=True`` halves the
attention term, as Megatron-LM counts it; PaLM and torchtitan use the full
term, so MFU figures computed the two ways are not comparable.

Peak FLOP/s are dense (no 2:4 sparsity) tensor-core figures from NVIDIA's
datasheets, matched on the NVML device name. docs/mfu.md gives the sources
of both. Pure: tables and arithmetic, no I/O, no environment (the NVML name
probe is :mod:`trainpulse_otel.collect.gpu_name`), and no torch import: a
module is inspected through duck typing only.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

# ---------------------------------------------------------------- FLOPs per token


@dataclass(frozen=True)
class ModelShape:
    """What FLOPs per token depend on, counted once from a model.

    ``attention_width`` is Σ over attention layers of (query heads × head
    width); for a uniform transformer it is L·H·Dh.
    """

    matmul_params: int
    attention_width: int = 0

    def flops_per_token(self, seq_len: float | None, causal: bool = False) -> float:
        """6·N + 12·S·Σ(H·Dh) (halved attention term when ``causal``)."""
        attention = 0.0
        if self.attention_width and seq_len:
            attention = 12.0 * self.attention_width * float(seq_len) * (0.5 if causal else 1.0)
        return 6.0 * self.matmul_params + attention


def flops_per_token(
    model: Any = None,
    *,
    seq_len: float | None = None,
    n_params: int | None = None,
    n_layers: int | None = None,
    n_heads: int | None = None,
    head_dim: int | None = None,
    causal: bool = False,
) -> float:
    """Training FLOPs per token, counted from a ``torch.nn.Module`` or given as numbers.

    Numbers given override what the model says: ``n_params`` (non-embedding,
    matmul parameters), ``n_layers``, ``n_heads`` (query heads) and
    ``head_dim``. Without a sequence length the attention term is left out.
    """
    shape = model_shape(model, n_params=n_params, n_layers=n_layers, n_heads=n_heads, head_dim=head_dim)
    return shape.flops_per_token(seq_len, causal)


def model_shape(
    model: Any = None,
    *,
    n_params: int | None = None,
    n_layers: int | None = None,
    n_heads: int | None = None,
    head_dim: int | None = None,
) -> ModelShape:
    """Count a model's matmul parameters and attention width; given numbers win."""
    if model is None and n_params is None:
        raise ValueError("flops_per_token needs a model or n_params")
    params = n_params if n_params is not None else count_matmul_params(model)
    layers, heads, width = _attention_config(model) if model is not None else (None, None, None)
    layers = n_layers if n_layers is not None else layers
    heads = n_heads if n_heads is not None else heads
    width = head_dim if head_dim is not None else width
    if layers and heads and width:
        return ModelShape(int(params), int(layers) * int(heads) * int(width))
    if model is not None and (n_layers, n_heads, head_dim) == (None, None, None):
        return ModelShape(int(params), _attention_modules_width(model))
    return ModelShape(int(params))


def count_matmul_params(model: Any) -> int:
    """Parameters owned by any module other than an embedding table, each counted once.

    A weight shared between an ``Embedding`` and a ``Linear`` (tied output
    projection) is counted: the ``Linear`` multiplies with it.
    """
    matmul: dict[int, int] = {}
    for module in model.modules():
        if _is_embedding(module):
            continue
        for param in module.parameters(recurse=False):
            matmul[id(param)] = param.numel()
    return sum(matmul.values())


def _is_embedding(module: Any) -> bool:
    return any(cls.__name__ in ("Embedding", "EmbeddingBag") for cls in type(module).__mro__)


_CONFIG_KEYS = {
    "layers": ("num_hidden_layers", "n_layer", "n_layers", "num_layers"),
    "heads": ("num_attention_heads", "n_head", "n_heads", "num_heads"),
    "hidden": ("hidden_size", "n_embd", "d_model", "dim"),
}


def _attention_config(model: Any) -> tuple[int | None, int | None, int | None]:
    """(layers, query heads, head width) from a Hugging Face ``config`` or torchtitan ``model_args``."""
    for attr in ("config", "model_args", "args"):
        config = getattr(model, attr, None)
        if config is None or isinstance(config, (str, int, float)):
            continue
        layers, heads, hidden = (_first(config, keys) for keys in _CONFIG_KEYS.values())
        width = getattr(config, "head_dim", None)
        if not isinstance(width, int) and heads and hidden:
            width = hidden // heads
        if layers and heads and isinstance(width, int):
            return layers, heads, width
    return None, None, None


def _first(config: Any, keys: tuple[str, ...]) -> int | None:
    for key in keys:
        value = config.get(key) if isinstance(config, Mapping) else getattr(config, key, None)
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value
    return None


def _attention_modules_width(model: Any) -> int:
    """Σ embed_dim over ``nn.MultiheadAttention`` modules (H·Dh = embed_dim per layer)."""
    return sum(
        int(module.embed_dim)
        for module in model.modules()
        if type(module).__name__ == "MultiheadAttention" and isinstance(getattr(module, "embed_dim", None), int)
    )


# ---------------------------------------------------------------- peak FLOP/s

_T = 1e12
#: (key, NVML-name pattern, dense peak FLOP/s by dtype). First match wins, so
#: more specific names (H100 NVL, L40S) come before their prefixes (H100, L4).
PEAK_TABLE: tuple[tuple[str, str, Mapping[str, float]], ...] = (
    ("B200", r"\bb200\b", {"fp8": 4500 * _T, "bf16": 2250 * _T, "fp16": 2250 * _T, "tf32": 1125 * _T, "fp32": 75 * _T}),
    ("GB200", r"\bgb200\b", {"fp8": 5000 * _T, "bf16": 2500 * _T, "fp16": 2500 * _T, "tf32": 1250 * _T}),
    (
        "H200 NVL",
        r"\bh200\b.*\bnvl\b",
        {"fp8": 1670 * _T, "bf16": 835 * _T, "fp16": 835 * _T, "tf32": 418 * _T, "fp32": 60 * _T},
    ),
    ("H200", r"\bh200\b", {"fp8": 1979 * _T, "bf16": 989 * _T, "fp16": 989 * _T, "tf32": 494.5 * _T, "fp32": 67 * _T}),
    (
        "GH200",
        r"\bgh200\b",
        {"fp8": 1979 * _T, "bf16": 989 * _T, "fp16": 989 * _T, "tf32": 494.5 * _T, "fp32": 67 * _T},
    ),
    (
        "H100 NVL",
        r"\bh100\b.*\bnvl\b",
        {"fp8": 1670 * _T, "bf16": 835 * _T, "fp16": 835 * _T, "tf32": 418 * _T, "fp32": 60 * _T},
    ),
    (
        "H100 PCIe",
        r"\bh100\b.*\b(pcie|hbm2e)\b",
        {"fp8": 1513 * _T, "bf16": 756 * _T, "fp16": 756 * _T, "tf32": 378 * _T, "fp32": 51 * _T},
    ),
    (
        "H100 SXM",
        r"\bh100\b",
        {"fp8": 1979 * _T, "bf16": 989 * _T, "fp16": 989 * _T, "tf32": 494.5 * _T, "fp32": 67 * _T},
    ),
    ("H800", r"\bh800\b", {"fp8": 1979 * _T, "bf16": 989 * _T, "fp16": 989 * _T, "tf32": 494.5 * _T, "fp32": 67 * _T}),
    ("H20", r"\bh20\b", {"fp8": 296 * _T, "bf16": 148 * _T, "fp16": 148 * _T, "tf32": 74 * _T, "fp32": 44 * _T}),
    ("A100", r"\ba[18]00\b", {"bf16": 312 * _T, "fp16": 312 * _T, "tf32": 156 * _T, "fp32": 19.5 * _T}),
    ("A30", r"\ba30\b", {"bf16": 165 * _T, "fp16": 165 * _T, "tf32": 82 * _T, "fp32": 10.3 * _T}),
    ("A10G", r"\ba10g\b", {"bf16": 125 * _T, "fp16": 125 * _T, "tf32": 62.5 * _T, "fp32": 31.2 * _T}),
    ("A10", r"\ba10\b", {"bf16": 125 * _T, "fp16": 125 * _T, "tf32": 62.5 * _T, "fp32": 31.2 * _T}),
    ("L40S", r"\bl40s\b", {"fp8": 733 * _T, "bf16": 362 * _T, "fp16": 362 * _T, "tf32": 183 * _T, "fp32": 91.6 * _T}),
    ("L40", r"\bl40\b", {"fp8": 362 * _T, "bf16": 181 * _T, "fp16": 181 * _T, "tf32": 90.5 * _T, "fp32": 90.5 * _T}),
    ("L4", r"\bl4\b", {"fp8": 242 * _T, "bf16": 121 * _T, "fp16": 121 * _T, "tf32": 60 * _T, "fp32": 30.3 * _T}),
    (
        "RTX 4090",
        r"\brtx 4090\b",
        {"fp8": 330 * _T, "bf16": 165.2 * _T, "fp16": 165.2 * _T, "tf32": 82.6 * _T, "fp32": 82.6 * _T},
    ),
    ("V100 SXM", r"\bv100\b.*\bsxm", {"fp16": 125 * _T, "fp32": 15.7 * _T}),
    ("V100 PCIe", r"\bv100s?\b", {"fp16": 112 * _T, "fp32": 14 * _T}),
    ("T4", r"\bt4\b", {"fp16": 65 * _T, "fp32": 8.1 * _T}),
)

_DTYPE_ALIASES: dict[str, str] = {
    "bf16": "bf16",
    "bfloat16": "bf16",
    "bf16-mixed": "bf16",
    "bf16-true": "bf16",
    "fp16": "fp16",
    "float16": "fp16",
    "half": "fp16",
    "16": "fp16",
    "16-mixed": "fp16",
    "16-true": "fp16",
    "fp32": "fp32",
    "float32": "fp32",
    "float": "fp32",
    "32": "fp32",
    "32-true": "fp32",
    "tf32": "tf32",
    "tfloat32": "tf32",
    "fp8": "fp8",
    "float8": "fp8",
    "float8_e4m3fn": "fp8",
    "float8_e5m2": "fp8",
    "transformer-engine": "fp8",
}


def normalize_dtype(dtype: Any) -> str | None:
    """``torch.bfloat16``, ``"bf16-mixed"``, ``"half"`` … → ``bf16``/``fp16``/``fp32``/``tf32``/``fp8``."""
    text = str(dtype).strip().lower().removeprefix("torch.")
    return _DTYPE_ALIASES.get(text)


def match_gpu(gpu_name: str) -> str | None:
    """The table key for an NVML device name (``NVIDIA H100 80GB HBM3`` → ``H100 SXM``)."""
    name = re.sub(r"[-_]", " ", gpu_name.lower())
    for key, pattern, _ in PEAK_TABLE:
        if re.search(pattern, name):
            return key
    return None


def peak_flops(gpu_name: str | None, dtype: Any = "bf16") -> float | None:
    """Dense peak FLOP/s of one GPU at ``dtype``; None for an unknown GPU or unsupported dtype."""
    if not gpu_name:
        return None
    key, kind = match_gpu(gpu_name), normalize_dtype(dtype)
    if key is None or kind is None:
        return None
    return {k: peaks for k, _, peaks in PEAK_TABLE}[key].get(kind)


def resolve_peak_flops(gpu_name: str | None, dtype: Any = "bf16", override: float | None = None) -> float | None:
    """The peak to use: ``override`` (checked: a positive number of FLOP/s), else the table."""
    if override is not None:
        return positive_flops(override, "peak_flops")
    return peak_flops(gpu_name, dtype)


def positive_flops(value: float, name: str) -> float:
    """``value`` as FLOP/s; a ValueError naming ``name`` unless it is a positive finite number."""
    value = float(value)
    if not math.isfinite(value) or value <= 0:
        raise ValueError(f"{name} must be a positive number of FLOP/s, got {value!r}")
    return value
