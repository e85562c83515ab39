"""Data-parallel training throughput in PyTorch 1.13 (run with /usr/bin/python3): N processes with
DistributedDataParallel over gloo on this machine, each with the global batch / N samples and
`--threads` threads, the models and optimizers of torch_train_bench.py. Prints one JSON line per
model: global samples/s (tokens/s for the GPT) over the timed steps, measured on rank 0 after a
barrier at both ends.
Usage: OPENBLAS_NUM_THREADS=B python3 torch_ddp_bench.py --nproc 2 --threads 1 [--steps N] [--only mlp,cnn,gpt]
"""
import argparse
import json
import os
import sys
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch_train_bench as tb  # noqa: E402


def run_rank(rank, a, port, results):
    os.environ["MASTER_ADDR"], os.environ["MASTER_PORT"] = "127.0.0.1", str(port)
    torch.set_num_threads(a.threads)
    dist.init_process_group("gloo", rank=rank, world_size=a.nproc)
    for name in a.only.split(","):
        torch.manual_seed(0)
        if name == "gpt":
            model, global_bs, per_sample = tb.GPT(), 32, 128
            opt_fn = lambda p: torch.optim.AdamW(p, lr=2e-3, weight_decay=0.1)  # noqa: E731
            x = torch.randint(0, 256, (global_bs // a.nproc, 128))
            y = torch.randint(0, 256, (global_bs // a.nproc, 128))
        else:
            model, global_bs, per_sample = (tb.mlp() if name == "mlp" else tb.cnn()), 128, 1
            opt_fn = lambda p: torch.optim.SGD(p, lr=0.05, momentum=0.9)  # noqa: E731
            x = torch.rand(global_bs // a.nproc, 1, 28, 28)
            y = torch.randint(0, 10, (global_bs // a.nproc,))
        model = DDP(model)  # broadcasts rank 0's weights and buffers; 25 MiB buckets
        opt = opt_fn(model.parameters())
        steps = a.steps if name != "cnn" else max(10, a.steps // 2)
        warmup = 3
        for i in range(warmup + steps):
            if i == warmup:
                dist.barrier()
                t0 = time.perf_counter()
            out = model(x)
            loss = F.cross_entropy(out.reshape(-1, out.shape[-1]), y.reshape(-1))
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
        dist.barrier()
        dt = time.perf_counter() - t0
        if rank == 0:
            results[name] = steps * global_bs * per_sample / dt
    dist.destroy_process_group()


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--nproc", type=int, default=2)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--steps", type=int, default=40)
    p.add_argument("--only", default="mlp,cnn,gpt")
    p.add_argument("--port", type=int, default=29533)
    a = p.parse_args()
    with mp.Manager() as m:
        results = m.dict()
        mp.spawn(run_rank, args=(a, a.port, results), nprocs=a.nproc, join=True)
        for name in a.only.split(","):
            print(json.dumps({"model": name, "impl": "torch-ddp", "value": round(results[name], 1),
                              "unit": "tokens/s" if name == "gpt" else "samples/s",
                              "setting": f"nproc={a.nproc} omp={a.threads} "
                                         f"openblas={os.environ.get('OPENBLAS_NUM_THREADS', 'all')}"}),
                  flush=True)


if __name__ == "__main__":
    main()
