"""Cost of one simulated tick (8 GPUs / 8 ranks, and larger rank counts).

Prints the median per-call time over several batches (each batch a fresh node
sampled at t = 0, 1, 2, … s), and the ratio against building the same number
of empty ``Collected`` bundles (the floor), measured in the same process.

    python bench/sim_cost.py
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable

from trainpulse_otel.collect.base import Collected
from trainpulse_otel.collect.sim import SimulatedNode

BATCHES, CALLS = 7, 300


def per_call(make: Callable[[], Callable[[float], object]], calls: int) -> float:
    """Median seconds per call of ``make()(t)`` for t = 0..calls-1, over BATCHES fresh batches."""
    costs = []
    for _ in range(BATCHES):
        sample = make()
        start = time.perf_counter()
        for t in range(calls):
            sample(float(t))
        costs.append((time.perf_counter() - start) / calls)
    return statistics.median(costs)


def main() -> None:
    floor = per_call(lambda: lambda t: Collected(), CALLS)
    print(f"floor (empty Collected): {floor * 1e6:8.2f} us/call")
    for ranks in (8, 64, 512, 4096):
        calls = max(20, CALLS * 8 // ranks)
        cost = per_call(lambda ranks=ranks: SimulatedNode("thermal_instability", ranks=ranks).sample, calls)
        print(f"sim {ranks:5d} ranks: {cost * 1e3:8.3f} ms/call  ({cost / floor:,.0f}x floor)")


if __name__ == "__main__":
    main()
