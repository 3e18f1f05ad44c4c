"""A simulated 8x H100 node training a dense LLM, with named faults.

Why: every detector must be demonstrable on a laptop (``trainpulse daemon -mode
sim -scenario NAME``) and scorable by an evaluation harness that replays each
scenario. So the model is deterministic and pure — ``SimulatedNode.sample(t)``
depends only on the seed, the scenario and the sequence of ``t`` (seconds since
start); no wall clock, no I/O — and physically coherent across layers: GPU
clocks set compute time, compute time sets every rank's arrival at the
all-reduce, arrivals set sync waits, wall time, tokens/s and MFU, utilisation
sets power, power sets temperature, temperature sets throttling and clocks.
Faults (:mod:`.scenarios`) only move a few knobs (:mod:`.knobs`) of this one model.

The healthy job: llama-3-8b pretraining in bf16 with PyTorch on one node of
8x "NVIDIA H100 80GB HBM3", dp=8 (tp=1, pp=1), micro batch 2 x GAS 2 x dp 8 =
32 packed sequences of 4096 tokens per step (~131k tokens), ~1.75 s per step,
~75k tokens/s, MFU ~0.45 (6·N·tokens/s / (world · 989 TFLOP/s)). Noise is
lognormal (step CV ~2 %), and the healthy run has rare isolated glitches a
detector must shrug off: a GC pause on one rank (one slow step), a one-tick
data-wait spike, a one-tick temperature-sensor blip, and a short checkpoint
save every 20 minutes (GPUs briefly ``gpu_idle``).

The modules, from the bottom up: :mod:`.physics` (the GPU's constants and
pure power/thermal/clock functions), :mod:`.job` (what is trained, and the
shape that follows), :mod:`.scenarios` and :mod:`.knobs` (the faults),
:mod:`.gpus`, :mod:`.host` and :mod:`.training` (the three layers),
:mod:`.node` (them composed), :mod:`.collector` (the node as the ``sim``
collector) and :mod:`.handover` (real training reports win over simulated ones).
"""

from .collector import SimCollector
from .handover import RealReports
from .host import HOST_MEMORY_BYTES
from .job import JobConfig
from .knobs import JOB_HEALTHY
from .node import SimulatedNode
from .physics import GPU_MEMORY_BYTES, PEAK_BF16_FLOPS

__all__ = [
    "GPU_MEMORY_BYTES",
    "HOST_MEMORY_BYTES",
    "JOB_HEALTHY",
    "PEAK_BF16_FLOPS",
    "JobConfig",
    "RealReports",
    "SimCollector",
    "SimulatedNode",
]
