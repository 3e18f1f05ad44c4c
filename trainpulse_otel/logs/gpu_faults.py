"""A GPU failing, told in words other than an XID: lost from the bus, a fatal PCIe error, uncorrectable ECC.

The driver's XID lines are :mod:`.xid`'s. These are the other lines a failing GPU leaves in a job's output or
the kernel log around it: ``NVRM: GPU 0000:3b:00.0: GPU has fallen off the bus.`` (and the older ``…installed in
this system has fallen off the bus``), ``RmInitAdapter failed`` (the driver cannot bring the GPU up),
``nvidia-smi``'s ``Unable to determine the device handle for GPU 0000:3B:00.0: Unknown Error``, the kernel's
``AER: … Uncorrected (Fatal) error`` on the GPU's PCIe link, CUDA's ``uncorrectable ECC error encountered``, and
the GSP firmware's ``GSP RM heartbeat timed out``, CUDA's ``uncorrectable NVLink error detected``, nvidia-smi's
``GPU is lost. Reboot the system to recover this GPU`` and ``Double Bit ECC`` counts; AMD's: ROCm's runtime's
``HW Exception by GPU node-9 (Agent handle: …) reason :GPU Hang``, the amdgpu driver's ``uncorrectable hardware
error(ERREVENT_ATHUB_INTERRUPT) detected!``.
:func:`gpu_fault` reads one line into the details of a ``gpu_fault`` event: ``fault`` (what failed, in words)
and, where the line gives them, the ``pci`` address and the ``gpu_index``. Corrected errors are not faults.
Pure.
"""

from __future__ import annotations

import re
from typing import Any

#: (words a line holds, the fault they tell), first match wins.
FAULTS = (
    ("fallen off the bus", "GPU has fallen off the bus"),
    ("RmInitAdapter failed", "the driver cannot initialise the GPU (RmInitAdapter failed)"),
    ("rm_init_adapter failed", "the driver cannot initialise the GPU (RmInitAdapter failed)"),
    ("NV_ERR_RESET_REQUIRED", "the GPU needs a reset (NV_ERR_RESET_REQUIRED)"),
    ("couldn't communicate with the NVIDIA driver", "nvidia-smi cannot reach the driver (a GPU or its driver lost)"),
    # DCGM's health and diagnostic messages (dcgm_errors.h)
    ("volatile double-bit ECC error", "double-bit (uncorrectable) ECC error (DCGM)"),
    ("row remapping failed", "uncorrectable memory errors and row remapping failed (DCGM)"),
    ("has uncorrectable memory errors", "uncorrectable memory errors, row remappings pending (DCGM)"),
    ("had an uncontained error", "uncontained ECC error (DCGM)"),
    ("requires a reset to recover from a fault", "the GPU needs a reset (DCGM)"),
    ("NvLink link", "an NVLink link down or failing (DCGM)"),
    ("Unable to determine the device handle for GPU", "nvidia-smi cannot reach the GPU (Unknown Error)"),
    ("uncorrectable ECC error", "uncorrectable ECC error"),
    ("GSP RM heartbeat timed out", "the GPU's GSP firmware stopped answering (heartbeat timed out)"),
    ("uncorrectable NVLink error", "uncorrectable NVLink error"),
    ("GPU is lost", "the GPU is lost (a reboot recovers it)"),
    ("Double Bit ECC", "double-bit (uncorrectable) ECC error"),
    ("HW Exception by GPU", "the GPU raised a hardware exception (ROCm's runtime: HW Exception by GPU)"),
    ("uncorrectable hardware error", "uncorrectable hardware error (amdgpu)"),
)
#: ``dcgmi diag``'s table: a test failed on a GPU (``| GPU Memory | Fail - GPU: 0 |``, ``|  | Fail - GPUs: 2, 5 |``).
DCGM_DIAG_FAIL = re.compile(r"\|\s*Fail - GPUs?: (?P<gpu>\d+)")
#: The kernel's PCIe Advanced Error Reporting on an uncorrected (fatal or non-fatal) error.
AER = re.compile(
    r"AER: (?:Multiple )?Uncorrect(?:ed|able)|severity=Uncorrect(?:ed|able)|Uncorrect(?:ed|able) \((?:Non-)?Fatal\)"
)  # (Linux 6.5 renamed "Uncorrected" "Uncorrectable")
#: A PCI address: ``0000:3b:00.0``, ``00000000:3B:00.0``, ``PCI:0000:3b:00``.
PCI = re.compile(r"\b(?:PCI:)?((?:[0-9A-Fa-f]{4}){1,2}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2})(?:\.[0-7])?\b")
#: The GPU a CUDA message names: ``on device 3``, ``cuda:3``, ``GPU 3``.
GPU_INDEX = re.compile(r"\b(?:GPU|cuda:|device)\s?(\d{1,2})\b")


#: Words of a GPU failing without an XID (:mod:`.gpu_faults`).
GPU_MARKS = (
    "fallen off the bus",
    "RmInitAdapter",
    "device handle for GPU",
    "uncorrectable ECC",
    "AER",
    "GSP RM",
    "NVLink error",
    "GPU is lost",
    "Double Bit ECC",
    "HW Exception by GPU",
    "rm_init_adapter",
    "NV_ERR_RESET",
    "communicate with the NVIDIA driver",
    "double-bit ECC",
    "row remapping failed",
    "uncontained error",
    "requires a reset",
    "NvLink link",
    "uncorrectable hardware error",
    "uncorrectable memory errors",
    "Fail - GPU",
)


def gpu_fault(text: str) -> dict[str, Any] | None:
    """The details of the GPU fault ``text`` tells (``fault``, and ``pci`` / ``gpu_index`` where given), or None."""
    fault = next((what for words, what in FAULTS if words in text), None)
    if fault is None and "AER" in text and AER.search(text) is not None:
        fault = "uncorrected PCIe error (AER)"
    if fault is None and (failed := DCGM_DIAG_FAIL.search(text)) is not None:
        return {"fault": "a DCGM diagnostic test failed on the GPU (dcgmi diag)", "gpu_index": int(failed["gpu"])}
    if fault is None:
        return None
    details: dict[str, Any] = {"fault": fault}
    if (pci := PCI.search(text)) is not None:
        details["pci"] = pci[1].lower()[-12:] if len(pci[1]) > 12 else pci[1].lower()
    elif (index := GPU_INDEX.search(text)) is not None:
        details["gpu_index"] = int(index[1])
    return details
