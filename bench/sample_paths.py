"""What one sample costs on its way from a trace line (or an ingest body) to a frame, against its baseline.

Each row times one step of the path and, in the same process, the way it would cost without its fast path:
  build     a GPU sample from its JSON object: the fast path (samples/builder.py) vs the checked
            path (a read-only mapping, as a non-dict body takes it: a dict of accepted values, then __init__)
  rank      the same for one rank of a training report
  as-is     whether a GPU sample reads back from its points as itself (telemetry/read_back.py, one check per
            scope) vs reading every field back through its restorer, as a sample that is not takes it
  copy      a GPU sample with one field changed (its node, the XID codes a frame drops): a slot copy
            (``field_replacer``) vs :func:`dataclasses.replace`
Each figure is the median over ``--runs`` runs of ``--number`` calls, in microseconds per call.

    python bench/sample_paths.py [--runs 7] [--number 20000]
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import timeit
from collections.abc import Callable
from types import MappingProxyType

from trainpulse_otel.collect.sim import SimulatedNode
from trainpulse_otel.samples import GpuSample, parse_gpu, parse_rank, to_dict
from trainpulse_otel.samples.builder import field_replacer
from trainpulse_otel.telemetry.read_back import frame_from_samples

#: The read-back of a sample that is not as-is: the frame of a GPU whose clock is not in whole Hz.
ODD_CLOCK_MHZ = 1410.1234567


def per_call_us(fn: Callable[[], object], runs: int, number: int) -> float:
    return statistics.median(timeit.repeat(fn, number=number, repeat=runs)) / number * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--number", type=int, default=20_000)
    args = parser.parse_args()
    seen = SimulatedNode("healthy").sample(120.0)
    gpu_data = to_dict(seen.gpus[0])
    rank_data = to_dict(seen.training.ranks[0]) if seen.training else {}
    gpu = parse_gpu(gpu_data)
    odd = dataclasses.replace(gpu, sm_clock_mhz=ODD_CLOCK_MHZ)
    with_node = field_replacer(GpuSample, "node")
    rows = [
        ("build", lambda: parse_gpu(gpu_data), lambda: parse_gpu(MappingProxyType(gpu_data))),
        ("rank", lambda: parse_rank(rank_data, "ranks[0]"), lambda: parse_rank(MappingProxyType(rank_data), "r")),
        ("as-is", lambda: frame_from_samples(0.0, (gpu,)), lambda: frame_from_samples(0.0, (odd,))),
        ("copy", lambda: with_node(gpu, "node-001"), lambda: dataclasses.replace(gpu, node="node-001")),
    ]
    print(f"median of {args.runs} runs of {args.number} calls, µs per call")
    print(f"  {'step':<6} {'fast path':>10} {'baseline':>10} {'ratio':>7}")
    for name, fast, baseline in rows:
        f, b = (per_call_us(fn, args.runs, args.number) for fn in (fast, baseline))
        print(f"  {name:<6} {f:10.2f} {b:10.2f} {b / f:6.2f}x")


if __name__ == "__main__":
    main()
