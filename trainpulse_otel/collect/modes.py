"""Pick the collectors for a ``-mode``: the built-ins (:data:`COLLECTORS`) and ``trainpulse.collectors`` plugins.

``auto`` tries NVML, then nvidia-smi, then host-only, and says which it chose.
``none`` collects nothing (the daemon then only serves ingest). The mode
chooses among the built-in collectors (``nvml``, ``nvidia-smi``, ``host``,
``infiniband``, ``sim``); third-party collectors run beside them in every mode but ``none``,
the log follower (:func:`open_follow`, ``-follow``) and the scraper (:func:`open_scrape`,
``-scrape``) in every mode.
Hardware modules are imported only when their mode is considered.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from functools import partial
from typing import TYPE_CHECKING

from ..config import Settings
from .base import Collector, CollectorFactory

if TYPE_CHECKING:
    from .follow import ReadCounter
    from .sim import RealReports, SimCollector

log = logging.getLogger(__name__)

#: The built-in collectors each mode opens, in order.
MODE_COLLECTORS: Mapping[str, tuple[str, ...]] = {
    "none": (),
    "sim": ("sim",),
    "nvml": ("nvml", "host", "infiniband"),
    "nvidia-smi": ("nvidia-smi", "host", "infiniband"),
    "host": ("host", "infiniband"),
}
BUILTIN_COLLECTORS = frozenset(name for names in MODE_COLLECTORS.values() for name in names)


def build_collectors(
    settings: Settings, factories: Mapping[str, CollectorFactory], reports: RealReports | None = None
) -> tuple[str, list[Collector]]:
    """The resolved mode and its open collectors (the mode's built-ins, then third-party ones).

    ``reports`` goes to the simulator (the built-in ``sim``, which no plugin can
    replace), so that real training reports the engine ingests win over its own.
    """
    mode = detect_mode(settings) if settings.mode == "auto" else settings.mode
    names = list(MODE_COLLECTORS[mode])
    if mode != "none":
        names += [name for name in factories if name not in BUILTIN_COLLECTORS]
    if "sim" in factories:
        factories = {**factories, "sim": partial(open_sim, reports=reports)}
    collectors = []
    for name in names:
        collector = _open(name, factories, settings)
        if collector is not None:
            collectors.append(collector)
    return mode, collectors


def _open(name: str, factories: Mapping[str, CollectorFactory], settings: Settings) -> Collector | None:
    factory = factories.get(name)
    if factory is None:
        log.error("collector %s is not installed; collecting without it", name)
        return None
    try:
        return factory(settings)
    except Exception:  # a third-party collector's bug must not stop the daemon
        log.warning("collector %s could not start; collecting without it", name, exc_info=True)
        return None


def detect_mode(settings: Settings) -> str:
    """``-mode auto``: NVML, else nvidia-smi, else the host alone."""
    from .nvml import NvmlCollector
    from .smi import SmiCollector

    if NvmlCollector.available():
        log.info("mode auto: using NVML")
        return "nvml"
    if SmiCollector.available(timeout=settings.smi_timeout):
        log.info("mode auto: NVML unavailable, using nvidia-smi")
        return "nvidia-smi"
    log.info("mode auto: no NVIDIA GPU tooling found, collecting host metrics only")
    return "host"


def open_nvml(settings: Settings) -> Collector:
    """The ``nvml`` collector."""
    from .kmsg import KernelXidLog
    from .nvml import NvmlCollector

    return NvmlCollector(kernel_log=KernelXidLog)


def open_smi(settings: Settings) -> Collector:
    """The ``nvidia-smi`` collector, with the configured timeout."""
    from .kmsg import KernelXidLog
    from .smi import SmiCollector

    return SmiCollector(timeout=settings.smi_timeout, kernel_log=KernelXidLog)


def open_host(settings: Settings) -> Collector:
    """The ``host`` collector (psutil, /proc)."""
    from .host import HostCollector

    return HostCollector()


def open_infiniband(settings: Settings) -> Collector:
    """The ``infiniband`` collector: the host's InfiniBand/RoCE ports under ``sysfs_root``."""
    from .infiniband import InfinibandCollector

    return InfinibandCollector(settings.sysfs_root)


def open_follow(settings: Settings, on_read: ReadCounter | None = None) -> Collector:
    """The ``follow`` collector: the log files ``-follow`` names, read as they are written. Not chosen by a mode:
    the composition root opens it beside any mode's collectors (``none`` too) when ``follow`` is set."""
    from .follow import FollowCollector

    return FollowCollector(settings.follow or (), on_read=on_read)


def open_scrape(settings: Settings, on_failure: Callable[[str], None] | None = None) -> Collector:
    """The ``scrape`` collector: the dcgm-exporter and node-exporter endpoints ``-scrape`` names, read every tick
    within the tick's interval (at most 5 s). Not chosen by a mode: opened beside any mode's collectors."""
    from .scrape import DEFAULT_TIMEOUT_S, ScrapeCollector

    timeout = min(DEFAULT_TIMEOUT_S, max(0.5, settings.interval))
    return ScrapeCollector(settings.scrape or (), timeout_s=timeout, on_failure=on_failure)


def open_sim(settings: Settings, reports: RealReports | None = None) -> SimCollector:
    """The ``sim`` collector: the simulated node (node ``-sim-node-rank`` of ``-sim-nodes``) running
    ``-scenario`` from ``-onset``, yielding to ``reports``."""
    from .sim import SimCollector

    return SimCollector(
        settings.scenario,
        interval_s=settings.interval,
        onset_s=settings.onset,
        reports=reports,
        nodes=settings.sim_nodes,
        node_rank=settings.sim_node_rank,
        fault_node=settings.sim_fault_node,
    )


#: The built-in collector factories by name (third-party ones come from ``trainpulse.collectors``).
COLLECTORS: Mapping[str, CollectorFactory] = {
    "host": open_host,
    "infiniband": open_infiniband,
    "nvidia-smi": open_smi,
    "nvml": open_nvml,
    "sim": open_sim,
}
