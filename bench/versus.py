"""Another commit's package beside this tree's, in one process: the benches' side-by-side runs.

``export_base(ref, into)`` exports ``ref``'s ``trainpulse_otel`` with ``git
archive`` under another package name (every import inside the package is
relative), so both versions import side by side; a :class:`Side` is one
version's simulator, replay step and pipeline, with its own built-in
detectors and root-cause rules. A bench that times both alternately, in the
same process, sees a busy machine slow both alike and can print ratios.
"""

from __future__ import annotations

import importlib
import io
import re
import subprocess
import sys
import tarfile
from pathlib import Path
from types import ModuleType
from typing import Any

import trainpulse_otel
from trainpulse_otel.runtime import discover

PLUGINS = discover(autoload=False)
BASE_PACKAGE = "trainpulse_base"


ROOT = Path(trainpulse_otel.__file__).resolve().parent.parent


def export_base(ref: str, into: Path) -> ModuleType:
    """``ref``'s package, importable as :data:`BASE_PACKAGE` from ``into`` (with its ``pyproject.toml`` beside it:
    before the built-ins were listed in code, its entry points named them)."""
    archive = subprocess.run(
        ["git", "-C", str(ROOT), "archive", ref, "trainpulse_otel", "pyproject.toml"],  # noqa: S607 - git from PATH
        check=True,
        capture_output=True,
    )
    with tarfile.open(fileobj=io.BytesIO(archive.stdout)) as tar:
        tar.extractall(into, filter="data")
    (into / "trainpulse_otel").rename(into / BASE_PACKAGE)
    (into / "pyproject.toml").rename(into / BASE_PACKAGE / "pyproject.toml")
    sys.path.insert(0, str(into))
    return importlib.import_module(BASE_PACKAGE)


class Side:
    """One version of the package: its simulator, replay step and pipeline (with its own built-in plugins)."""

    def __init__(self, package: ModuleType) -> None:
        self.package = package.__name__
        self.scenarios = self.module("collect.sim.scenarios").SCENARIOS
        self.sim_replay = self.module_of("evaluation.sim_replay", "runtime.evaluate")  # before the move: runtime
        self.replay = self.module("runtime.replay")
        self.trace = self.module("collect.trace")
        self.assemble = self.module("runtime.assemble")
        self.settings = self.module("config").Settings

    def module(self, name: str) -> Any:
        return importlib.import_module(self.package if name == "__init__" else f"{self.package}.{name}")

    def module_of(self, name: str, before: str) -> Any:
        """This side's ``name``, or ``before`` on a commit from before it moved there."""
        try:
            return self.module(name)
        except ModuleNotFoundError:
            return self.module(before)

    def pipeline(self) -> Any:
        """This side's pipeline with this side's built-in detectors and rules: listed in its code, or, on a commit
        from before they were, its pyproject's entry points (in name order, as they were loaded)."""
        try:
            builtins = self.module("diagnose.builtins")
        except ModuleNotFoundError:
            pyproject = (Path(self.module("__init__").__file__).parent / "pyproject.toml").read_text()
            detectors = [self._load(value)() for value in _entry_points(pyproject, "trainpulse.detectors")]
            rules = [self._load(value) for value in _entry_points(pyproject, "trainpulse.root_causes")]
            return self.module("diagnose.pipeline").DiagnosticPipeline(detectors, rules)
        detectors = [cls() for cls in builtins.DETECTORS]
        return self.module("diagnose.pipeline").DiagnosticPipeline(detectors, builtins.RULES, builtins.VOCABULARY)

    def stepper(self) -> Any:
        """This side's replay step (``open_replay``), diagnosing with this side's pipeline."""
        stepper = self.assemble.open_replay(self.settings(), PLUGINS)
        stepper.pipeline = self.pipeline()
        return stepper

    def replay_file(self, path: str) -> Any:
        """``trainpulse replay`` of the trace at ``path`` with this side's code: its ReplayResult."""
        with open(path, "rb") as fh:
            return self.replay.replay(self.trace.read_trace(self.trace.bounded_lines(fh), []), self.stepper())

    def groups(self, scenario: str, ranks: int, ticks: int) -> list:
        """``ticks`` ticks of the simulated ``scenario`` at ``ranks`` ranks, grouped as replay groups them."""
        variant = self.sim_replay.Variant("bench", ranks=ranks)
        return list(self.replay.group_ticks(self.sim_replay.sim_records(self.scenarios[scenario], 0, ticks, variant)))

    def _load(self, value: str) -> Any:
        module, name = value.split(":")
        return getattr(importlib.import_module(module.replace("trainpulse_otel", self.package, 1)), name)


def _entry_points(pyproject: str, group: str) -> list[str]:
    """The values of ``group``'s entry points in a ``pyproject.toml``, by name (the order they were loaded in)."""
    section = re.search(
        rf'^\[project\.entry-points\."{re.escape(group)}"\]\n(.*?)(?:^\[|\Z)', pyproject, re.MULTILINE | re.DOTALL
    )
    pairs = re.findall(r'^(\S+)\s*=\s*"([^"]+)"', section.group(1) if section else "", re.MULTILINE)
    return [value for _, value in sorted(pairs)]
