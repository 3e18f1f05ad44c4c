"""Rules about the hardware: GPUs overheating or power-capped, GPU and host memory running out."""

from __future__ import annotations

from ...samples import GpuKey, gpu_label
from ..correlate import Evidence
from ..detectors.comms import SYNC_IMBALANCE
from ..detectors.forecast import OOM_RISK
from ..detectors.llm import LOW_MFU
from ..detectors.logged import COLLECTIVE_TIMEOUT, OUT_OF_MEMORY, RANK_CRASHED
from ..detectors.memory import MEMORY_PRESSURE
from ..detectors.ranks import RANK_STRAGGLER
from ..detectors.stall import TRAINING_STALLED
from ..detectors.thermal import THERMAL_INSTABILITY
from ..detectors.thermal_forecast import THERMAL_THROTTLE_RISK
from ..detectors.throughput import GPU_UNDERUTILIZATION, THROUGHPUT_COLLAPSE, THROUGHPUT_DROP
from ..spec import HARDWARE, CauseSpec
from ..types import Signal
from .common import (
    CONFIRMED,
    CORROBORATED,
    CRITICAL_EVIDENCE,
    LIKELY,
    STRONG,
    SYMPTOMS,
    WARNED,
    base_confidence,
    of_host_and_rank,
    pct,
    symptoms,
)
from .ranking import Candidate, Rule

#: A power limit this much below the highest seen was cut on purpose (a cap), not merely reached.
POWER_CUT = 0.10
#: A throughput drop worth naming in a summary.
NOTABLE_DROP = 0.05
#: What a forecast's ETA reads as when a signal has none (it sorts last).
NO_ETA_S = 1e9

GPU_THERMAL_THROTTLING = CauseSpec(
    "gpu_thermal_throttling",
    "a GPU (or a node's GPUs together) overheating: throttling, heating fast, or forecast to throttle",
    HARDWARE,
    (THERMAL_INSTABILITY.name, THERMAL_THROTTLE_RISK.name, RANK_STRAGGLER.name, *SYMPTOMS),
    "fix the GPU's or the node's cooling; cap the GPU's power or move the job until then",
)
GPU_POWER_THROTTLING = CauseSpec(
    "gpu_power_throttling",
    "power limits holding the GPUs' clocks down",
    HARDWARE,
    (RANK_STRAGGLER.name, *SYMPTOMS),
    "restore the GPUs' power limit, or expect throughput to scale down with the cap",
)
GPU_MEMORY_PRESSURE = CauseSpec(
    "gpu_memory_pressure",
    "GPU memory nearly full or forecast to run out",
    HARDWARE,
    (
        MEMORY_PRESSURE.name,
        OOM_RISK.name,
        OUT_OF_MEMORY.name,
        RANK_STRAGGLER.name,
        RANK_CRASHED.name,
        COLLECTIVE_TIMEOUT.name,
        TRAINING_STALLED.name,
        *SYMPTOMS,
    ),
    "find what keeps tensors alive across steps, or give the allocator headroom",
)
HOST_MEMORY_PRESSURE = CauseSpec(
    "host_memory_pressure",
    "host memory running low or forecast to run out",
    HARDWARE,
    (MEMORY_PRESSURE.name, OOM_RISK.name, THROUGHPUT_COLLAPSE.name),
    "find the process whose resident memory grows (usually the data loader) and bound it",
)

REMEDY_THERMAL = (
    "Check {gpu}'s cooling: fan speeds, inlet/exhaust temperatures and airflow "
    "(nvidia-smi -q -d TEMPERATURE,PERFORMANCE; BMC/ipmitool sensors), a failed fan or cold plate. "
    "Drain the node for service; until then cap that GPU's power (nvidia-smi -i {index} -pl <watts>) "
    "to stop the throttle cycling, or move the job off the node."
)


def thermal(ev: Evidence) -> list[Candidate]:
    """A GPU overheating: throttling, heating fast, or forecast to reach its throttle point."""
    by_gpu = ev.gpu_signals(THERMAL_INSTABILITY.name, THERMAL_THROTTLE_RISK.name)
    for s in ev.active(RANK_STRAGGLER.name):
        g = ev.gpu_of(s)
        if g is not None and ev.thermally_throttled(g):
            by_gpu.setdefault(g, [])
    out = []
    for node in sorted({key[0] for key in by_gpu}, key=lambda n: n or ""):
        on_node = {key: signals for key, signals in by_gpu.items() if key[0] == node}
        if len(on_node) >= 2 and 2 * len(on_node) >= len(ev.node_gpus(node)):
            out.append(_node_thermal(ev, on_node))
            for key in on_node:
                del by_gpu[key]
    for g, signals in by_gpu.items():
        throttled = ev.thermally_throttled(g)
        stragglers = ev.stragglers_on(g)
        explains = stragglers + (symptoms(ev) if stragglers else [])
        if throttled:
            base = CONFIRMED if stragglers else CRITICAL_EVIDENCE
        else:
            base = CORROBORATED if any(s.name == THERMAL_INSTABILITY.name for s in signals) else WARNED
        out.append(
            Candidate(
                GPU_THERMAL_THROTTLING.name,
                base,
                _thermal_summary(ev, g, signals, stragglers),
                REMEDY_THERMAL.format(gpu=gpu_label(g), index=g[1]),
                signals,
                explains,
                ev.gpu_subject([g]),
            )
        )
    return out


REMEDY_NODE_THERMAL = (
    "Check the node's and the room's cooling, not one GPU: inlet air temperature, fans and airflow "
    "(ipmitool sensor, the BMC), blanking panels and cabling in the rack, the CRAC/CDU or liquid-cooling loop. "
    "Move the job off the node if it cannot be fixed before the GPUs throttle."
)


def _node_thermal(ev: Evidence, by_gpu: dict[GpuKey, list[Signal]]) -> Candidate:
    """Most of one node's GPUs overheating together: the node's or the room's cooling."""
    signals = [s for group in by_gpu.values() for s in group]
    throttled = [g for g in by_gpu if ev.thermally_throttled(g)]
    stragglers = [s for g in by_gpu for s in ev.stragglers_on(g)]
    temps = [ev.node.gpus[g].temp for g in by_gpu if g in ev.node.gpus and ev.node.gpus[g].temp is not None]
    detail = [f"up to {max(temps):.0f} °C"] if temps else []  # type: ignore[type-var]
    if throttled:
        detail.append(f"{len(throttled)} throttling")
    node = next(iter(by_gpu))[0]
    summary = (
        f"{len(by_gpu)} of {len(ev.node_gpus(node))} GPUs{'' if node is None else ' of ' + node} overheat together"
        + (f" ({', '.join(detail)})" if detail else "")
        + ": the node's cooling, not one GPU's"
    )
    explains = stragglers + (symptoms(ev) if throttled else [])
    return Candidate(
        GPU_THERMAL_THROTTLING.name,
        CRITICAL_EVIDENCE if throttled else CORROBORATED,
        summary,
        REMEDY_NODE_THERMAL,
        signals,
        explains,
        ev.gpu_subject(by_gpu),
    )


def _thermal_summary(ev: Evidence, g: GpuKey, signals: list[Signal], stragglers: list[Signal]) -> str:
    state = ev.gpu(g)
    temp = f" at {state.temp:.0f} °C" if state is not None and state.temp is not None else ""
    if ev.thermally_throttled(g):
        clock = f", SM clock at {pct(state.clock_ratio)} of max" if state and state.clock_ratio else ""
        text = f"{gpu_label(g)} overheats and throttles{temp}{clock}"
    else:
        risk = next((s for s in signals if s.name == THERMAL_THROTTLE_RISK.name), None)
        eta = risk.evidence.get("eta_s") if risk is not None else None
        text = f"{gpu_label(g)} overheats{temp}" + (
            f" and will reach its throttle point in ~{eta / 60:.0f} min" if eta is not None else " far above its peers"
        )
    if stragglers:
        s = stragglers[0]
        text += (
            f"; rank {s.subject.get('rank')} on it is {pct(s.evidence.get('slower_than_median'))} slower "
            "than the median rank and the others wait for it"
        )
    return text


REMEDY_POWER = (
    "Restore the GPUs' power limit (nvidia-smi -q -d POWER shows the enforced and default limits; "
    "nvidia-smi -pl, or the DCGM/cluster power-capping policy that set it) and check the rack's power "
    "budget and BMC power-brake events. If the cap is intended, expect throughput to scale down with it."
)


def power(ev: Evidence) -> list[Candidate]:
    """Power limits holding clocks down: job-wide (throughput falls) or on one straggler's GPU."""
    gpus = list(ev.node.gpus)
    capped = ev.power_throttled_gpus()
    out = []
    lost = symptoms(ev, THROUGHPUT_COLLAPSE.name, LOW_MFU.name, GPU_UNDERUTILIZATION.name)
    if gpus and 2 * len(capped) >= len(gpus) and lost:
        cut = max(ev.power_limit_cut(g) for g in capped)
        base = STRONG if cut >= POWER_CUT else LIKELY
        limit = ev.gpu(capped[0])
        summary = (
            f"{len(capped)} of {len(gpus)} GPUs are held by their power limit (sw_power_cap)"
            + (
                f" of {limit.limit:.0f} W, {pct(cut)} below the earlier {limit.limit_max:.0f} W"
                if limit is not None and limit.limit and cut >= POWER_CUT
                else ""
            )
            + f": SM clocks at {pct(ev.median_clock_ratio(capped))} of max"
        )
        drop = ev.fact(THROUGHPUT_DROP)
        if drop is not None and drop > NOTABLE_DROP:
            summary += f", throughput down {pct(drop)}"
        clock = ev.median_clock_ratio(capped)
        uncapped_mfu = ev.mfu_without(1.0 - clock) if clock is not None else None
        if uncapped_mfu is not None and not ev.explains_mfu(1.0 - clock):  # lower than the clocks alone make it
            lost = [s for s in lost if s.name != LOW_MFU.name]
        explains = lost + symptoms(ev, SYNC_IMBALANCE.name)
        out.append(
            Candidate(GPU_POWER_THROTTLING.name, base, summary, REMEDY_POWER, [], explains, ev.gpus_subject(capped))
        )
        return out
    for s in ev.active(RANK_STRAGGLER.name):
        g = ev.gpu_of(s)
        if g is not None and g in capped and not ev.thermally_throttled(g):
            summary = (
                f"{gpu_label(g)} alone is held by its power limit (clocks at {pct(ev.gpu(g).clock_ratio)}), "
                f"so rank {s.subject.get('rank')} on it is the straggler"
            )  # type: ignore[union-attr]
            out.append(
                Candidate(
                    GPU_POWER_THROTTLING.name,
                    CRITICAL_EVIDENCE,
                    summary,
                    REMEDY_POWER,
                    [],
                    [s, *symptoms(ev)],
                    ev.gpu_subject([g]),
                )
            )
    return out


REMEDY_GPU_LEAK = (
    "Something on rank {rank} keeps GPU tensors alive across steps: accumulated losses or outputs "
    "without .detach()/.item(), growing lists of tensors, hooks or closures holding graphs. Log "
    "torch.cuda.memory_allocated() per step and take a torch.cuda.memory._snapshot() to find the "
    "allocation site; restart from the last checkpoint before it runs out."
)
REMEDY_GPU_FULL = (
    "Give the allocator headroom: a smaller micro-batch with more gradient accumulation, activation "
    "checkpointing, FSDP/ZeRO sharding of optimizer state, and "
    "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True against fragmentation."
)


def gpu_memory(ev: Evidence) -> list[Candidate]:
    """GPU memory nearly full or forecast to run out."""
    by_gpu = ev.gpu_signals(MEMORY_PRESSURE.name, OOM_RISK.name)
    if not by_gpu:
        return []
    signals = [s for group in by_gpu.values() for s in group]
    stragglers = [s for g in by_gpu for s in ev.stragglers_on(g)]
    explains = stragglers + symptoms(ev, THROUGHPUT_COLLAPSE.name, SYNC_IMBALANCE.name)
    subject = ev.gpu_subject(by_gpu)
    forecast = min(
        (s for s in signals if s.name == OOM_RISK.name), key=lambda s: s.evidence.get("eta_s", NO_ETA_S), default=None
    )
    where = f"{gpu_label(next(iter(by_gpu)))} memory" if len(by_gpu) == 1 else f"memory of {len(by_gpu)} GPUs"
    if forecast is not None:
        gpu = ev.gpu(ev.subject_gpu(forecast.subject))  # type: ignore[arg-type]
        summary = _forecast_summary(where, forecast, "the device", gpu.mem_frac if gpu is not None else None)
        remedy = REMEDY_GPU_LEAK.format(rank=subject.get("rank", "?")) if len(by_gpu) == 1 else REMEDY_GPU_FULL
    else:
        fracs = [s.evidence.get("used_fraction") for s in signals if s.evidence.get("used_fraction") is not None]
        summary = (
            f"{where} is {pct(max(fracs) if fracs else None)} full: the allocator is at its limit "
            "and stalls on retries before it fails"
        )
        remedy = REMEDY_GPU_FULL
    return [
        Candidate(
            GPU_MEMORY_PRESSURE.name,
            base_confidence(signals, CORROBORATED, STRONG),
            summary,
            remedy,
            signals,
            explains,
            subject,
        )
    ]


def _forecast_summary(where: str, forecast: Signal, of: str, used: float | None) -> str:
    """What an ``oom_risk`` forecast says: how fast memory goes and when it runs out (or that it did)."""
    if forecast.evidence.get("eta_s") == 0.0:
        return f"{where} ran out and training stopped ({forecast.message})"
    rate = abs(forecast.evidence.get("rate_fraction_per_s", 0.0))
    text = (
        f"{where} is used up at {100 * rate * 60:.1f}% of {of} a minute and runs out in "
        f"~{forecast.evidence.get('eta_s', 0.0) / 60:.0f} min"
    )
    return text + (f" ({pct(used)} in use)" if used is not None else "")


REMEDY_HOST_MEMORY = (
    "Find the process whose resident memory grows (ps/smem over time, /proc/<pid>/status) — usually the "
    "data loader: caches or lists that grow every iteration, per-worker copies of Python objects, pinned "
    "buffers. Bound the caches, fix the leak, and restart from the last checkpoint before the OOM killer "
    "ends the job."
)


def host_memory(ev: Evidence) -> list[Candidate]:
    """Host memory running low or forecast to run out."""
    signals = ev.host_signals(MEMORY_PRESSURE.name, OOM_RISK.name)
    if not signals:
        return []
    forecast = next((s for s in signals if s.name == OOM_RISK.name), None)
    available = ev.node.host.available_frac
    if forecast is not None:
        summary = _forecast_summary("host memory", forecast, "the total", None if available is None else 1 - available)
    else:
        summary = f"host memory is nearly exhausted: {pct(available)} available"
    explains = symptoms(ev, THROUGHPUT_COLLAPSE.name)
    return [
        Candidate(
            HOST_MEMORY_PRESSURE.name,
            base_confidence(signals, CORROBORATED, STRONG),
            summary,
            REMEDY_HOST_MEMORY,
            signals,
            explains,
            dict(signals[0].subject),
        )
    ]


THERMAL = Rule(GPU_THERMAL_THROTTLING, thermal)
POWER = Rule(GPU_POWER_THROTTLING, power)


def out_of_memory(ev: Evidence) -> list[Candidate]:
    """CUDA ran out of memory on a rank: its crash, and the job stopping for it, are this cause's consequences. Where
    the OOM's line names no host and the launcher's line of that rank's death does (mpirun's ``process rank 1 … on
    node aaron-argo-1``), the cause names that host."""
    out = []
    for s in ev.active(OUT_OF_MEMORY.name):
        rank, host = s.subject.get("rank"), s.subject.get("hostname")
        crashed = of_host_and_rank(ev.active(RANK_CRASHED.name), host, rank)
        subject = dict(s.subject)
        hosts = {c.evidence.get("host") for c in crashed} - {None}
        if host is None and len(hosts) == 1:
            subject["hostname"] = hosts.pop()
        stalled = ev.job_signal(TRAINING_STALLED.name)
        consequences = crashed + ev.active(COLLECTIVE_TIMEOUT.name) + ([stalled] if stalled is not None else [])
        summary = s.message + ("; the rank died and the job stopped with it" if consequences else "")
        leak = ev.gpu_signals(OOM_RISK.name)
        remedy = REMEDY_GPU_LEAK.format(rank="?" if rank is None else rank) if leak else REMEDY_GPU_FULL
        candidate = Candidate(
            GPU_MEMORY_PRESSURE.name,
            base_confidence([s], CORROBORATED, STRONG),
            summary,
            remedy,
            [s],
            consequences + (symptoms(ev) if consequences else []),
            subject,
        )
        out.append(candidate)
    return out


def gpu_memory_causes(ev: Evidence) -> list[Candidate]:
    """``gpu_memory_pressure`` from the GPUs' memory and from the job's out-of-memory lines: one cause per GPU,
    an OOM line on a GPU whose memory ran full (or was forecast to) joining that GPU's cause."""
    measured, logged = gpu_memory(ev), out_of_memory(ev)
    if not measured:
        return logged
    telemetry = measured[0]
    gpus = set(ev.gpu_signals(MEMORY_PRESSURE.name, OOM_RISK.name))
    for oom in logged:
        if ev.subject_gpu(oom.subject) in gpus:
            return [_joined(oom, telemetry)] + [c for c in logged if c is not oom]
    return measured + logged


def _joined(oom: Candidate, telemetry: Candidate) -> Candidate:
    """One cause from the OOM line and the memory measured on its GPU: the measurement (the fill, or the leak
    forecast that came true) is its evidence and ranks it as before; the line and what it killed are what it
    explains; the line's subject names the rank."""
    explains = [*oom.primary, *oom.explains]
    explains += [s for s in telemetry.explains if s not in explains]
    subject = {**telemetry.subject, **oom.subject}
    summary = f"{oom.summary}; {telemetry.summary}"
    return Candidate(oom.cause, telemetry.base, summary, telemetry.remediation, telemetry.primary, explains, subject)


GPU_MEMORY = Rule(GPU_MEMORY_PRESSURE, gpu_memory_causes)
HOST_MEMORY = Rule(HOST_MEMORY_PRESSURE, host_memory)
