"""Plugin discovery: four entry-point groups, TrainPulse's built-ins registered the same way, once.

Every part the composition root assembles comes from an entry-point group:

- ``trainpulse.collectors`` — a factory ``(Settings) -> Collector``
  (:mod:`trainpulse_otel.collect`); the built-ins ``nvml``, ``nvidia-smi``,
  ``host`` and ``sim`` are chosen by ``-mode``, third-party collectors run
  beside them in every mode but ``none``;
- ``trainpulse.detectors`` — a class or zero-argument factory of a
  :class:`~trainpulse_otel.diagnose.Detector`;
- ``trainpulse.root_causes`` — a :class:`~trainpulse_otel.diagnose.RootCauseRule`;
- ``trainpulse.adapters`` — an :class:`~trainpulse_otel.adapters.Adapter`
  (or an object with ``translate``).

The built-ins are the entry points of the ``trainpulse-otel`` distribution in
``pyproject.toml`` and nowhere else, so one path finds built-ins and
third-party plugins alike. Third-party entry points load only while autoload
is on: ``TRAINPULSE_DISABLE_PLUGIN_AUTOLOAD=1`` (or ``autoload=False``) loads
the built-ins alone, as the test suite does. A plugin that fails to import or
is not of its group's kind is logged and skipped; it never stops the daemon.
A third-party plugin cannot replace a built-in of the same name.

This is the only module that discovers anything or reads the autoload switch:
the diagnostic stage is handed what is found here.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from importlib.metadata import EntryPoint, entry_points
from typing import Any, TypeVar

from ..adapters.base import Adapter
from ..collect.base import CollectorFactory
from ..diagnose import Detector, RootCauseRule

log = logging.getLogger(__name__)

T = TypeVar("T")

COLLECTORS_GROUP = "trainpulse.collectors"
DETECTORS_GROUP = "trainpulse.detectors"
ROOT_CAUSES_GROUP = "trainpulse.root_causes"
ADAPTERS_GROUP = "trainpulse.adapters"
GROUPS = (COLLECTORS_GROUP, DETECTORS_GROUP, ROOT_CAUSES_GROUP, ADAPTERS_GROUP)
AUTOLOAD_ENV = "TRAINPULSE_DISABLE_PLUGIN_AUTOLOAD"
DISTRIBUTION = "trainpulse-otel"

DetectorFactory = Callable[[], Detector]


@dataclass(frozen=True)
class Plugins:
    """Everything discovery found, by name, built-ins first: the parts a pipeline is assembled from."""

    collectors: Mapping[str, CollectorFactory]
    detectors: Mapping[str, DetectorFactory]
    root_causes: Mapping[str, RootCauseRule]
    adapters: Mapping[str, Adapter]

    def new_detectors(self) -> list[Detector]:
        """A fresh instance of every detector (detectors keep state: one set per pipeline)."""
        return [factory() for factory in self.detectors.values()]


def discover(autoload: bool | None = None) -> Plugins:
    """Load all four groups (see the module docstring)."""
    return Plugins(
        collectors=load_group(COLLECTORS_GROUP, as_collector_factory, autoload),
        detectors=load_group(DETECTORS_GROUP, as_detector, autoload),
        root_causes=load_group(ROOT_CAUSES_GROUP, as_rule, autoload),
        adapters=load_group(ADAPTERS_GROUP, as_adapter, autoload),
    )


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
    own = [ep for ep in found if _is_builtin(ep)]
    if not own:
        log.error("no built-in %s found: is trainpulse-otel installed (pip install -e .)?", group)
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


def as_detector(name: str, obj: Any) -> DetectorFactory | None:
    """A class or factory whose instances judge ticks: ``update(tick)``, ``policy``, ``signals``."""
    if not callable(obj) or not all(hasattr(obj, attr) for attr in ("update", "policy", "signals")):
        return None
    return obj


def as_rule(name: str, obj: Any) -> RootCauseRule | None:
    """A root-cause rule: ``propose(evidence)`` and a ``residual`` flag."""
    if isinstance(obj, type):
        obj = obj()
    return obj if isinstance(obj, RootCauseRule) else None


def as_collector_factory(name: str, obj: Any) -> CollectorFactory | None:
    """A callable taking Settings and returning a Collector (a collector class with such a constructor fits)."""
    return obj if callable(obj) else None


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
    except Exception:  # a broken plugin must not stop the daemon
        log.warning("plugin %s=%s failed to load; skipping it", ep.name, ep.value, exc_info=True)
        return None
    if plugin is None:
        log.warning("plugin %s=%s is not a valid %s plugin; skipping it", ep.name, ep.value, ep.group)
    return plugin


def _is_builtin(ep: EntryPoint) -> bool:
    dist = ep.dist
    name = dist.name if dist is not None else ""
    return name.replace("_", "-").lower() == DISTRIBUTION
