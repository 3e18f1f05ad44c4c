"""A three-rank gloo job under torchrun in which one rank dies at step 20: of its own exception, or killed.

Each step all-reduces the gradients of a small regression fitted to a fixed data set (its loss falls smoothly, as
a real job's does); rank 0 prints ``step N | loss L | step_time T`` every step. At step 20 the rank ``FAIL_RANK``
(default 1) raises ``ValueError`` (``FAIL_HOW=raise``) or sends itself ``SIGKILL`` (``FAIL_HOW=kill``); the other
ranks then fail in their next all-reduce on the closed connection, and torchrun tears the job down. Run with
``python -m torch.distributed.run --nproc_per_node 3 crash_job.py``.
"""

from __future__ import annotations

import os
import signal
import time

import torch
import torch.distributed as dist

STEPS, FAIL_AT = 40, 20


def main() -> None:
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    torch.manual_seed(0)
    x, w = torch.randn(256, 8), torch.randn(8, 1)
    y = x @ w
    model = torch.nn.Linear(8, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    for step in range(1, STEPS + 1):
        began = time.perf_counter()
        opt.zero_grad()
        loss = (model(x) - y).pow(2).mean()
        loss.backward()
        for p in model.parameters():
            dist.all_reduce(p.grad)
            p.grad /= dist.get_world_size()
        opt.step()
        if step == FAIL_AT and rank == int(os.environ.get("FAIL_RANK", "1")):
            if os.environ.get("FAIL_HOW") == "kill":
                os.kill(os.getpid(), signal.SIGKILL)
            raise ValueError(f"bad batch at step {step}")
        time.sleep(0.05)
        if rank == 0:
            print(f"step {step} | loss {loss.item():.4f} | step_time {time.perf_counter() - began:.3f}s", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
