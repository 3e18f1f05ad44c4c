"""Plugin discovery: the built-ins listed in code, third parties from four entry-point groups.

- ``trainpulse.collectors`` — a factory ``(Settings) -> Collector``; the built-ins
  (:data:`~trainpulse_otel.collect.modes.COLLECTORS`) are chosen by ``-mode``;
- ``trainpulse.detectors`` — a :class:`~trainpulse_otel.diagnose.Detector` class,
  built with its thresholds; ``trainpulse.root_causes`` — a
  :class:`~trainpulse_otel.diagnose.RootCauseRule` (built-ins:
  :mod:`trainpulse_otel.diagnose.builtins`);
- ``trainpulse.adapters`` — an :class:`~trainpulse_otel.adapters.Adapter`
  (built-ins: :data:`~trainpulse_otel.adapters.builtins.ADAPTERS`).

``disabled`` (the config's ``detectors.disabled``) turns built-in detectors off, by detector or signal name,
before the plugins load: their signals and knobs are gone from the vocabulary (so from ``thresholds``, the
snapshot and ``/metrics``), and a plugin may take their names. A name no built-in has is a ConfigError.
Third-party entry points load unless ``TRAINPULSE_DISABLE_PLUGIN_AUTOLOAD=1``
(or ``autoload=False``). One that fails to import is logged and skipped; one
whose declarations do not fit — not a detector or rule, a clashing or missing
name, a cause explaining an unknown signal — stops discovery with a
:class:`PluginError` naming it, as pluggy refuses a bad hook implementation.
This is the only module that discovers anything or reads the autoload switch.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from importlib.metadata import EntryPoint, entry_points
from typing import Any, TypeVar

from ..adapters.base import Adapter
from ..adapters.builtins import ADAPTERS
from ..collect.base import CollectorFactory
from ..collect.modes import COLLECTORS
from ..config import ConfigError
from ..diagnose import Detector, RootCauseRule, SpecError, Vocabulary
from ..diagnose.builtins import DETECTORS, RULES

log = logging.getLogger(__name__)

T = TypeVar("T")

COLLECTORS_GROUP = "trainpulse.collectors"
DETECTORS_GROUP = "trainpulse.detectors"
ROOT_CAUSES_GROUP = "trainpulse.root_causes"
ADAPTERS_GROUP = "trainpulse.adapters"
GROUPS = (COLLECTORS_GROUP, DETECTORS_GROUP, ROOT_CAUSES_GROUP, ADAPTERS_GROUP)
AUTOLOAD_ENV = "TRAINPULSE_DISABLE_PLUGIN_AUTOLOAD"
DISTRIBUTION = "trainpulse-otel"


class PluginError(SpecError):
    """A third-party plugin that does not fit its group; the message names the entry point."""


@dataclass(frozen=True)
class Plugins:
    """Everything discovery found, by name, built-ins first, and the vocabulary their declarations make."""

    collectors: Mapping[str, CollectorFactory]
    detectors: Mapping[str, type[Detector]]
    root_causes: Mapping[str, RootCauseRule]
    adapters: Mapping[str, Adapter]
    vocabulary: Vocabulary

    def new_detectors(self, overrides: Mapping[str, Mapping[str, float]] | None = None) -> list[Detector]:
        """A fresh instance of every detector (they keep state: one set per pipeline), built with its thresholds:
        the declared knobs with ``overrides`` (:meth:`Vocabulary.resolve`'s, by detector name)."""
        return [cls(self.vocabulary.thresholds(cls, overrides)) for cls in self.detectors.values()]


def discover(autoload: bool | None = None, disabled: Collection[str] = ()) -> Plugins:
    """The built-ins but the ``disabled`` and, while autoloading, every installed third-party plugin (see the
    module docstring)."""
    origins: dict[int, str] = {}
    builtins = _enabled({d.name: d for d in DETECTORS}, disabled)
    detectors = _with_builtins(builtins, DETECTORS_GROUP, as_detector, autoload, origins)
    rules = _with_builtins({r.name: r for r in RULES}, ROOT_CAUSES_GROUP, as_rule, autoload, origins)
    declared = {getattr(spec, "name", None) for d in detectors.values() for spec in getattr(d, "signals", ())}
    off = {spec.name for d in DETECTORS if d.name not in builtins for spec in d.signals} - declared
    try:
        vocabulary = Vocabulary(
            detectors.values(), rules.values(), lambda part: _origin(part, origins), off=frozenset(off)
        )
    except SpecError as exc:
        raise PluginError(str(exc)) from None
    return Plugins(
        collectors=_with_builtins(dict(COLLECTORS), COLLECTORS_GROUP, as_collector_factory, autoload, origins),
        detectors=detectors,
        root_causes=rules,
        adapters=_with_builtins({a.name: a for a in ADAPTERS}, ADAPTERS_GROUP, as_adapter, autoload, origins),
        vocabulary=vocabulary,
    )


def _enabled(builtins: dict[str, type[Detector]], disabled: Collection[str]) -> dict[str, type[Detector]]:
    """The built-in detectors but those ``disabled`` names: a detector's name, or a signal it raises."""
    signals = {spec.name for d in builtins.values() for spec in d.signals}
    unknown = sorted(set(disabled) - set(builtins) - signals)
    if unknown:
        raise ConfigError(
            "detectors.disabled",
            f"no built-in detector or signal {', '.join(map(repr, unknown))}; "
            f"detectors: {', '.join(builtins)}; signals: {', '.join(sorted(signals))}",
        )
    off = set(disabled)
    return {n: d for n, d in builtins.items() if n not in off and not off & {s.name for s in d.signals}}


def autoload_enabled(autoload: bool | None = None) -> bool:
    """An explicit argument wins; otherwise the environment decides (default: on)."""
    if autoload is not None:
        return autoload
    return os.environ.get(AUTOLOAD_ENV, "").strip().lower() not in ("1", "true", "yes", "on")


def load_adapters(autoload: bool | None = None) -> dict[str, Adapter]:
    """The framework adapters by name: the built-ins, then ``trainpulse.adapters``."""
    return _with_builtins({a.name: a for a in ADAPTERS}, ADAPTERS_GROUP, as_adapter, autoload, {})


def _with_builtins(
    builtins: dict[str, T],
    group: str,
    accept: Callable[[str, Any], T | None],
    autoload: bool | None,
    origins: dict[int, str],
) -> dict[str, T]:
    """``builtins`` and then ``group``'s third-party entry points (while autoloading), by name."""
    found: dict[str, T] = dict(builtins)
    for obj in found.values():
        origins[id(obj)] = f"{_name_of(obj)!r} (built-in)"
    if not autoload_enabled(autoload):
        return found
    for ep in entry_points(group=group):
        if _is_ours(ep):
            continue  # an older install's metadata: the built-ins are listed in code now
        where = f"plugin {ep.name!r} ({ep.value}, {group})"
        if ep.name in found:
            raise PluginError(f"{where}: the name {ep.name!r} is already taken by {origins[id(found[ep.name])]}")
        plugin = _load(ep, accept, where)
        if plugin is not None:
            origins[id(plugin)] = where
            found[ep.name] = plugin
    return found


def as_detector(name: str, obj: Any) -> type[Detector] | None:
    """A detector class: built with its thresholds, judging ticks with ``update(tick)``."""
    return obj if isinstance(obj, type) and callable(getattr(obj, "update", None)) else None


def as_rule(name: str, obj: Any) -> RootCauseRule | None:
    """A root-cause rule: a ``spec``, ``propose(evidence)`` and a ``residual`` flag."""
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


def _load(ep: EntryPoint, accept: Callable[[str, Any], T | None], where: str) -> T | None:
    try:
        obj = ep.load()
    except Exception:  # a plugin whose import fails (a missing dependency) must not stop the daemon
        log.warning("%s failed to import; skipping it", where, exc_info=True)
        return None
    plugin = accept(ep.name, obj)
    if plugin is None:
        raise PluginError(f"{where}: {obj!r} is not a valid {ep.group} plugin (see docs/architecture.md#plugins)")
    return plugin


def _origin(part: Any, origins: Mapping[int, str]) -> str:
    return origins.get(id(part), f"{_name_of(part)!r}")


def _name_of(obj: Any) -> str:
    return str(getattr(obj, "name", None) or getattr(obj, "__name__", None) or obj)


def _is_ours(ep: EntryPoint) -> bool:
    dist = ep.dist
    name = dist.name if dist is not None else ""
    return name.replace("_", "-").lower() == DISTRIBUTION
