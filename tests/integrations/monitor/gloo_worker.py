"""One rank of an N-process gloo DDP job on CPU, run by the distributed tests and bench/gloo_job.py.

    python gloo_worker.py RANK WORLD STORE_FILE OUT_JSON [--slow-rank R] [--slow-from STEP | --slow-after S]
                          [--extra 0.35] [--steps N] [--seconds S] [--interval S] [--gather-every K]
                          [--hardware none|host] [--startup-mb MB] [--checkpoint-every STEPS --checkpoint-mb MB]
                          [--hang-rank R --hang-after S --hang-s 40] [--master-port P] [--heartbeat-s 1]
                          [--diverge-after S] [--record TRACE]

Trains a small MLP with a hand-written DDP step: ``MICRO`` forward/backward
passes, a timed barrier (``sync_point``), then a timed gradient all-reduce
(which also carries rank 0's stop and slow-down flags, so every rank agrees
on the step). From step ``--slow-from`` on — or from the step after rank 0
has run ``--slow-after`` seconds — ``--slow-rank`` does ``--extra`` more real
work per step: more micro-batches (not a sleep), for ``--extra`` times as long
as its regular ones took. The job ends after
``--steps`` steps or ``--seconds`` seconds, whichever is first.

Like a real job, each rank may allocate ``--startup-mb`` of host memory over
its first ``STARTUP_S`` seconds (loading its model and data shard), and rank 0
may save a real checkpoint (``torch.save`` of the model and a
``--checkpoint-mb`` optimizer-state stand-in, flushed with ``fsync``) every
``--checkpoint-every`` steps between steps, inside ``monitor.phase
("checkpoint")``, while the others wait for it at the next barrier; it
measures each save's wall time itself.

``--hang-rank`` really blocks: at the first step after rank 0 has run
``--hang-after`` seconds (the flag rides on the all-reduce like the others),
it sleeps ``--hang-s`` seconds inside its step, before the barrier and the
all-reduce — while every other rank waits inside the barrier (gloo's default
timeout is 30 minutes, so they just wait), their heartbeats still flowing.

``--diverge-after`` makes the loss really diverge: from the first step after
rank 0 has run that many seconds (the flag rides on the all-reduce) every rank
steps with ``DIVERGE_LR_FACTOR`` times the learning rate, so the weights
overflow within a few steps and the MSE loss becomes inf, then NaN; the loop
keeps running. With it, every step reports its loss (``step.loss``), before
the divergence too.

``--record TRACE``: rank 0's in-process monitor writes its pipeline's trace
there (``TrainingMonitor(record=…)``), for ``trainpulse replay``.

With ``--master-port`` the job rendezvouses through ``env://`` (a TCPStore at
127.0.0.1:PORT, as torchrun does), which the in-process monitor also uses to
carry the other ranks' heartbeats to rank 0; else through STORE_FILE.

Rank 0 polls its in-process diagnosis every half second from a thread of its
own (its training thread may be blocked) and writes to OUT_JSON: the timeline
(when each signal and top root cause appeared, in seconds from the start,
with the stall's evidence), the heartbeats it received from each rank over
time, when the slowdown or the hang began, the last report and the final
diagnosis.
"""

from __future__ import annotations

import argparse
import json
import os
import threading
import time

import torch
import torch.distributed as dist

from trainpulse_otel import TrainingMonitor
from trainpulse_otel.integrations.torch import sync_point
from trainpulse_otel.samples import to_dict

BATCH, WIDTH, MICRO = 32, 128, 60
LR = 0.01
DIVERGE_LR_FACTOR = 1e12  # a learning rate schedule gone wrong: the weights overflow float32 in 2-3 steps
POLL_S = 0.5
STARTUP_S = 10.0
MIB = 1 << 20


def parse() -> argparse.Namespace:
    p = argparse.ArgumentParser()
    for name in ("rank", "world"):
        p.add_argument(name, type=int)
    p.add_argument("store")
    p.add_argument("out")
    p.add_argument("--slow-rank", type=int, default=-1)
    p.add_argument("--slow-from", type=int, default=0, help="the first slowed step")
    p.add_argument("--slow-after", type=float, help="slow down from the step after this many seconds instead")
    p.add_argument("--extra", type=float, default=0.35, help="extra work of the slow rank, a fraction")
    p.add_argument("--sleep-ms", type=float, default=0.0, help="the slow rank also sleeps this long each step")
    p.add_argument(
        "--device-ms",
        type=float,
        default=0.0,
        help="every rank also waits this long in its compute each step, its CPU free: the time a GPU rank's host "
        "thread waits on its own device (more ranks than cores then do not contend as CPU-only ranks do)",
    )
    p.add_argument("--steps", type=int, default=1_000_000)
    p.add_argument("--seconds", type=float, default=float("inf"))
    p.add_argument("--interval", type=float, default=0.25)
    p.add_argument("--gather-every", type=int, default=2)
    p.add_argument("--hardware", default="none", help="what the monitor collects beside the loop: none or host")
    p.add_argument("--startup-mb", type=float, default=0.0, help="host memory each rank allocates at start")
    p.add_argument("--checkpoint-every", type=int, default=0, help="rank 0 saves a checkpoint every N steps")
    p.add_argument("--checkpoint-mb", type=float, default=64.0, help="size of the saved optimizer-state stand-in")
    p.add_argument("--hang-rank", type=int, default=-1)
    p.add_argument("--hang-after", type=float, default=float("inf"), help="seconds before the rank hangs")
    p.add_argument("--hang-s", type=float, default=40.0, help="how long it hangs")
    p.add_argument("--master-port", type=int, help="rendezvous through env:// on this port")
    p.add_argument("--heartbeat-s", type=float, default=1.0)
    p.add_argument("--diverge-after", type=float, help="seconds before the learning rate blows up (reports losses)")
    p.add_argument("--record", help="rank 0's monitor records its trace (JSON Lines) to this file")
    return p.parse_args()


class StartupAllocation:
    """A rank loading its model and data shard: ``mb`` of host memory allocated, in pieces, over ``STARTUP_S``."""

    def __init__(self, mb: float, start: float) -> None:
        self.mb, self.start = mb, start
        self.held: list[torch.Tensor] = []

    def step(self, now: float) -> None:
        due = self.mb * min(1.0, (now - self.start) / STARTUP_S)
        while 4 * len(self.held) + 4 <= due:  # 4 MiB pieces, touched so the pages are really resident
            self.held.append(torch.ones(MIB))


class Checkpointer:
    """Rank 0's real checkpoint saves, each timed by the wall clock around save and ``fsync``."""

    def __init__(self, directory: str, every: int, mb: float, monitor: TrainingMonitor) -> None:
        self.path = os.path.join(directory, "checkpoint.pt")
        self.every, self.monitor = every, monitor
        self.state = torch.zeros(int(mb * MIB / 4))
        self.saves: list[float] = []
        self.ends: list[float] = []  # seconds since start when each save ended

    def maybe_save(self, step: int, model: torch.nn.Module) -> None:
        if not self.every or step % self.every:
            return
        with self.monitor.phase("checkpoint"):
            began = time.perf_counter()
            self.state.add_(1.0)  # new contents each save, as an optimizer's state would have
            with open(self.path, "wb") as fh:
                torch.save({"model": model.state_dict(), "optimizer": self.state, "step": step}, fh)
                fh.flush()
                os.fsync(fh.fileno())
            self.saves.append(time.perf_counter() - began)
            self.ends.append(time.time())


class Timeline:
    """Rank 0's record of the diagnosis over the run, polled from a thread: each signal and top cause when
    first seen, and the heartbeats received from each rank so far."""

    def __init__(self, monitor: TrainingMonitor, start: float) -> None:
        self.monitor, self.start = monitor, start
        self.step = 0  # written by the training thread
        self.events: list[dict] = []
        self.heartbeats: list[dict] = []
        self._active: set[tuple] = set()
        self._top: tuple | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(POLL_S):
            self.poll(time.time())

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=10)
        self.poll(time.time())

    def poll(self, now: float) -> None:
        diagnosis = self.monitor.diagnosis() or {}
        load1 = round(os.getloadavg()[0], 2)  # the shared machine's load, to tell its contention from the job's
        at = {"t": round(now - self.start, 2), "step": self.step, "load1": load1}
        store = self.monitor._store  # the test reads what rank 0 received
        if store is not None:
            self.heartbeats.append({"t": at["t"], "received": {str(r): n for r, n in store.received.items()}})
        signals = {(s["name"], json.dumps(s["subject"], sort_keys=True)): s for s in diagnosis.get("signals", [])}
        active = set(signals)
        for key in sorted(active - self._active):
            name, subject = key
            raised = {"message": signals[key]["message"], "evidence": signals[key]["evidence"]}
            self.events.append({**at, "event": "raised", "signal": name, "subject": json.loads(subject), **raised})
        for name, subject in sorted(self._active - active):
            self.events.append({**at, "event": "cleared", "signal": name, "subject": json.loads(subject)})
        self._active = active
        causes = diagnosis.get("root_causes") or [{}]
        top = (causes[0].get("cause"), json.dumps(causes[0].get("subject", {}), sort_keys=True))
        if top != self._top:
            self.events.append({**at, "event": "top_cause", "cause": top[0], "subject": json.loads(top[1])})
            self._top = top


def compute(model: torch.nn.Module, x: torch.Tensor, y: torch.Tensor, extra: float) -> torch.Tensor:
    """``MICRO`` forward/backward passes, then more for ``extra`` times as long as they took; the first's loss.

    The extra work is sized in wall time, not in passes: with more processes
    than cores, the waiting ranks free the CPU and a fixed number of extra
    passes would cost far less than its share — a 35 % slower rank would look 8 %.
    """
    start = time.perf_counter()
    loss = torch.nn.functional.mse_loss(model(x), y)
    loss.backward()
    for _ in range(MICRO - 1):
        torch.nn.functional.mse_loss(model(x), y).backward()
    until = time.perf_counter() + extra * (time.perf_counter() - start)
    while time.perf_counter() < until:
        torch.nn.functional.mse_loss(model(x), y).backward()
    return loss.detach()  # the loss at the step's weights (every pass sees the same batch)


def main() -> None:
    args = parse()
    rank, world = args.rank, args.world
    os.environ["LOCAL_RANK"] = str(rank)
    torch.set_num_threads(1)
    if args.master_port:
        os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(args.master_port))
        dist.init_process_group("gloo", init_method="env://", rank=rank, world_size=world)
    else:
        dist.init_process_group("gloo", init_method=f"file://{args.store}", rank=rank, world_size=world)
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(WIDTH, WIDTH), torch.nn.ReLU(), torch.nn.Linear(WIDTH, WIDTH))
    monitor = TrainingMonitor(
        model_name="gloo-mlp",
        interval=args.interval,
        hardware=args.hardware,
        gather_every=args.gather_every,
        flops_per_token=6 * sum(p.numel() for p in model.parameters()),
        heartbeat_s=args.heartbeat_s,
        record=args.record if rank == 0 else None,
    )
    params = list(model.parameters())
    x, y = torch.randn(BATCH, WIDTH), torch.randn(BATCH, WIDTH)
    start = time.time()
    timeline = Timeline(monitor, start) if rank == 0 else None
    startup = StartupAllocation(args.startup_mb, start)
    checkpointer = Checkpointer(
        os.path.dirname(args.out), args.checkpoint_every if rank == 0 else 0, args.checkpoint_mb, monitor
    )
    slow_from = args.slow_from if args.slow_after is None else args.steps
    slow_at: float | None = None
    hang_from: int | None = None  # the step the hang rank blocks in, once rank 0's flag said so
    hang_at: float | None = None
    diverge_from: int | None = None  # the first step with the blown-up learning rate, once rank 0's flag said so
    diverge_at: float | None = None
    lr = LR
    step = 0
    while step < args.steps:
        if step == slow_from and args.slow_rank >= 0:
            slow_at = time.time() - start
        slowed = rank == args.slow_rank and step >= slow_from
        if step == hang_from:
            hang_at = time.time() - start
        if step == diverge_from:
            diverge_at, lr = time.time() - start, LR * DIVERGE_LR_FACTOR
        with monitor.step(tokens=BATCH, samples=BATCH) as timer:
            loss = compute(model, x, y, args.extra if slowed else 0.0)
            if args.diverge_after is not None:
                timer.loss = loss
            if args.device_ms:
                time.sleep(args.device_ms * (1.0 + (args.extra if slowed else 0.0)) / 1000.0)
            if slowed and args.sleep_ms:  # a slowdown that CPU contention between the ranks cannot hide
                time.sleep(args.sleep_ms / 1000.0)
            if rank == args.hang_rank and step == hang_from:
                time.sleep(args.hang_s)  # blocked before the collective: the others wait inside it
            sync_point(monitor)
            flat = torch.cat([p.grad.flatten() for p in params] + [torch.zeros(4)])
            if rank == 0:
                elapsed = time.time() - start
                flat[-4] = float(args.diverge_after is not None and elapsed >= args.diverge_after)
                flat[-3] = float(elapsed >= args.hang_after)
                flat[-2] = float(elapsed >= args.seconds)
                flat[-1] = float(args.slow_after is not None and elapsed >= args.slow_after)
            with monitor.phase("all_reduce"):
                dist.all_reduce(flat)
            with torch.no_grad():  # plain SGD: torch.optim would import torch._dynamo, seconds on 2 cores
                offset = 0
                for p in params:
                    n = p.numel()
                    p -= lr / MICRO * flat[offset : offset + n].view_as(p) / world
                    p.grad = None
                    offset += n
        step += 1
        startup.step(time.time())
        checkpointer.maybe_save(step, model)
        if flat[-1] > 0 and slow_from > step:
            slow_from = step
        if flat[-3] > 0 and hang_from is None:
            hang_from = step
        if flat[-4] > 0 and diverge_from is None:
            diverge_from = step
        if timeline is not None:
            timeline.step = step
        if flat[-2] > 0:
            break
    if timeline is not None:
        timeline.stop()
        monitor.flush()
        frame = monitor._destination.engine.frame
        result = {
            "world": world,
            "steps": step,
            "seconds": round(time.time() - start, 1),
            "slow_rank": args.slow_rank,
            "slow_from_step": slow_from if slow_at is not None else None,
            "slow_from_s": None if slow_at is None else round(slow_at, 2),
            "hang_rank": args.hang_rank,
            "hang_from_step": hang_from,
            "hang_from_s": None if hang_at is None else round(hang_at, 2),
            "hang_s": args.hang_s,
            "diverge_from_step": diverge_from,
            "diverge_from_s": None if diverge_at is None else round(diverge_at, 2),
            "timeline": timeline.events,
            "heartbeats": timeline.heartbeats,
            "training": to_dict(frame.training),
            "diagnosis": monitor.diagnosis(),
            "stats": monitor.stats,
            "checkpoint_saves_s": [round(x, 4) for x in checkpointer.saves],
            "checkpoint_save_ends_s": [round(t - start, 2) for t in checkpointer.ends],
        }
    monitor.close()
    dist.destroy_process_group()
    if timeline is not None:
        with open(args.out, "w", encoding="utf-8") as fh:
            json.dump(result, fh)


if __name__ == "__main__":
    main()
