"""Plugin discovery: entry-point groups, with TrainPulse's built-ins registered the same way.

Built-in adapters (``trainpulse.adapters``) and detectors
(``trainpulse.detectors``) are entry points of the ``trainpulse-otel``
distribution (``pyproject.toml``), so one path finds built-ins and
third-party plugins alike.
Third-party entry points load only while autoload is on: set
``TRAINPULSE_DISABLE_PLUGIN_AUTOLOAD=1`` (or pass ``autoload=False``) to load
the built-ins alone, as the test suite does. A plugin that fails to import or
is not an adapter (or detector) is logged and skipped; it never stops the daemon. A
third-party plugin cannot replace a built-in of the same name.
"""

from __future__ import annotations

import logging
import os
from importlib.metadata import EntryPoint, entry_points
from typing import Any, Callable, Mapping, TypeVar

from ..adapters.base import Adapter

log = logging.getLogger(__name__)

T = TypeVar("T")

ADAPTERS_GROUP = "trainpulse.adapters"
DETECTORS_GROUP = "trainpulse.detectors"
AUTOLOAD_ENV = "TRAINPULSE_DISABLE_PLUGIN_AUTOLOAD"
DISTRIBUTION = "trainpulse-otel"

#: The built-ins as pyproject.toml registers them; used only when the package
#: metadata is missing (running from a source tree that was never installed).
BUILTIN_ENTRY_POINTS: Mapping[str, Mapping[str, str]] = {
    ADAPTERS_GROUP: {
        name: f"trainpulse_otel.adapters.{module}:ADAPTER"
        for name, module in (("generic", "generic"), ("pytorch", "pytorch"), ("deepspeed", "deepspeed"),
                             ("megatron", "megatron"), ("huggingface", "hf_trainer"),
                             ("lightning", "lightning_metrics"), ("torchtitan", "torchtitan"))
    },
    DETECTORS_GROUP: {
        "throughput": "trainpulse_otel.diagnose.detectors.throughput:ThroughputCollapse",
        "utilization": "trainpulse_otel.diagnose.detectors.throughput:GpuUnderutilization",
        "dataloader": "trainpulse_otel.diagnose.detectors.inputs:DataloaderStarvation",
        "tokenizer": "trainpulse_otel.diagnose.detectors.inputs:TokenizerStall",
        "sync": "trainpulse_otel.diagnose.detectors.comms:SyncImbalance",
        "allreduce": "trainpulse_otel.diagnose.detectors.comms:AllreduceWait",
        "ranks": "trainpulse_otel.diagnose.detectors.ranks:RankStraggler",
        "gpu_memory": "trainpulse_otel.diagnose.detectors.memory:GpuMemoryPressure",
        "host_memory": "trainpulse_otel.diagnose.detectors.memory:HostMemoryPressure",
        "thermal": "trainpulse_otel.diagnose.detectors.thermal:ThermalInstability",
        "mfu": "trainpulse_otel.diagnose.detectors.llm:LowMfu",
        "padding": "trainpulse_otel.diagnose.detectors.llm:SequencePadding",
        "checkpoint": "trainpulse_otel.diagnose.detectors.schedule:CheckpointStall",
        "bubble": "trainpulse_otel.diagnose.detectors.schedule:PipelineBubble",
        "gpu_oom": "trainpulse_otel.diagnose.detectors.forecast:GpuOomRisk",
        "host_oom": "trainpulse_otel.diagnose.detectors.forecast:HostOomRisk",
        "thermal_risk": "trainpulse_otel.diagnose.detectors.forecast:ThermalThrottleRisk",
    },
}


def autoload_enabled(autoload: bool | None = None) -> bool:
    """An explicit argument wins; otherwise the environment decides (default: on)."""
    if autoload is not None:
        return autoload
    return os.environ.get(AUTOLOAD_ENV, "").strip().lower() not in ("1", "true", "yes", "on")


def load_group(group: str, accept: Callable[[str, Any], T | None], autoload: bool | None = None) -> dict[str, T]:
    """Load ``group``'s entry points: built-ins first, then third-party ones if autoloading.

    ``accept(name, obj)`` turns a loaded object into the plugin (or None to refuse it).
    """
    found = list(entry_points(group=group))
    own = [ep for ep in found if _is_builtin(ep)] or _builtin_fallback(group)
    third_party = [ep for ep in found if not _is_builtin(ep)] if autoload_enabled(autoload) else []
    plugins: dict[str, T] = {}
    for ep in own + third_party:
        if ep.name in plugins:
            log.warning("plugin %s=%s ignored: %r is already provided", ep.name, ep.value, ep.name)
            continue
        plugin = _load(ep, accept)
        if plugin is not None:
            plugins[ep.name] = plugin
    return plugins


def load_adapters(autoload: bool | None = None) -> dict[str, Adapter]:
    """The framework adapters by name (``trainpulse.adapters``)."""
    return load_group(ADAPTERS_GROUP, as_adapter, autoload)


def load_detectors(autoload: bool | None = None) -> dict[str, Callable[[], Any]]:
    """The detector classes (or zero-argument factories) by name (``trainpulse.detectors``), built-ins first."""
    return load_group(DETECTORS_GROUP, as_detector, autoload)


def as_detector(name: str, obj: Any) -> Callable[[], Any] | None:
    """A class or factory whose instances judge ticks: ``update(tick)``, ``policy``, ``signals``."""
    if not callable(obj) or not all(hasattr(obj, attr) for attr in ("update", "policy", "signals")):
        return None
    return obj


def as_adapter(name: str, obj: Any) -> Adapter | None:
    """An :class:`Adapter`, or an object (or class) with ``translate``, as an Adapter named ``name``."""
    if isinstance(obj, type):
        obj = obj()
    if isinstance(obj, Adapter):
        return obj if obj.name == name else Adapter(name, obj.translate, obj.translate_text, obj.description)
    translate = getattr(obj, "translate", None)
    if not callable(translate):
        return None
    text = getattr(obj, "translate_text", None)
    return Adapter(name, translate, text if callable(text) else None, str(getattr(obj, "description", "")))


def _load(ep: EntryPoint, accept: Callable[[str, Any], T | None]) -> T | None:
    try:
        plugin = accept(ep.name, ep.load())
    except Exception:  # noqa: BLE001 - a broken plugin must not stop the daemon
        log.warning("plugin %s=%s failed to load; skipping it", ep.name, ep.value, exc_info=True)
        return None
    if plugin is None:
        log.warning("plugin %s=%s is not a valid %s plugin; skipping it", ep.name, ep.value, ep.group)
    return plugin


def _is_builtin(ep: EntryPoint) -> bool:
    dist = getattr(ep, "dist", None)
    name = getattr(dist, "name", None) or ""
    return name.replace("_", "-").lower() == DISTRIBUTION


def _builtin_fallback(group: str) -> list[EntryPoint]:
    table = BUILTIN_ENTRY_POINTS.get(group, {})
    if table:
        log.debug("no installed entry points for %s; using the built-in table", group)
    return [EntryPoint(name, value, group) for name, value in table.items()]
