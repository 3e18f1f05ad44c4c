"""A real gloo job whose rank ``--skip`` never calls its last all-reduce: the others time out waiting for it.

Each rank runs ``--steps`` all-reduces; then every rank but ``--skip`` calls one more, which times out after
``--timeout`` seconds (gloo's), and writes its Flight Recorder dump — the bytes torch's own
``_dump_fr_trace()`` returns — to ``PREFIX<rank>``, as ProcessGroupNCCL's ``TORCH_NCCL_DUMP_ON_TIMEOUT`` does
to ``TORCH_FR_DUMP_TEMP_FILE`` (gloo has no dump on timeout: the job asks). Rank ``--skip`` dumps too, later,
as NCCL's watchdog makes every rank do. Usage: ``fr_job.py RANK WORLD STORE_PORT PREFIX [--skip R] …``.
"""

from __future__ import annotations

import argparse
import datetime
import time

import torch
import torch.distributed as dist


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("rank", type=int)
    parser.add_argument("world", type=int)
    parser.add_argument("port", type=int)
    parser.add_argument("prefix")
    parser.add_argument("--skip", type=int, default=2)
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--timeout", type=float, default=3.0)
    args = parser.parse_args()
    dist.init_process_group(
        "gloo",
        init_method=f"tcp://127.0.0.1:{args.port}",
        rank=args.rank,
        world_size=args.world,
        timeout=datetime.timedelta(seconds=args.timeout),
    )
    grads = torch.ones(16, 4)
    for _ in range(args.steps):
        dist.all_reduce(grads)
    if args.rank == args.skip:
        time.sleep(args.timeout + 2.0)  # stuck elsewhere: never calls the all-reduce the others wait in
    else:
        try:
            dist.all_reduce(grads)  # times out: rank --skip never joins
        except RuntimeError as exc:
            print(f"rank {args.rank}: {exc}", flush=True)
    dump = torch._C._distributed_c10d._dump_fr_trace()
    with open(f"{args.prefix}{args.rank}", "wb") as fh:
        fh.write(dump)


if __name__ == "__main__":
    main()
