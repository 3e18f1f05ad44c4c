"""Megatron iteration lines and an NCCL watchdog line, made to order for the reader's tests."""

from __future__ import annotations

#: Megatron-LM's iteration line (megatron/training/training.py ``training_log``), as its 2024 releases print it.
ITERATION = (
    "{stamp}iteration {step:8d}/ 1000 | consumed samples: {samples:12d} | elapsed time per iteration (ms): {ms:.1f} | "
    "learning rate: 1.000000E-04 | global batch size:   128 | lm loss: {loss} | loss scale: 1.0 | "
    "grad norm: 1.234 | number of skipped iterations:   0 | number of nan iterations:   0 |"
)


WATCHDOG = (
    "[Rank 3] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=88, OpType=ALLREDUCE, NumelIn=1, "
    "NumelOut=1, Timeout(ms)=600000) ran for 600051 milliseconds before timing out."
)


def iteration(step: int, stamp: str = "", ms: float = 500.0, loss: str = "7.1E+00") -> str:
    return ITERATION.format(stamp=stamp, step=step, samples=128 * step, ms=ms, loss=loss)
