"""One rank of a real PyTorch job on the CPU whose console output is Megatron-LM's: an iteration line a step.

    python megatron_job.py RANK WORLD STORE_FILE [--steps 60] [--diverge-at 20] [--step-s 0.2]

WORLD ranks (gloo, rendezvous through STORE_FILE) train a small MLP with a hand-written data-parallel step:
each its own batch, the gradients all-reduced and averaged, plain SGD. The last rank prints every iteration
(``--log-interval 1``) exactly as Megatron-LM's ``training_log`` prints it (NVIDIA/Megatron-LM,
megatron/training/training.py, 2025; ``print_rank_last``, flushed): the local time stamp, then
``iteration {:8d}/{:8d}``, ``consumed samples: {:12d}``, ``elapsed time per iteration (ms): {:.1f}``,
``learning rate: {:.6E}``, ``global batch size: {:5d}``, ``lm loss: {:.6E}`` — only when the average loss is
``>= 0.0``, so a NaN loss drops it from the line —, ``loss scale: {:.1f}``, ``grad norm: {:.3f}``,
``number of skipped iterations: {:3d}`` and ``number of nan iterations: {:3d}`` (bf16 without a loss scaler:
no iteration is skipped, so neither counts). From step ``--diverge-at`` the learning rate is 1e12, a schedule
gone wrong: the weights overflow within a few steps, the loss becomes inf, then NaN, and the loop runs on.
Each step takes at least ``--step-s`` (the rest of a step a GPU would take), so a daemon sees it go by.
"""

from __future__ import annotations

import argparse
import time
from datetime import datetime

import torch
import torch.distributed as dist

BATCH, WIDTH, LR, DIVERGED_LR = 16, 64, 0.01, 1e12


def parse() -> argparse.Namespace:
    p = argparse.ArgumentParser()
    p.add_argument("rank", type=int)
    p.add_argument("world", type=int)
    p.add_argument("store")
    p.add_argument("--steps", type=int, default=60)
    p.add_argument("--diverge-at", type=int, default=20)
    p.add_argument("--step-s", type=float, default=0.2)
    return p.parse_args()


def iteration_line(iteration: int, args: argparse.Namespace, ms: float, lr: float, loss: float, grad: float) -> str:
    """Megatron-LM's ``training_log`` line (see the module docstring), one iteration per line."""
    batch = BATCH * args.world
    line = f" [{datetime.now().strftime('%Y-%m-%d %H:%M:%S.%f')}]"
    line += f" iteration {iteration:8d}/{args.steps:8d} |"
    line += f" consumed samples: {iteration * batch:12d} |"
    line += f" elapsed time per iteration (ms): {ms:.1f} |"
    line += f" learning rate: {lr:.6E} |"
    line += f" global batch size: {batch:5d} |"
    if loss >= 0.0:  # as training_log: a NaN average is not printed
        line += " {}: {:.6E} |".format("lm loss", loss)
    line += f" loss scale: {1.0:.1f} |"
    line += f" grad norm: {grad:.3f} |"
    line += f" number of skipped iterations: {0:3d} |"
    line += f" number of nan iterations: {0:3d} |"
    return line


def main() -> None:
    args = parse()
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"file://{args.store}", rank=args.rank, world_size=args.world)
    torch.manual_seed(0)  # the same initial weights on every rank
    model = torch.nn.Sequential(torch.nn.Linear(WIDTH, WIDTH), torch.nn.Tanh(), torch.nn.Linear(WIDTH, 1))
    data = torch.Generator().manual_seed(1 + args.rank)  # each rank its own shard
    target = torch.randn(WIDTH, 1, generator=torch.Generator().manual_seed(7))
    for iteration in range(1, args.steps + 1):
        began = time.perf_counter()
        x = torch.randn(BATCH, WIDTH, generator=data)
        loss = torch.nn.functional.mse_loss(model(x), x @ target)
        loss.backward()
        grads = [p.grad for p in model.parameters()]
        for grad in grads:
            dist.all_reduce(grad)
            grad /= args.world
        norm = torch.linalg.vector_norm(torch.stack([torch.linalg.vector_norm(g) for g in grads])).item()
        lr = LR if iteration < args.diverge_at else DIVERGED_LR
        with torch.no_grad():
            for p in model.parameters():
                p -= lr * p.grad
                p.grad = None
        reduced = loss.detach().clone()
        dist.all_reduce(reduced)
        time.sleep(max(0.0, args.step_s - (time.perf_counter() - began)))
        if args.rank == args.world - 1:  # print_rank_last
            ms = (time.perf_counter() - began) * 1000.0
            print(iteration_line(iteration, args, ms, lr, reduced.item() / args.world, norm), flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
