"""A simulated 8x H100 node training a dense LLM, with named faults.

Every detector must be demonstrable on a laptop (``trainpulse daemon -mode sim
-scenario NAME``) and scorable by replaying each scenario, so the model is
deterministic and pure — ``SimulatedNode.sample(t)`` depends only on the seed,
the scenario and the sequence of ``t``; no wall clock, no I/O — and one
physical chain across the layers: clocks set compute time, compute sets each
rank's arrival at the all-reduce, arrivals set sync waits, wall time, tokens/s
and MFU; utilisation sets power, power temperature, temperature the clocks.
Faults only move knobs of this one model. The healthy job and every
scenario: docs/simulation.md.

The modules, from the bottom up: :mod:`.physics` (the GPU's constants and pure
functions), :mod:`.job` (what is trained, and the shape that follows),
:mod:`.scenarios`, :mod:`.combine` and :mod:`.knobs` (the faults, alone or
together), :mod:`.gpus`, :mod:`.faults`, :mod:`.host` and :mod:`.training` (the
layers), :mod:`.crashes` and :mod:`.console` (ranks that die, and the lines the
job prints), :mod:`.node` (them composed), :mod:`.placement` and :mod:`.peers` (the
node in a job across nodes), :mod:`.collector` (the ``sim`` collector) and
:mod:`.handover` (real training reports win over simulated ones).
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
