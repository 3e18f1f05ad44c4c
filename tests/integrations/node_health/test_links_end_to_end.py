"""Node health through the daemon's own path: collectors → OTel instruments → the in-process reader → the
window → ``link_degradation`` and ``interconnect_degradation``. A sysfs tree in ``tmp_path`` (the kernel's
layout, tests/fixtures/sysfs/SOURCES.md) and a dcgm-exporter exposition (a real one, tests/fixtures/scrape/
SOURCES.md) served over HTTP on loopback stand for the hardware; the engine is the daemon's own."""

from __future__ import annotations

import re
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import fields
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from tests import parts
from tests.diagnose.builders import job
from tests.fakes.fake_pynvml import FakeGpu, make_fake_pynvml
from trainpulse_otel.collect.exposition import gpus_from_dcgm
from trainpulse_otel.collect.nvml import NvmlCollector
from trainpulse_otel.config import Settings

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "scrape"
L40S = (FIXTURES / "dcgm_l40s_upcloud.txt").read_text(encoding="utf-8")
T0 = 1_764_400_000.0


def sysfs_port(root: Path, device: str, **values: str) -> Path:
    """One port in the kernel's layout: ``class/infiniband/<device>/ports/1/{state,phys_state,rate,counters/*}``."""
    port = root / "class" / "infiniband" / device / "ports" / "1"
    (port / "counters").mkdir(parents=True)
    files = {"state": "4: ACTIVE", "phys_state": "5: LinkUp", "rate": "200 Gb/sec (4X HDR)",
             "link_layer": "InfiniBand"}  # fmt: skip
    for name, text in files.items():
        (port / name).write_text(text + "\n")
    for name in ("symbol_error", "link_downed", "port_rcv_errors", "excessive_buffer_overrun_errors"):
        (port / "counters" / name).write_text(values.get(name, "0") + "\n")
    return port


@contextmanager
def exporter(body: Callable[[], str]) -> Iterator[str]:
    """A dcgm-exporter stand-in on loopback: ``GET /metrics`` answers ``body()`` as Prometheus text."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            data = body().encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; version=0.0.4")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/metrics"
    finally:
        server.shutdown()
        server.server_close()


def run(engine, seconds: range, before: Callable[[float], None] = lambda t: None) -> list:
    clock, raised = engine.clock, []
    for t in seconds:
        before(float(t))
        clock.now = T0 + t
        result = engine.tick(T0 + t)
        raised += [(tr.ts - T0, tr.signal, dict(tr.subject), tr.severity) for tr in result.transitions
                   if tr.event == "raised"]  # fmt: skip
    return raised


class Clock:
    now = T0

    def __call__(self) -> float:
        return self.now


def test_a_port_s_symbol_errors_at_50_a_second_raise_link_degradation_naming_it_within_two_intervals(tmp_path):
    counter = sysfs_port(tmp_path, "mlx5_1") / "counters" / "symbol_error"
    sysfs_port(tmp_path, "mlx5_0")
    clock = Clock()
    engine = parts.engine(Settings(mode="host", addr="127.0.0.1:0", sysfs_root=str(tmp_path)), clock=clock)
    engine.clock = clock
    try:
        raised = run(engine, range(20), lambda t: counter.write_text(f"{int(max(0.0, t - 10) * 50)}\n"))
        links = [r for r in raised if r[1] == "link_degradation"]
        assert links and links[0][0] <= 12.0  # the climb began at 10: within two intervals
        assert links[0][2] == {"device": "mlx5_1", "port": 1}  # this daemon's own host: its resource names it
        snapshot = engine.snapshot().to_dict()
        (signal,) = [s for s in snapshot["diagnosis"]["signals"] if s["name"] == "link_degradation"]
        assert signal["evidence"]["symbol_error_per_s"] == 50.0 and signal["subject"]["device"] == "mlx5_1"
        counter.write_text("0\n")  # cleared (perfquery -R): a counter that goes back is no error
        assert not [r for r in run(engine, range(20, 40)) if r[1] == "link_degradation"]
    finally:
        engine.close()


def dcgm_with(replays: int) -> str:
    return re.sub(r"(DCGM_FI_DEV_PCIE_REPLAY_COUNTER\{[^}]*\}) \S+", rf"\g<1> {replays}", L40S)


def raw(field: str) -> float:
    """A DCGM field's value as the exposition prints it (read here by hand, not by the parser under test)."""
    return float(re.search(rf"^DCGM_FI_DEV_{field}\{{[^}}]*\}} (\S+)", L40S, re.MULTILINE)[1])


def test_a_scraped_dcgm_exporter_gives_the_samples_nvml_would_and_20_replays_a_minute_raise_link_degradation(
    monkeypatch,
):
    mib = 1024**2  # DCGM's framebuffer fields are MiB, its power W; NVML answers bytes and mW
    total = int(raw("FB_FREE") + raw("FB_USED") + raw("FB_RESERVED")) * mib
    same = FakeGpu(uuid="GPU-5b4e07f6-3a86-4340-039d-25f2a83cdc43", name="NVIDIA L40S", util_gpu=int(raw("GPU_UTIL")),
                   util_memory=int(raw("MEM_COPY_UTIL")), memory_used=int(raw("FB_USED")) * mib, memory_total=total,
                   temperature=int(raw("GPU_TEMP")), power_mw=round(raw("POWER_USAGE") * 1000),
                   sm_clock=int(raw("SM_CLOCK")), pcie_replay=int(raw("PCIE_REPLAY_COUNTER")))  # fmt: skip
    monkeypatch.setitem(sys.modules, "pynvml", make_fake_pynvml([same]))
    nvml = NvmlCollector()
    (by_nvml,) = nvml.collect(T0).gpus
    nvml.close()
    (scraped,) = gpus_from_dcgm(L40S)
    given = [f.name for f in fields(scraped) if getattr(scraped, f.name) is not None and f.name != "xid_errors"]
    assert len(given) >= 10 and {f: getattr(scraped, f) for f in given} == {f: getattr(by_nvml, f) for f in given}
    clock = Clock()
    with exporter(lambda: dcgm_with(int((clock.now - T0) // 3))) as url:  # one replay every 3 s: 20/min
        engine = parts.engine(Settings(mode="none", addr="127.0.0.1:0", scrape=(url,)), clock=clock)
        engine.clock = clock
        try:
            raised = run(engine, range(90))
            frame = engine.frame
            (gpu,) = frame.gpus
            assert (gpu.index, gpu.name, gpu.power_watts) == (0, "NVIDIA L40S", 35.686)  # through the instruments
            links = [r for r in raised if r[1] == "link_degradation"]
            assert links and links[0][2]["gpu_index"] == 0 and links[0][0] <= 60.0
        finally:
            engine.close()


def test_a_target_that_is_down_is_counted_and_the_daemon_goes_on(tmp_path):
    with exporter(lambda: L40S) as url:
        dead = url.replace("/metrics", "/nothing-here")
    engine = parts.engine(Settings(mode="none", addr="127.0.0.1:0", scrape=(dead,)))
    try:
        for t in range(3):
            engine.tick(T0 + t)
        assert engine.frame.gpus == ()
        (scrape,) = [c for c in engine.collectors if c.name == "scrape"]
        assert scrape.failures[dead] == 3
    finally:
        engine.close()


def eight_gpus(narrow: int) -> str:
    """The L40S exposition for GPUs 0-7 (each its own ``gpu`` and UUID), every GPU busy, with its PCIe link's
    width now and at most (x16 of x16; GPU ``narrow`` x8): the lines dcgm-exporter writes for those fields."""
    lines = []
    for i in range(8):
        body = L40S.replace('gpu="0"', f'gpu="{i}"').replace("25f2a83cdc43", f"25f2a83cdc4{i}")
        body = re.sub(r"(DCGM_FI_DEV_GPU_UTIL\{[^}]*\}) \S+", r"\g<1> 97", body)
        labels = re.search(r"DCGM_FI_DEV_GPU_TEMP(\{[^}]*\})", body)[1]
        width = 8 if i == narrow else 16
        body += f"DCGM_FI_DEV_PCIE_LINK_WIDTH{labels} {width}\nDCGM_FI_DEV_PCIE_MAX_LINK_WIDTH{labels} 16\n"
        lines.append(body if i == 0 else "\n".join(ln for ln in body.splitlines() if not ln.startswith("#")) + "\n")
    return "".join(lines)


def test_a_scraped_downtrained_link_behind_a_straggler_is_the_cause_ranked_first():
    clock = Clock()
    with exporter(lambda: eight_gpus(narrow=3 if clock.now - T0 >= 30 else -1)) as url:
        engine = parts.engine(Settings(mode="none", addr="127.0.0.1:0", scrape=(url,)), clock=clock)
        engine.clock = clock
        try:

            def report(t: float) -> None:  # 8 ranks, a GPU each; rank 3 is 30 % slower once its link is narrow
                slow = {3: {"step_time_ms": 1700.0 * 1.3}} if t >= 30 else {}
                engine.ingest(job(t, rank_changes=slow, with_gpus=False).training)

            run(engine, range(150), report)
            top = engine.snapshot().diagnosis.root_causes[0]
            assert top.cause == "interconnect_degradation" and top.subject["gpu_index"] == 3
            assert top.subject["rank"] == 3 and "x8 of" in top.summary
        finally:
            engine.close()
