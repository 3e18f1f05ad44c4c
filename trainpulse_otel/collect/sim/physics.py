"""The simulated GPU's physics: an H100 SXM's constants and the pure functions that link them.

Why a module of its own: power, temperature, clocks and throttling are the
chain every hardware fault is seen through (a power cap lowers the clocks, a
failing fan heats the GPU until its clocks drop), so each link is one pure
function of its inputs, composed by the GPU model (:mod:`.gpus`).
"""

from __future__ import annotations

import math

from ...samples import THROTTLE_REASONS

GPU_NAME = "NVIDIA H100 80GB HBM3"
MIB = 1024**2
GIB = 1024**3
TIB = 1024**4
GPU_MEMORY_BYTES = 81559 * MIB
GPU_RESERVED_BYTES = 512 * MIB  # driver/context memory NVML counts as used
MAX_SM_CLOCK_MHZ = 1980.0
IDLE_SM_CLOCK_MHZ = 345.0
CLOCK_STEP_MHZ = 15.0
MIN_CLOCK_RATIO = 0.35
POWER_LIMIT_W = 700.0
PEAK_BF16_FLOPS = 989e12  # dense bf16 tensor-core peak of an H100 SXM
#: A healthy H100 SXM's links: PCIe Gen5 x16 trained at its maximum, its 18 NVLinks up, no error counted.
HEALTHY_LINKS: dict[str, int] = {
    "pcie_replay_errors": 0,
    "pcie_link_gen": 5,
    "pcie_link_gen_max": 5,
    "pcie_link_width": 16,
    "pcie_link_width_max": 16,
    "nvlink_crc_errors": 0,
    "nvlink_replay_errors": 0,
    "nvlink_recovery_errors": 0,
    "nvlink_links_down": 0,
}

# Power: idle + busy * (static-under-load + dynamic * clock^3 * tensor intensity).
IDLE_POWER_W = 70.0
SAVE_POWER_W = 95.0  # SMs idle, HBM and copy engines busy during a checkpoint
LOADED_STATIC_W = 220.0
DYNAMIC_W = 370.0
POWER_CAP_HEADROOM = 0.985  # the power governor keeps a little under the cap

# Temperature: first-order towards inlet + R_th * power.
THERMAL_TAU_S = 12.0
INLET_C = 27.0
R_TH_C_PER_W = 0.060
SLOWDOWN_C = 87.0  # sw thermal slowdown engages
HW_SLOWDOWN_C = 87.5  # hardware slowdown joins in when the software controller lags
RELEASE_C = 86.0  # slowdown releases below this (hysteresis)


def gpu_power(busy: float, clock_ratio: float, intensity: float) -> float:
    """Board power for a utilisation, a clock (fraction of max) and tensor-core intensity."""
    return IDLE_POWER_W + busy * (LOADED_STATIC_W + DYNAMIC_W * clock_ratio**3 * intensity)


def clock_for_power(cap_w: float, busy: float, intensity: float) -> float:
    """The clock ratio at which a GPU this busy draws ``cap_w`` (what the governor picks)."""
    busy = max(busy, 0.05)
    cube = ((cap_w - IDLE_POWER_W) / busy - LOADED_STATIC_W) / (DYNAMIC_W * intensity)
    return min(1.0, max(MIN_CLOCK_RATIO, cube ** (1 / 3) if cube > 0 else 0.0))


def thermal_clock_ratio(temp_c: float) -> float:
    """The sw thermal controller's clock: deeper the further past the slowdown point."""
    mhz = MAX_SM_CLOCK_MHZ - 90.0 * (temp_c - 81.5)
    return min(1650.0, max(1350.0, mhz)) / MAX_SM_CLOCK_MHZ


def quantize_clock(ratio: float) -> float:
    """SM clocks move in 15 MHz steps."""
    return round(ratio * MAX_SM_CLOCK_MHZ / CLOCK_STEP_MHZ) * CLOCK_STEP_MHZ


def ordered_reasons(reasons: set[str]) -> tuple[str, ...]:
    """Throttle reasons in the contract's order, as the parser returns them."""
    return tuple(r for r in THROTTLE_REASONS if r in reasons)


def memory_pressure(frac: float) -> float:
    """0 below 94 % of GPU memory, rising to 1 at 98 %: how often the allocator retries."""
    return min(1.0, max(0.0, (frac - 0.94) / 0.04))


def approach(dt: float, tau: float, settle: bool) -> float:
    """How far a first-order quantity moves toward its target in ``dt`` (all the way when settling at start)."""
    return 1.0 if settle else 1.0 - math.exp(-dt / tau)
