"""CUDA out of memory, as PyTorch's caching allocator words it in each era; sizes in bytes.

- PyTorch ≥ 2.1: ``CUDA out of memory. Tried to allocate 2.00 GiB. GPU 3 has a total capacity of 79.15 GiB of
  which 1.02 GiB is free. [Process 123 has … memory in use.] [Including non-PyTorch memory, this process has
  78.10 GiB memory in use.] Of the allocated memory 75.2 GiB is allocated by PyTorch, and 1.3 GiB is reserved by
  PyTorch but unallocated.`` (2.1 wrote ``capacty``).
- PyTorch 1.4–2.0: ``Tried to allocate 2.26 GiB (GPU 0; 6.00 GiB total capacity; 781.59 MiB already allocated;
  3.03 GiB free; 1.24 GiB reserved in total by PyTorch)``; before 1.4 ``… 4.68 MiB cached)``.
- The CUDA runtime's own ``CUDA error: out of memory`` (no sizes), and every other wording an accelerator's
  allocator failing takes (:data:`OTHER_OOM`; each form and its source: docs/logs.md): PyTorch's before 1.0,
  ROCm's, Ascend's, Apple's, Intel's and Gaudi's allocators, NCCL's and Marian's CUDA failures, fairseq's recovered
  OOM, MindSpore's, TensorFlow's and XLA's ``RESOURCE_EXHAUSTED``/``OOM when allocating``, the TPU compiler's HBM,
  Caffe's and MXNet's checks, Jittor's ``GPU memory is overflow``, Paddle's, cuBLAS's and cuDNN's ``*_STATUS_ALLOC_FAILED``, Metal's, CuPy's, any
  ``OutOfMemoryError`` and the driver's and runtime's error names. The host's OOM killer (and Ray's node low on
  memory) is no allocation failure of the job's: :mod:`.fatal` tells it.

Pure: :func:`cuda_oom` reads one line; :class:`UnplacedOom` holds one for a line after it naming its GPU.
"""

from __future__ import annotations

import re
from dataclasses import replace
from typing import Any

from .failure import Failure
from .lines import nccl_device

SIZE = r"(\d+(?:\.\d+)?) (bytes|KiB|MiB|GiB|TiB|PiB)"
UNITS = {"bytes": 1, "KiB": 2**10, "MiB": 2**20, "GiB": 2**30, "TiB": 2**40, "PiB": 2**50}
REQUESTED = re.compile(r"Tried to allocate " + SIZE)
NEW_GPU = re.compile(r"GPU (\d+) has a total capac(?:i)?ty of " + SIZE + r" of which " + SIZE + " is free")
IN_USE = re.compile(r"this process has " + SIZE + " memory in use")
ALLOCATED = re.compile(r"Of the allocated memory " + SIZE + r" is allocated by PyTorch, and " + SIZE + " is reserved")
OLD = re.compile(
    r"\(GPU (\d+); " + SIZE + r" total capacity; " + SIZE + r" already allocated; " + SIZE + r" free;"
    r"(?: " + SIZE + r" (?:reserved in total by PyTorch|cached))?"
)


#: An accelerator's allocator failing, in the words of every framework and runtime (see the module docstring).
OTHER_OOM = re.compile(
    r"(?:CUDA(?: Error:| failure \d+:| error \d+ '| driver error:)?|HIP|NPU|XPU|MPS backend|cuda runtime error \(2\) :|error=2 :|Cuda failure '|"
    r"CUDA_ERROR_OUT_OF_MEMORY:|"
    r"[Rr]an|\(2 vs\. 0\)|cudaMalloc failed:)\s*out of memory|\bout of memory\b.{0,200}?\.cu:\d+|\bEL0004: Failed to allocate|"
    r"rtMalloc\b.{0,60}?out of memory|OOM when allocating|ResourceExhaustedError\b.{0,80}?(?:OOM|[Mm]emory|"
    r"allocat)|Resource exhausted: .{0,40}?(?:memory|allocat)|[Oo]ut of memory (?:to allocate|allocating) [\d,]+ bytes|"
    r"RESOURCE_EXHAUSTED:.*memory|RESOURCE_EXHAUSTED: Failed to allocate|Out of memory error on GPU|[Mm]emory isn't enough|"
    r"\b(?:CUBLAS|CUDNN)_STATUS_ALLOC_FAILED\b|\bOutOfMemoryError\b|\bCUDA_ERROR_OUT_OF_MEMORY\b|cudaErrorMemoryAllocation|"
    r"\bHIP_ERROR_OutOfMemory\b|\bUR_RESULT_ERROR_OUT_OF_(?:DEVICE_MEMORY|RESOURCES)\b|"
    r"\b(?:GPU|[Dd]evice)\b.{0,60}?\bout of memory\b|GPU memory is overflow|\[METAL\].{0,80}?Insufficient Memory|MODULE:(?:SYNHELPER|PT_DEVMEM)\b.{0,40}?Allocation\b.{0,60}?failed"
)
#: The words one of which an OOM line of any form holds (the failure scanner's cheap test before the regexes).
OOM_MARKS = ("out of memory", "Out of memory", "OOM when allocating", "ResourceExhausted", "RESOURCE_EXHAUSTED", "Resource exhausted",
             "emory isn't enough", "_STATUS_ALLOC_FAILED", " Allocation ", "Insufficient Memory",
             "OutOfMemoryError", "CUDA_ERROR_OUT_OF_MEMORY", "cudaErrorMemoryAllocation", "EL0004", "memory is overflow",
             "HIP_ERROR_OutOfMemory", "UR_RESULT_ERROR_OUT_OF_")  # fmt: skip
#: The GPU an OOM line names in another framework's words: ``on GPU #2``, ``device:GPU:0``, ``GPU_0_bfc``, ``cuda:3``,
#: ROCm's ``GPU 0 has a total capacity``, Paddle's ``Out of memory error on GPU 0``, Ascend's ``(NPU 2; 60.97 GiB``.
OTHER_GPU = re.compile(
    r"GPU #(\d+)|device:GPU:(\d+)|GPU_(\d+)_bfc|cuda:(\d+)|/gpu:(\d+)|GPU (\d+) has a total capac|on GPU (\d+)\b"
    r"|\((?:NPU|XPU|GPU) (\d+);|\bGPU=(\d+) ;|on device ordinal (\d+)|\bdevice_id[=:](\d+)|\bchipId:(\d+)"
)
#: OOM lines that name no device, and the lines after them within which one does: TensorFlow's ``OOM when allocating
#: tensor with shape[…]`` (its op's ``[[Node: … _device="/job:localhost/replica:0/task:0/gpu:0"``, the allocator's
#: ``Allocator (GPU_0_bfc)``); Ascend's ``EL0004: Failed to allocate memory.``, ``rtMalloc … out of memory`` (its
#: error block's ``device(chipId:7``, ``device_id=7``).
UNPLACED = (("OOM when allocating", 3), ("EL0004", 8), ("rtMalloc", 8))
#: The GPU of a PyTorch message cut short after it: ``Tried to allocate 86.00 MiB (GPU 0;``.
CUT_GPU = re.compile(r"\(GPU (\d+);")
#: Lines about the host's memory, not the accelerator's.
HOST = ("Killed process", "oom-kill", "cgroup", "oom_kill", "low on memory")
#: TensorFlow's allocator saying a failed attempt is none: ``Allocator (GPU_0_bfc) ran out of memory trying to allocate
#: 3.46GiB with freed_by_count=0. The caller indicates that this is not a failure, but may mean …`` (it falls back).
NOT_FAILURE = "this is not a failure"


def size(number: str, unit: str) -> int:
    """``"2.00", "GiB"`` → bytes (the message rounds to two decimals; so does this)."""
    return round(float(number) * UNITS[unit])


def cuda_oom(text: str) -> tuple[dict[str, Any], int | None] | None:
    """The sizes an out-of-memory line gives (``requested_bytes``, ``total_bytes``, ``free_bytes``,
    ``allocated_bytes``, ``reserved_bytes`` — reserved by PyTorch in all —, and where given ``in_use_bytes``,
    ``reserved_unallocated_bytes``) and the GPU it names; None if it is none."""
    if "CUDA out of memory" not in text:
        if "CUDA error: out of memory" in text:
            return {"error": "CUDA error: out of memory"}, None
        return _other(text)
    details: dict[str, Any] = {}
    if (found := REQUESTED.search(text)) is not None:
        details["requested_bytes"] = size(*found.groups())
    gpu: int | None = None
    if (new := NEW_GPU.search(text)) is not None:
        gpu = int(new[1])
        details["total_bytes"], details["free_bytes"] = size(new[2], new[3]), size(new[4], new[5])
        if (in_use := IN_USE.search(text)) is not None:
            details["in_use_bytes"] = size(*in_use.groups())
        if (held := ALLOCATED.search(text)) is not None:
            allocated, unallocated = size(held[1], held[2]), size(held[3], held[4])
            details["allocated_bytes"], details["reserved_unallocated_bytes"] = allocated, unallocated
            details["reserved_bytes"] = allocated + unallocated
    elif (old := OLD.search(text)) is None and (cut := CUT_GPU.search(text)) is not None:
        gpu = int(cut[1])  # a message cut (or wrapped) after its GPU: ``… (GPU 0;``
    elif old is not None:
        gpu = int(old[1])
        details["total_bytes"], details["allocated_bytes"] = size(old[2], old[3]), size(old[4], old[5])
        details["free_bytes"] = size(old[6], old[7])
        if old[8] is not None:
            details["reserved_bytes"] = size(old[8], old[9])
    return details, gpu


def _other(text: str) -> tuple[dict[str, Any], int | None] | None:
    """Another framework's or runtime's out-of-memory line (:data:`OTHER_OOM`): its words, and the GPU it names."""
    if (match := OTHER_OOM.search(text)) is None or any(words in text for words in HOST) or NOT_FAILURE in text:
        return None
    details: dict[str, Any] = {"error": text[max(0, match.start() - 40) :].strip()[:200]}
    if (found := REQUESTED.search(text)) is not None:
        details["requested_bytes"] = size(*found.groups())
    if (origin := nccl_device(text)) is not None:  # NCCL's own allocation: its prefix names the host and device
        details["host"] = origin[0]
        return details, origin[1]
    return details, other_gpu(text)


def other_gpu(text: str) -> int | None:
    """The GPU a line names in another framework's words (:data:`OTHER_GPU`), or None."""
    gpu = OTHER_GPU.search(text)
    return None if gpu is None else int(next(g for g in gpu.groups() if g is not None))


class UnplacedOom:
    """An OOM line that names no device (:data:`UNPLACED`), held for the lines after it that may name its GPU; told
    when one does, after them, or when the scanner tells another failure or ends (the OOM came first)."""

    def __init__(self) -> None:
        self._told: list[Failure] = []
        self._left = 0

    def hold(self, told: list[Failure], text: str) -> list[Failure]:
        """``told``, the OOM ``text`` says, now; or ``[]`` while it waits for its GPU."""
        lines = next((n for words, n in UNPLACED if words in text), 0)
        if not told or not lines or any(f.gpu_index is not None for f in told):
            return told
        self._told, self._left = [replace(f, text=text.strip()) for f in told], lines
        return []

    def feed(self, text: str) -> list[Failure]:
        """The held OOM with the GPU this line names, or as it is after its last line; ``[]`` while it waits."""
        if not self._told:
            return []
        gpu, self._left = other_gpu(text), self._left - 1
        if gpu is None and self._left > 0:
            return []
        told, self._told = self._told, []
        return told if gpu is None else [replace(f, gpu_index=gpu) for f in told]

    def release(self) -> list[Failure]:
        """The held OOM as it is (``[]`` if none)."""
        told, self._told = self._told, []
        return told
