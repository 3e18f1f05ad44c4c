"""The 4,096-rank tick against another commit's, in one process: frame build and pipeline update, before/after.

``--base`` (a git ref, default ``main``) is exported beside this tree's
package (``bench/versus.py``), so both versions run in this process. Each
side simulates the same job (the bench's 8 GPUs and ``--ranks`` ranks, healthy
and with a straggler) and builds its frames as the engine's step does; the two
sides then tick in lockstep — frame build, then pipeline update, the order
alternating tick by tick — so a busy machine slows both alike. Timed in CPU
time of this thread (``time.thread_time``), the first 120 ticks (baselines
warming up) not counted; printed: each side's median frame build and
pipeline update, their ratios, and whether both end on the same diagnosis.

    python bench/rank_tick_versus.py [--base main] [--ranks 4096] [--runs 3]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from versus import PLUGINS, Side, export_base

import trainpulse_otel

WARMUP_TICKS = 120
TIMED_TICKS = 40


def frame_at(stepper: Any, ts: float) -> Any:
    """The frame as the engine's step builds it (``Stepper.frame`` on this branch), in calls both versions have."""
    stepper.latest.expire(ts)
    return replace(stepper.frames.read(ts), losses=stepper.latest.drain_losses())


def lockstep(sides: dict[str, Side], groups: dict[str, list]) -> dict[str, tuple[float, float, dict]]:
    """Both sides tick by tick; per side the median frame build and pipeline update (s) and the last diagnosis."""
    state = {}
    for name, side in sides.items():
        stepper = side.assemble.open_replay(side.settings(), PLUGINS)
        state[name] = (stepper, side.replay.TraceFeed(stepper.latest), side.pipeline(), [], [])
    order = list(sides)
    for i in range(len(groups[order[0]])):
        for name in order if i % 2 else order[::-1]:
            stepper, feed, pipeline, builds, updates = state[name]
            start = time.thread_time()
            frame = frame_at(stepper, feed.apply(groups[name][i]))
            built = time.thread_time()
            pipeline.update(frame)
            if i >= WARMUP_TICKS:
                builds.append(built - start)
                updates.append(time.thread_time() - built)
    return {
        name: (statistics.median(b), statistics.median(u), p.diagnosis.to_dict())
        for name, (_, _, p, b, u) in state.items()
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", default="main", help="the git ref to compare with (default: main)")
    parser.add_argument("--ranks", type=int, default=4096)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="rank-tick-versus-") as tmp:
        sides = {args.base: Side(export_base(args.base, Path(tmp))), "this tree": Side(trainpulse_otel)}
        print(f"{args.ranks} ranks, medians of {args.runs} lockstep runs (CPU ms per tick)")
        for scenario in ("healthy", "rank_straggler"):
            groups = {
                name: side.groups(scenario, args.ranks, WARMUP_TICKS + TIMED_TICKS) for name, side in sides.items()
            }
            runs = [lockstep(sides, groups) for _ in range(args.runs)]
            (base, build_b, update_b), (_, build_a, update_a) = (
                (name, *(statistics.median(r[name][k] for r in runs) for k in (0, 1))) for name in sides
            )
            same = all(r[base][2] == r["this tree"][2] for r in runs)
            print(
                f"  {scenario:<15} {base}: build {build_b * 1e3:.2f} + pipeline {update_b * 1e3:.2f} = "
                f"{(build_b + update_b) * 1e3:.2f} ms   this tree: build {build_a * 1e3:.2f} + pipeline "
                f"{update_a * 1e3:.2f} = {(build_a + update_a) * 1e3:.2f} ms   ratios: build {build_b / build_a:.2f}x, "
                f"pipeline {update_b / update_a:.2f}x, whole {(build_b + update_b) / (build_a + update_a):.2f}x   "
                f"same diagnosis: {same}"
            )


if __name__ == "__main__":
    main()
