"""The simulated GPUs: each board's traits and state, its clock governor, and what NVML reads off it.

Utilisation comes from the step's time budget, power from utilisation and
clock, temperature from power (first order, through the board's thermal
resistance and a slowly drifting inlet), and the clock back from temperature
and the power cap — so a fault on any link shows on all of them together.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass

from ...samples import GpuSample
from .job import COMM_UTIL_WEIGHT, P_TEMP_BLIP
from .knobs import Knobs
from .physics import (
    CLOCK_STEP_MHZ,
    GPU_MEMORY_BYTES,
    GPU_NAME,
    GPU_RESERVED_BYTES,
    HEALTHY_LINKS,
    HW_SLOWDOWN_C,
    IDLE_POWER_W,
    IDLE_SM_CLOCK_MHZ,
    INLET_C,
    MAX_SM_CLOCK_MHZ,
    MIB,
    POWER_CAP_HEADROOM,
    R_TH_C_PER_W,
    RELEASE_C,
    SAVE_POWER_W,
    SLOWDOWN_C,
    clock_for_power,
    gpu_power,
    ordered_reasons,
    quantize_clock,
    thermal_clock_ratio,
)
from .training import Step


@dataclass(slots=True)
class GpuState:
    """One GPU's fixed traits and its slowly changing state."""

    index: int
    uuid: str
    inlet_c: float
    r_th: float
    mem_frac: float  # healthy steady-state memory use
    temp_c: float
    throttled: bool = False
    busy: float = 0.96  # last tick's utilisation: the power governor's input


@dataclass(frozen=True, slots=True)
class Heat:
    """One tick's thermal context: the inlet's drift, how far temperatures move, and whether they start settled."""

    drift: float
    alpha: float
    settle: bool


def new_gpu(rng: random.Random, index: int) -> GpuState:
    """Fixed traits: inlet warmer further back in the chassis, a little part-to-part spread."""
    inlet = INLET_C + 0.4 * index + rng.uniform(-0.8, 0.8)
    r_th = R_TH_C_PER_W * math.exp(rng.gauss(0.0, 0.02))
    mem_frac = rng.uniform(64.0e9, 68.0e9) / GPU_MEMORY_BYTES
    temp = inlet + r_th * gpu_power(0.96, 1.0, 1.0)
    return GpuState(index, _uuid(rng), inlet, r_th, mem_frac, temp)


def _uuid(rng: random.Random) -> str:
    h = f"{rng.getrandbits(128):032x}"
    return f"GPU-{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


def governed_clock(gpu: GpuState, cap_w: float, intensity: float) -> tuple[float, tuple[str, ...]]:
    """This tick's clock ratio and throttle reasons, from temperature and the power cap."""
    if gpu.temp_c >= SLOWDOWN_C:
        gpu.throttled = True
    elif gpu.temp_c < RELEASE_C:
        gpu.throttled = False
    ratio, reasons = 1.0, set()
    if gpu.throttled:
        ratio = thermal_clock_ratio(gpu.temp_c)
        reasons.add("sw_thermal")
        if gpu.temp_c >= HW_SLOWDOWN_C:
            reasons.update(("hw_slowdown", "hw_thermal"))
    budget = cap_w * POWER_CAP_HEADROOM
    if gpu_power(gpu.busy, ratio, intensity) > budget:
        ratio = min(ratio, clock_for_power(budget, gpu.busy, intensity))
        reasons.add("sw_power_cap")
    return ratio, ordered_reasons(reasons)


def busy_gpus(
    rng: random.Random,
    gpus: list[GpuState],
    step: Step,
    k: Knobs,
    clocks: tuple[float, ...],
    reasons: tuple[tuple[str, ...], ...],
    intensity: float,
    heat: Heat,
) -> tuple[GpuSample, ...]:
    """Training GPUs: utilisation from the step's time budget, power from utilisation and clock."""
    out = []
    for gpu in gpus:
        g = gpu.index
        kernels = step.compute[g] * k.kernel_density / k.rank_slowdown[g]  # a starved GPU idles
        comm = COMM_UTIL_WEIGHT * (step.allreduce[g] + step.sync[g])
        busy = min(1.0, max(0.0, (kernels + comm) / step.wall_ms + rng.gauss(0.0, 0.006)))
        gpu.busy = busy
        power = min(gpu_power(busy, clocks[g], intensity) + rng.gauss(0.0, 6.0), k.power_cap_w * 0.998)
        clock_mhz = quantize_clock(clocks[g]) - (CLOCK_STEP_MHZ if rng.random() < 0.05 else 0.0)
        out.append(
            _read_out(
                rng,
                gpu,
                k,
                heat,
                len(gpus),
                util=busy * 100.0,
                mem_bw=busy * 40.0 * (0.5 + 0.5 * intensity),
                used=k.memory_frac[g] * GPU_MEMORY_BYTES,
                power=power,
                clock=clock_mhz,
                reasons=reasons[g],
            )
        )
    return tuple(out)


def idle_gpus(rng: random.Random, gpus: list[GpuState], k: Knobs, saving: bool, heat: Heat) -> tuple[GpuSample, ...]:
    """Idle GPUs: memory still held during a checkpoint save, released once the job died."""
    out = []
    power_w = SAVE_POWER_W if saving else IDLE_POWER_W
    for gpu in gpus:
        gpu.busy, gpu.throttled = 0.0, False
        used = k.memory_frac[gpu.index] * GPU_MEMORY_BYTES if saving else GPU_RESERVED_BYTES
        out.append(
            _read_out(
                rng,
                gpu,
                k,
                heat,
                len(gpus),
                util=0.0,
                mem_bw=0.0,
                used=used,
                power=power_w + rng.gauss(0.0, 2.0),
                clock=IDLE_SM_CLOCK_MHZ,
                reasons=("gpu_idle",),
            )
        )
    return tuple(out)


#: A GPU spinning in an NCCL collective that never completes: the kernel runs (NVML counts it busy)
#: on a few SMs, polling memory, so the board draws little more than idle.
SPIN_POWER_W = 125.0


def hung_gpus(
    rng: random.Random,
    gpus: list[GpuState],
    k: Knobs,
    hung: tuple[int, ...],
    heat: Heat,
    released: tuple[int, ...] = (),
) -> tuple[GpuSample, ...]:
    """A job stuck on the ranks of ``hung``: their GPUs idle, the others spin inside the all-reduce. The GPUs
    of ``released`` (of ``hung``) lost their process: its memory is freed."""
    out = []
    for gpu in gpus:
        stuck = gpu.index in hung
        gpu.busy, gpu.throttled = (0.0 if stuck else 1.0), False
        out.append(
            _read_out(
                rng,
                gpu,
                k,
                heat,
                len(gpus),
                util=0.0 if stuck else 100.0,
                mem_bw=0.0 if stuck else 2.0,
                used=GPU_RESERVED_BYTES if gpu.index in released else k.memory_frac[gpu.index] * GPU_MEMORY_BYTES,
                power=(IDLE_POWER_W if stuck else SPIN_POWER_W) + rng.gauss(0.0, 3.0),
                clock=IDLE_SM_CLOCK_MHZ if stuck else MAX_SM_CLOCK_MHZ,
                reasons=("gpu_idle",) if stuck else (),
            )
        )
    return tuple(out)


def _read_out(
    rng: random.Random,
    gpu: GpuState,
    k: Knobs,
    heat: Heat,
    count: int,
    *,
    util: float,
    mem_bw: float,
    used: float,
    power: float,
    clock: float,
    reasons: tuple[str, ...],
) -> GpuSample:
    """Read the GPU out the way NVML reports it, then heat it with this tick's power.

    The reading is the temperature the clocks and throttle reasons of this
    tick were chosen at, so the three always agree. ``count`` GPUs share one
    node's chance of a sensor blip.
    """
    target = gpu.inlet_c + heat.drift + gpu.r_th * k.cooling_loss[gpu.index] * power
    if heat.settle:
        gpu.temp_c = target
    reading = gpu.temp_c + rng.gauss(0.0, 0.25)
    gpu.temp_c += (target - gpu.temp_c) * heat.alpha
    if rng.random() < P_TEMP_BLIP / count:
        reading += 2.5 + 1.5 * rng.random()  # a one-tick sensor blip
    used_mib = min(GPU_MEMORY_BYTES // MIB, int(used / MIB) + (rng.random() < 0.1))
    return GpuSample(
        index=gpu.index,
        uuid=gpu.uuid,
        name=GPU_NAME,
        utilization_percent=float(min(100, max(0, round(util)))),
        memory_utilization_percent=float(min(100, max(0, round(mem_bw)))),
        memory_used_bytes=used_mib * MIB,
        memory_total_bytes=GPU_MEMORY_BYTES,
        temperature_celsius=float(round(reading)),
        power_watts=round(max(0.0, power), 3),
        power_limit_watts=float(k.power_cap_w),
        sm_clock_mhz=float(clock),
        max_sm_clock_mhz=MAX_SM_CLOCK_MHZ,
        throttle_reasons=reasons,
        ecc_uncorrected_errors=0,
        **{**HEALTHY_LINKS, "pcie_link_width": round(k.pcie_width[gpu.index])},
    )
