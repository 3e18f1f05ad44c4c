"""A three-rank gloo job under torchrun that checkpoints every ``CKPT_EVERY`` steps and is restarted once.

In its first attempt rank 1 SIGKILLs itself after step ``FAIL_AT``, between checkpoints; torchrun
(``--max-restarts 1``) restarts the worker group, which loads the last checkpoint (``CKPT_DIR``) and does the
steps since it again. Rank 0 logs a stamped line per step (Python's ``logging``, ``[%(asctime)s]``), and each
save and load. Run with ``LOGLEVEL=INFO python -m torch.distributed.run --nproc_per_node 3 --max-restarts 1
--rdzv-backend c10d --rdzv-endpoint localhost:PORT restart_job.py`` (INFO: torchrun says it restarts). With
``TRAINPULSE_ENDPOINT`` set it also reports through the SDK, as a user would instrument it: each step, the save
in the ``checkpoint`` phase, the load in ``checkpoint_load`` and ``monitor.checkpoint_loaded(step)``.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import time
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist

STEPS, FAIL_AT, CKPT_EVERY, STEP_S = 50, 39, 10, 0.5


def main() -> None:
    logging.basicConfig(format="[%(asctime)s] %(message)s", level=logging.INFO)
    log = logging.getLogger("job")
    # the agent's store outlives an attempt: each attempt keeps its keys apart, or gloo's full mesh would read
    # the dead workers' addresses
    attempt = int(os.environ.get("TORCHELASTIC_RESTART_COUNT", "0"))
    agent = dist.TCPStore(os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"]), is_master=False)
    store = dist.PrefixStore(f"attempt{attempt}", agent)
    dist.init_process_group("gloo", store=store, rank=int(os.environ["RANK"]), world_size=int(os.environ["WORLD_SIZE"]))
    rank = dist.get_rank()
    monitor = _monitor()
    state = Path(os.environ["CKPT_DIR"])
    torch.manual_seed(0)
    model = torch.nn.Linear(8, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    x, y = torch.randn(256, 8), torch.randn(256, 1)
    start = 1
    ckpt = state / "ckpt.pt"
    if ckpt.exists():
        with _phase(monitor, "checkpoint_load"):
            saved = torch.load(ckpt)
            model.load_state_dict(saved["model"])
        start = saved["step"] + 1
        if monitor is not None:
            monitor.checkpoint_loaded(saved["step"])
        if rank == 0:
            log.info("loaded checkpoint at step %d", saved["step"])
    for step in range(start, STEPS + 1):
        with monitor.step() if monitor is not None else contextlib.nullcontext() as timed:
            opt.zero_grad()
            loss = (model(x) - y).pow(2).mean()
            loss.backward()
            for p in model.parameters():
                dist.all_reduce(p.grad)
            opt.step()
            time.sleep(STEP_S)
            if timed is not None:
                timed.loss = loss.item()
        if rank == 0:
            log.info("step %d | loss %.4f | step_time %.3fs", step, loss.item(), STEP_S)
            if step % CKPT_EVERY == 0:
                with _phase(monitor, "checkpoint"):
                    torch.save({"model": model.state_dict(), "step": step}, ckpt)
                log.info("saved checkpoint at step %d", step)
        dist.barrier()
        if step == FAIL_AT and rank == 1 and attempt == 0:
            os.kill(os.getpid(), signal.SIGKILL)
    if monitor is not None:
        monitor.close()
    dist.destroy_process_group()


def _monitor() -> Any:
    """The SDK's monitor when ``TRAINPULSE_ENDPOINT`` names a daemon, else None."""
    if not os.environ.get("TRAINPULSE_ENDPOINT"):
        return None
    from trainpulse_otel import TrainingMonitor

    return TrainingMonitor("restart-job", interval=0.25, hardware="none", gather_every=0)


def _phase(monitor: Any, name: str) -> Any:
    return monitor.phase(name) if monitor is not None else contextlib.nullcontext()


if __name__ == "__main__":
    main()
