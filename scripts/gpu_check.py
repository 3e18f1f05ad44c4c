"""Real-GPU acceptance: what TrainPulse reads of every GPU, checked against a second source, on one machine.

Five checks, one table, a non-zero exit on any disagreement (docs/gpu-validation.md says what each rests on):

1. **NVML against nvidia-smi**: both collectors (``NvmlCollector``, ``SmiCollector``) read every GPU; each field
   they share must agree within its resolution (or its drift between two reads, for readings that move).
2. **XID events**: NVML's XID event set registers on every GPU (else the kernel log is the documented fallback).
3. **ECC and remapped rows**: each query answers, or falls back to "unknown" (None) the same way in both tools.
4. **MFU**: a bf16 training loop with ``TrainingMonitor``: its TFLOP/s (FLOPs per token from the model × tokens/s)
   against the FLOP/s the loop counts itself (``torch.utils.flop_counter``) over its own synchronised step times,
   and its MFU against that over the peak table's entry for the GPU.
5. **The daemon**: ``trainpulse daemon -mode auto`` picks NVML, ``/metrics`` shows every GPU, ``top -once`` draws
   them.

``--fake`` runs the same checks against the fake ``pynvml`` of the test suite and an ``nvidia-smi`` that prints
the same GPUs in nvidia-smi's own format (CI runs that); the loop then runs on the CPU.

    scripts/gpu-check [--fake] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
MIB = 1 << 20
OK, FAIL, SKIP = "ok", "FAIL", "skip"


@dataclass
class Row:
    """One line of the table."""

    check: str
    item: str
    seen: str
    against: str
    verdict: str


# --------------------------------------------------------------------------- the fake machine

FAKE_GPUS = """
from tests.fakes.fake_pynvml import FakeGpu

GPUS = [
    FakeGpu(pci_bus_id="00000000:18:00.0"),
    FakeGpu(
        uuid="GPU-0a7d2f4e-6c1b-4e8a-9d3f-2b5c8e1f7a60", temperature=71, power_mw=455_120, sm_clock=1755,
        reasons=0x4, ecc_corrected=3, remapped_rows=(2, 0, 1, 0), pci_bus_id="00000000:2A:00.0",
    ),
]
"""
FAKE_PYNVML = """
import sys
from fake_gpus import GPUS
from tests.fakes.fake_pynvml import make_fake_pynvml
sys.modules[__name__] = make_fake_pynvml(GPUS)
"""
FAKE_SMI = '''#!{python}
"""nvidia-smi --query-gpu=… --format=csv,noheader,nounits for the fake GPUs, as the real one prints it."""
import sys
sys.path[:0] = [{tmp!r}, {root!r}]
from fake_gpus import GPUS

def cell(i, g, field):
    values = {{
        "index": i, "uuid": g.uuid, "name": g.name, "utilization.gpu": g.util_gpu,
        "utilization.memory": g.util_memory, "memory.used": g.memory_used >> 20, "memory.total": g.memory_total >> 20,
        "temperature.gpu": g.temperature, "power.draw": f"{{g.power_mw / 1000:.2f}}",
        "power.limit": f"{{g.power_limit_mw / 1000:.2f}}", "clocks.sm": g.sm_clock, "clocks.max.sm": g.max_sm_clock,
        "clocks_event_reasons.active": f"0x{{g.reasons:016x}}",
        "ecc.errors.uncorrected.volatile.total": g.ecc_uncorrected,
        "ecc.errors.corrected.volatile.total": g.ecc_corrected,
        "remapped_rows.pending": "Yes" if g.remapped_rows[2] else "No",
        "remapped_rows.failure": "Yes" if g.remapped_rows[3] else "No",
    }}
    return str(values[field])

query = next(a.split("=", 1)[1] for a in sys.argv[1:] if a.startswith("--query-gpu="))
for i, g in enumerate(GPUS):
    print(", ".join(cell(i, g, f) for f in query.split(",")))
'''


@contextmanager
def fake_machine() -> Iterator[dict[str, str]]:
    """A temporary folder holding the fake ``pynvml`` and ``nvidia-smi``, first on the paths of this process and
    of the processes it starts; yields the environment for those."""
    with tempfile.TemporaryDirectory(prefix="gpu-check-") as tmp:
        Path(tmp, "fake_gpus.py").write_text(FAKE_GPUS)
        Path(tmp, "pynvml.py").write_text(FAKE_PYNVML)
        smi = Path(tmp, "nvidia-smi")
        smi.write_text(FAKE_SMI.format(python=sys.executable, tmp=tmp, root=str(ROOT)))
        smi.chmod(0o755)
        sys.path[:0] = [tmp, str(ROOT)]
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join([tmp, str(ROOT), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
        env["PATH"] = tmp + os.pathsep + env.get("PATH", "")
        saved = dict(os.environ)
        os.environ.update(env)
        try:
            yield env
        finally:
            os.environ.clear()
            os.environ.update(saved)


# --------------------------------------------------------------------------- 1-3: the collectors side by side

#: GpuSample field -> (tolerance, what it rests on). Exact fields agree to the unit nvidia-smi prints; readings
#: that move between two reads a fraction of a second apart agree within that drift.
FIELDS: dict[str, tuple[Callable[[Any, Any], bool], str]] = {
    "uuid": (lambda a, b: a == b, "exact"),
    "name": (lambda a, b: a == b, "exact"),
    "memory_total_bytes": (lambda a, b: a // MIB == b // MIB, "nvidia-smi prints MiB"),
    "memory_used_bytes": (lambda a, b: abs(a - b) <= 256 * MIB, "MiB, ±256 MiB of allocator drift"),
    "power_limit_watts": (lambda a, b: abs(a - b) <= 0.01, "nvidia-smi prints 0.01 W"),
    "max_sm_clock_mhz": (lambda a, b: a == b, "exact MHz"),
    "temperature_celsius": (lambda a, b: abs(a - b) <= 2, "1 °C, ±2 °C between reads"),
    "power_watts": (lambda a, b: abs(a - b) <= max(15.0, 0.1 * max(a, b)), "±10 % (≥ 15 W): power moves fast"),
    "sm_clock_mhz": (lambda a, b: abs(a - b) <= 0.15 * max(a, b), "±15 %: boost clocks move"),
    "utilization_percent": (lambda a, b: abs(a - b) <= 15, "±15 points: a sampled duty cycle"),
    "memory_utilization_percent": (lambda a, b: abs(a - b) <= 15, "±15 points: a sampled duty cycle"),
    "ecc_uncorrected_errors": (lambda a, b: a == b, "exact count"),
    "ecc_corrected_errors": (lambda a, b: a == b, "exact count"),
    "remapped_rows_pending": (lambda a, b: a == b, "exact flag"),
    "remapped_rows_failed": (lambda a, b: a == b, "exact flag"),
}
MEMORY_FAULTS = ("ecc_uncorrected_errors", "ecc_corrected_errors", "remapped_rows_pending", "remapped_rows_failed")


def compare(nvml: Any, smi: Any) -> list[Row]:
    """One GPU's shared fields, NVML against nvidia-smi."""
    rows = []
    for name, (agree, basis) in FIELDS.items():
        a, b = getattr(nvml, name), getattr(smi, name)
        check = "ecc/remap" if name in MEMORY_FAULTS else "nvml=smi"
        if a is None and b is None:
            verdict = OK if name in MEMORY_FAULTS else SKIP  # both say "unknown": the documented fallback
        elif a is None or b is None:
            verdict = FAIL
        else:
            verdict = OK if agree(a, b) else FAIL
        rows.append(Row(check, f"GPU {nvml.index} {name}", repr(a), f"{b!r} ({basis})", verdict))
    rows.append(_reasons_row(nvml, smi))
    return rows


def _reasons_row(nvml: Any, smi: Any) -> Row:
    """Throttle reasons are instantaneous: a difference is reported, and fails only if one side cannot read them."""
    a, b = nvml.throttle_reasons, smi.throttle_reasons
    verdict = FAIL if (a is None) != (b is None) else OK
    note = "same" if a == b else "differ between reads (instantaneous)"
    return Row("nvml=smi", f"GPU {nvml.index} throttle_reasons", repr(a), f"{b!r} ({note})", verdict)


def collectors_side_by_side() -> list[Row]:
    """Checks 1-3: both collectors, each GPU's fields, the XID event set."""
    from trainpulse_otel.collect.nvml import NvmlCollector
    from trainpulse_otel.collect.smi import SmiCollector

    if not NvmlCollector.available():
        return [Row("nvml=smi", "NVML", "no GPU through NVML", "-", FAIL)]
    nvml = NvmlCollector()
    try:
        ours = {g.index: g for g in nvml.collect(time.time()).gpus or ()}
        smi_ok = SmiCollector.available()
        theirs = {g.index: g for g in SmiCollector().collect(time.time()).gpus or ()} if smi_ok else {}
    finally:
        nvml.close()
    rows = [
        Row("nvml=smi", "GPUs", str(sorted(ours)), str(sorted(theirs)), OK if ours.keys() == theirs.keys() else FAIL)
    ]
    for index, sample in sorted(ours.items()):
        if index in theirs:
            rows.extend(compare(sample, theirs[index]))
        hears = sample.xid_errors is not None
        rows.append(Row("xid", f"GPU {index} XID event set", "registered" if hears else "not registered",
                        "kernel log is the fallback", OK if hears else FAIL))  # fmt: skip
    return rows


# --------------------------------------------------------------------------- 4: MFU of a real loop


def loop_mfu(fake: bool, gpu_name: str | None) -> list[Row]:
    """Check 4: the monitor's TFLOP/s and MFU against what a bf16 loop counts and times itself."""
    try:
        import torch
        from torch.utils.flop_counter import FlopCounterMode
    except ImportError:
        return [Row("mfu", "torch", "not installed", "pip install torch", SKIP)]
    from trainpulse_otel import TrainingMonitor
    from trainpulse_otel.mfu import peak_flops

    cuda = torch.cuda.is_available() and not fake
    device = torch.device("cuda" if cuda else "cpu")
    width, layers, tokens, steps = (4096, 4, 8192, 40) if cuda else (256, 2, 512, 12)
    torch.manual_seed(0)
    blocks = [m for _ in range(layers) for m in (torch.nn.Linear(width, 4 * width), torch.nn.GELU(),
                                                 torch.nn.Linear(4 * width, width))]  # fmt: skip
    model = torch.nn.Sequential(*blocks).to(device=device, dtype=torch.bfloat16)
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-4)
    x = torch.randn(tokens, width, device=device, dtype=torch.bfloat16, requires_grad=True)

    def step() -> None:
        loss = model(x).float().pow(2).mean()
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)

    def sync() -> None:
        if cuda:
            torch.cuda.synchronize()

    step()  # warm up kernels and the allocator
    with FlopCounterMode(display=False) as counter:
        step()
    counted = counter.get_total_flops()
    with tempfile.TemporaryDirectory() as tmp:
        trace = Path(tmp, "loop.jsonl")
        # one report, at close, over every step the loop timed (an interval longer than the loop)
        monitor = TrainingMonitor("gpu-check-mlp", model=model, record=trace, hardware="none", interval=3600.0,
                                  gpu_name=gpu_name, precision="bf16")  # fmt: skip
        times = []
        for _ in range(steps):
            sync()
            began = time.perf_counter()
            with monitor.step(tokens=tokens):
                step()
                sync()
            times.append(time.perf_counter() - began)
        monitor.close()
        reports = [json.loads(line)["training"] for line in trace.read_text().splitlines() if '"training"' in line]
    reported = [r for r in reports if r.get("tflops")]
    if not reported:
        return [Row("mfu", "monitor TFLOP/s", "none reported", f"{counted:.3g} FLOPs a step", FAIL)]
    measured = counted * len(times) / sum(times)  # over every step, as the monitor's report is
    tflops = reported[-1]["tflops"] * 1e12
    rows = [Row("mfu", f"TFLOP/s ({device.type}, bf16)", f"{tflops / 1e12:.3f} (monitor)",
                f"{measured / 1e12:.3f} (counted / timed, ±15 %)", OK if abs(tflops / measured - 1) <= 0.15 else FAIL)]  # fmt: skip
    peak = peak_flops(gpu_name, "bf16")
    mfu = reported[-1].get("mfu")
    if peak is None or mfu is None:
        rows.append(Row("mfu", "MFU", repr(mfu), f"no peak for {gpu_name!r}", SKIP))
    else:
        ok = abs(mfu / (measured / peak) - 1) <= 0.15
        rows.append(
            Row("mfu", f"MFU of {gpu_name}", f"{mfu:.4%}", f"{measured / peak:.4%} (±15 %)", OK if ok else FAIL)
        )
    return rows


# --------------------------------------------------------------------------- 5: the daemon and top


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=5) as response:  # noqa: S310 - the loopback URL built here
            return response.status, response.read().decode()
    except OSError as exc:
        return 0, str(exc)


def daemon_and_top(env: dict[str, str], gpus: int) -> list[Row]:
    """Check 5: ``daemon -mode auto`` on NVML, every GPU on ``/metrics``, ``top -once`` drawing them."""
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    cli = [sys.executable, "-m", "trainpulse_otel"]
    daemon = subprocess.Popen([*cli, "daemon", "-mode", "auto", "-addr", f"127.0.0.1:{port}", "-interval", "1s"],
                              env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)  # fmt: skip
    try:
        snapshot: dict[str, Any] = {}
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and len(snapshot.get("gpus") or ()) < gpus:
            time.sleep(0.5)
            status, body = get(url + "/v1/snapshot")
            snapshot = json.loads(body) if status == 200 else {}
        collectors = snapshot.get("collectors") or []
        rows = [Row("daemon", "-mode auto picks", ", ".join(collectors) or "nothing", "nvml",
                    OK if "nvml" in collectors else FAIL)]  # fmt: skip
        _, metrics = get(url + "/metrics")
        shown = {i for i in range(gpus) if f'trainpulse_gpu_utilization_percent{{gpu_index="{i}"' in metrics}
        rows.append(Row("daemon", "/metrics GPUs", str(sorted(shown)), str(list(range(gpus))),
                        OK if len(shown) == gpus else FAIL))  # fmt: skip
        top = subprocess.run([*cli, "top", "-once", "-remote", url], env=env, capture_output=True, text=True,
                             timeout=60)  # fmt: skip
        names = {g["name"].removeprefix("NVIDIA ") for g in snapshot.get("gpus") or () if g.get("name")}
        header = f"GPUs {gpus} × "  # top's GPU panel: "GPUs 8 × H100 80GB HBM3", then a row per GPU
        drawn = top.returncode == 0 and header in top.stdout and all(name in top.stdout for name in names)
        rows.append(Row("top", "top -once", f"exit {top.returncode}, {len(top.stdout.splitlines())} lines",
                        header + ", ".join(sorted(names)), OK if drawn and names else FAIL))  # fmt: skip
        return rows
    finally:
        daemon.terminate()
        try:
            daemon.wait(timeout=10)
        except subprocess.TimeoutExpired:
            daemon.kill()


# --------------------------------------------------------------------------- the table


def run(fake: bool) -> list[Row]:
    """Every check, in order."""
    from trainpulse_otel.collect.gpu_name import detect_gpu_name

    rows = collectors_side_by_side()
    gpus = len([r for r in rows if r.item.endswith("XID event set")])
    rows += loop_mfu(fake, detect_gpu_name(0))
    rows += daemon_and_top(dict(os.environ), gpus)
    return rows


def table(rows: list[Row]) -> str:
    widths = [max(len(getattr(r, f)) for r in rows) for f in ("check", "item", "seen")]
    lines = [f"{r.check:<{widths[0]}}  {r.item:<{widths[1]}}  {r.seen:<{widths[2]}}  {r.verdict:<4}  {r.against}"
             for r in rows]  # fmt: skip
    failed = sum(r.verdict == FAIL for r in rows)
    lines.append(f"{len(rows)} checks: {failed} failed, {sum(r.verdict == SKIP for r in rows)} skipped")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--fake", action="store_true", help="the fake pynvml and nvidia-smi (no GPU needed)")
    parser.add_argument("--json", action="store_true", help="one JSON object instead of the table")
    args = parser.parse_args(argv)
    if args.fake:
        with fake_machine():
            rows = run(fake=True)
    else:
        rows = run(fake=False)
    if args.json:
        print(json.dumps({"fake": args.fake, "rows": [r.__dict__ for r in rows]}))
    else:
        print(table(rows))
    return 1 if any(r.verdict == FAIL for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
