"""Signals and node states to hand the root-cause rules, and the causes they rank."""

from __future__ import annotations

from tests import parts
from trainpulse_otel.diagnose import VOCABULARY
from trainpulse_otel.diagnose.detectors.llm import NORMAL_MFU, LowMfu
from trainpulse_otel.diagnose.rootcause import infer_root_causes
from trainpulse_otel.diagnose.tick import GpuState, NodeState
from trainpulse_otel.diagnose.types import Signal

TS = 1000.0


def node(gpus: int = 8, **per_gpu: dict) -> NodeState:
    """A node whose GPUs are busy at full clock; ``per_gpu`` sets fields of GPU ``g<index>``."""
    n = NodeState()
    n.hostname = "node-000"
    for i in range(gpus):
        g = GpuState((None, i))
        g.util, g.clock_ratio, g.limit, g.limit_max, g.temp = 96.0, 1.0, 700.0, 700.0, 67.0
        for key, value in per_gpu.get(f"g{i}", {}).items():
            setattr(g, key, value)
        n.gpus[g.key] = g
    n.rank_of_gpu = {(None, i): i for i in range(gpus)}
    return n


def sig(name: str, severity: str = "warning", subject: dict | None = None, **evidence) -> Signal:
    return Signal(name, severity, TS - 30, f"{name} message", subject or {}, evidence)


def straggler(rank: int = 5) -> Signal:
    return sig(
        "rank_straggler", "critical", {"rank": rank, "gpu_index": rank}, slower_than_median=0.35, hostname="node-000"
    )


#: The MFU low_mfu's warning knob calls normal: what its facts carry beside the MFU.
NORMAL = {NORMAL_MFU.name: LowMfu().threshold.warning}


def causes(signals, facts=None, n=None, losses=None):
    rules = list(parts.builtins().root_causes.values())
    return infer_root_causes(tuple(signals), {**NORMAL, **(facts or {})}, n or node(), TS, rules, VOCABULARY, losses)
