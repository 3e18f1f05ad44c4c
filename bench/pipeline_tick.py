"""Cost of one diagnostic pipeline update per tick, against the cost of building the frame.

For 8, 64, 512 and 4,096 ranks on 8 GPUs: simulated samples go through the
replay path into frames as the engine's step builds them (``Stepper.frame``:
stale samples expire, the samples are read back into a frame with the losses
reported since the last one — the baseline), then ``DiagnosticPipeline.update``
runs on each. Printed: the median per-tick cost over several batches, for the healthy job and for a job with a
straggler (signals active, root causes inferred), and the ratio to frame
building measured in the same process. The first 120 ticks of each run
(baselines warming up) are not timed. Beside replay's frame build, the live
one: the same samples through the observable instruments, the OTel SDK's
collection and the in-process ``FrameReader`` (the daemon's tick), over the
first ``LIVE_TICKS`` ticks.

    python bench/pipeline_tick.py
"""

from __future__ import annotations

import statistics
import time

from trainpulse_otel.collect.sim.scenarios import SCENARIOS
from trainpulse_otel.config import Settings
from trainpulse_otel.evaluation.sim_replay import VARIANTS, Variant, sim_records
from trainpulse_otel.runtime import build_pipeline, discover, open_replay
from trainpulse_otel.runtime.replay import TraceFeed, group_ticks
from trainpulse_otel.telemetry.instruments import register_measurements
from trainpulse_otel.telemetry.latest import LatestSamples
from trainpulse_otel.telemetry.providers import build_telemetry

PLUGINS = discover(autoload=False)
WARMUP_TICKS = 120
BATCHES = 5
LIVE_TICKS = 10
LIVE_BATCHES = 3


def frames_and_build_cost(groups: list) -> tuple[list, float]:
    """The frames of a simulated run, and the median seconds per frame built (the baseline)."""
    costs, frames = [], []
    for _ in range(BATCHES):
        stepper = open_replay(Settings(), PLUGINS)
        feed = TraceFeed(stepper.latest)
        start = time.perf_counter()
        frames = []
        for g in groups:
            frames.append(stepper.frame(feed.apply(g)))
        costs.append((time.perf_counter() - start) / len(groups))
    return frames, statistics.median(costs)


def live_build_cost(groups: list) -> float:
    """Median seconds per frame built as the daemon builds it: instruments, SDK collection, ``FrameReader``."""
    costs = []
    for _ in range(LIVE_BATCHES):
        telemetry = build_telemetry()
        latest = LatestSamples()
        register_measurements(telemetry.meter, latest)
        feed = TraceFeed(latest)
        start = time.perf_counter()
        for g in groups[:LIVE_TICKS]:
            ts = feed.apply(g)
            latest.expire(ts)
            telemetry.frame_reader.read(ts)
        costs.append((time.perf_counter() - start) / min(LIVE_TICKS, len(groups)))
        telemetry.shutdown()
    return statistics.median(costs)


def update_cost(frames: list) -> float:
    """Median seconds per pipeline update after the warm-up ticks."""
    costs = []
    for _ in range(BATCHES):
        pipeline = build_pipeline(PLUGINS)
        timed = 0.0
        for i, frame in enumerate(frames):
            start = time.perf_counter()
            pipeline.update(frame)
            if i >= WARMUP_TICKS:
                timed += time.perf_counter() - start
        costs.append(timed / (len(frames) - WARMUP_TICKS))
    return statistics.median(costs)


def main() -> None:
    print(
        f"{'scenario':<16}{'ranks':>6}  {'frame build':>12}  {'pipeline update':>16}  {'ratio':>6}"
        f"  {'build + update':>15}  {'live build':>11}"
    )
    for scenario in ("healthy", "rank_straggler"):
        for ranks in (8, 64, 512, 4096):
            ticks = WARMUP_TICKS + max(40, 4800 // ranks)
            variant = Variant("bench", ranks=ranks) if ranks != 8 else VARIANTS["default"]
            groups = list(group_ticks(sim_records(SCENARIOS[scenario], 0, ticks, variant)))
            frames, build = frames_and_build_cost(groups)
            update = update_cost(frames)
            live = live_build_cost(groups)
            print(
                f"{scenario:<16}{ranks:>6}  {build * 1e3:>9.3f} ms  {update * 1e3:>13.3f} ms  {update / build:>6.2f}"
                f"  {(build + update) * 1e3:>12.3f} ms  {live * 1e3:>8.2f} ms"
            )


if __name__ == "__main__":
    main()
