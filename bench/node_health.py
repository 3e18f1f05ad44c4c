"""What node health adds to a node daemon's tick: reading 8 InfiniBand ports from sysfs, their points through
the OTel instruments and the in-process reader, and ``link_degradation`` on 8 GPUs and 8 ports.

Measured in one process, against the node daemon's tick on the same machine (a healthy simulated 8-GPU job:
samples → instruments → the SDK's collection → frame → the whole pipeline), each the median of ``--batches``
batches of ``--ticks`` ticks:

  baseline    the daemon's tick: 8 GPUs with their link fields, host, 8 ranks, every detector
  + ports     the same tick with 8 ports in the frame (their instruments collected, link_degradation judging them)
  sysfs       one read of an 8-port ConnectX tree in the kernel's layout (the collector's whole work)

and prints each in µs, what node health adds per tick, and that as a share of one core at a 1 s interval.

    python bench/node_health.py [--ticks 200] [--batches 5]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from trainpulse_otel.collect.infiniband import read_ports
from trainpulse_otel.collect.sim.scenarios import SCENARIOS
from trainpulse_otel.evaluation.sim_replay import VARIANTS, sim_node
from trainpulse_otel.runtime import build_pipeline, discover
from trainpulse_otel.samples import PORT_COUNTERS, Collected
from trainpulse_otel.telemetry.instruments import register_measurements
from trainpulse_otel.telemetry.latest import LatestSamples
from trainpulse_otel.telemetry.providers import build_telemetry

PLUGINS = discover(autoload=False)
PORTS = 8


def sysfs_tree(root: Path) -> Path:
    """An 8-HCA host in the kernel's layout: ``class/infiniband/mlx5_N/ports/1/{state,…,counters/*}``."""
    for n in range(PORTS):
        port = root / "class" / "infiniband" / f"mlx5_{n}" / "ports" / "1"
        (port / "counters").mkdir(parents=True)
        for name, text in (("state", "4: ACTIVE"), ("phys_state", "5: LinkUp"), ("rate", "400 Gb/sec (4X NDR)"),
                           ("link_layer", "InfiniBand")):  # fmt: skip
            (port / name).write_text(text + "\n")
        for counter in PORT_COUNTERS:
            (port / "counters" / counter).write_text("0\n")
    return root


def daemon_ticks(ticks: int, ports: tuple) -> float:
    """Median seconds of one daemon tick (collection through diagnosis) over ``ticks`` healthy ticks."""
    node = sim_node(SCENARIOS["healthy"], 0, VARIANTS["default"])
    latest = LatestSamples()
    telemetry = build_telemetry("trainpulse")
    register_measurements(telemetry.meter, latest, "trainpulse")
    pipeline = build_pipeline(PLUGINS)
    costs = []
    for i in range(ticks + 60):
        got = node.sample(float(i))
        ts = 1764400000.0 + i
        started = time.perf_counter()
        latest.put(Collected(gpus=got.gpus, host=got.host, training=got.training, ports=ports or None), ts)
        pipeline.update(telemetry.frame_reader.read(ts))
        if i >= 60:  # the baselines warmed up
            costs.append(time.perf_counter() - started)
    return statistics.median(costs)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ticks", type=int, default=200)
    parser.add_argument("--batches", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = sysfs_tree(Path(tmp))
        ports = read_ports(root)
        reads = []
        for _ in range(args.batches):
            started = time.perf_counter()
            for _ in range(args.ticks):
                read_ports(root)
            reads.append((time.perf_counter() - started) / args.ticks)
    base, with_ports = [], []
    for _ in range(args.batches):  # interleaved, so the machine's load falls on both alike
        base.append(daemon_ticks(args.ticks, ()))
        with_ports.append(daemon_ticks(args.ticks, ports))
    b, w, r = statistics.median(base), statistics.median(with_ports), statistics.median(reads)
    added = (w - b) + r
    print(f"{len(ports)} ports; median of {args.batches} batches of {args.ticks} ticks")
    print(f"  baseline daemon tick   {b * 1e6:9.0f} µs")
    print(f"  + ports in the tick    {w * 1e6:9.0f} µs   ({w / b:.2f}x)")
    print(f"  sysfs read, 8 ports    {r * 1e6:9.0f} µs")
    print(f"  node health adds       {added * 1e6:9.0f} µs a tick = {added * 100:.2f} % of one core at a 1 s interval")


if __name__ == "__main__":
    main()
