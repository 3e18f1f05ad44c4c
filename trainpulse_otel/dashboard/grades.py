"""Where a GPU reading turns yellow or red: the GPU table colours by these, and the node strip judges a
node by the same lines, so a red cell in the strip is a red cell in that node's GPU table."""

from __future__ import annotations

from collections.abc import Sequence

from ..samples import GpuSample

UTIL_GRADES = ((80.0, "green"), (50.0, "yellow"))
MEMORY_GRADES = ((95.0, "bold red"), (85.0, "yellow"))
TEMP_GRADES = ((85.0, "bold red"), (78.0, "yellow"))
CLOCK_GRADES = ((0.9, "green"), (0.75, "yellow"))
#: Throttle reasons that are the hardware protecting itself (the GPU table shows them bold red).
HARDWARE_THROTTLE = frozenset({"hw_slowdown", "hw_thermal", "hw_power_brake"})

OK, WARNING, CRITICAL = 0, 1, 2


def level(value: float | None, grades: Sequence[tuple[float, str]]) -> int:
    """How far up a red-then-yellow ``grades`` list ``value`` reaches: CRITICAL, WARNING or OK."""
    if value is None:
        return OK
    return next((len(grades) - i for i, (at_least, _) in enumerate(grades) if value >= at_least), OK)


def memory_percent(g: GpuSample) -> float | None:
    """Memory in use, as a percentage (from bytes when known, else NVML's utilisation)."""
    used, total = g.memory_used_bytes, g.memory_total_bytes
    if used is not None and total:
        return 100.0 * used / total
    return g.memory_utilization_percent if used is None else None


def gpu_level(g: GpuSample) -> int:
    """A GPU's state: critical when hot, full or throttled by its hardware; warning on the yellow lines
    or any other throttle reason but idling."""
    reasons = [r for r in g.throttle_reasons or () if r != "gpu_idle"]
    throttle = CRITICAL if any(r in HARDWARE_THROTTLE for r in reasons) else WARNING if reasons else OK
    return max(throttle, level(g.temperature_celsius, TEMP_GRADES), level(memory_percent(g), MEMORY_GRADES))
