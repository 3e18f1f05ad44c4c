"""The 4,096-rank tick against another commit's, in one process: frame build and pipeline update, before/after.

``--base`` (a git ref, default ``main``) is exported with ``git archive`` into a
temporary directory under another package name (every import inside the
package is relative), so both versions run side by side in this process. Each
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
import importlib
import io
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from dataclasses import replace
from importlib.metadata import entry_points
from pathlib import Path
from types import ModuleType
from typing import Any

import trainpulse_otel
from trainpulse_otel.runtime import discover

PLUGINS = discover(autoload=False)
WARMUP_TICKS = 120
TIMED_TICKS = 40
BASE_PACKAGE = "trainpulse_base"


def export_base(ref: str, into: Path) -> ModuleType:
    """``ref``'s package, importable as :data:`BASE_PACKAGE` from ``into``."""
    root = Path(trainpulse_otel.__file__).resolve().parent.parent
    archive = subprocess.run(
        ["git", "-C", str(root), "archive", ref, "trainpulse_otel"],  # noqa: S607 - git from PATH, as for a checkout
        check=True,
        capture_output=True,
    )
    with tarfile.open(fileobj=io.BytesIO(archive.stdout)) as tar:
        tar.extractall(into, filter="data")
    (into / "trainpulse_otel").rename(into / BASE_PACKAGE)
    sys.path.insert(0, str(into))
    return importlib.import_module(BASE_PACKAGE)


class Side:
    """One version of the package: its simulator, replay step and pipeline (with its own built-in plugins)."""

    def __init__(self, package: ModuleType) -> None:
        self.package = package.__name__
        self.scenarios = self.module("collect.sim.scenarios").SCENARIOS
        self.evaluate = self.module("runtime.evaluate")
        self.replay = self.module("runtime.replay")
        self.assemble = self.module("runtime.assemble")
        self.settings = self.module("config").Settings

    def module(self, name: str) -> Any:
        return importlib.import_module(f"{self.package}.{name}")

    def pipeline(self) -> Any:
        """This side's pipeline with this side's built-in detectors and rules (same names as the installed ones)."""
        detectors = [self._load(f"{f.__module__}:{f.__name__}")() for f in PLUGINS.detectors.values()]
        rules = [self._load(ep.value) for ep in entry_points(group="trainpulse.root_causes")]
        return self.module("diagnose.pipeline").DiagnosticPipeline(detectors, rules)

    def _load(self, value: str) -> Any:
        module, name = value.split(":")
        return getattr(importlib.import_module(module.replace("trainpulse_otel", self.package, 1)), name)

    def groups(self, scenario: str, ranks: int) -> list:
        variant = self.evaluate.Variant("bench", ranks=ranks)
        records = self.evaluate.sim_records(self.scenarios[scenario], 0, WARMUP_TICKS + TIMED_TICKS, variant)
        return list(self.replay.group_ticks(records))


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
            groups = {name: side.groups(scenario, args.ranks) for name, side in sides.items()}
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
