"""Training throughput of the reference models in PyTorch 1.13 (run with /usr/bin/python3).

Same architectures, batch sizes and optimizers as configs/fmnist_mlp.toml, configs/fmnist_cnn.toml
and configs/gpt_char.toml; random data of the right shapes (data loading is not what is timed).
Prints one JSON line per model: samples/s (tokens/s for the GPT) over the timed steps.
Usage: OPENBLAS_NUM_THREADS=B python3 torch_train_bench.py --threads T [--steps N] [--only mlp,cnn,gpt] [--amp bf16]
       python3 torch_train_bench.py --device cuda [--amp bf16|fp16]   (on a GPU host's torch)
"""
import argparse
import contextlib
import json
import math
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


def mlp():
    return nn.Sequential(nn.Flatten(), nn.Linear(784, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(), nn.Linear(512, 10))


def cnn():
    return nn.Sequential(
        nn.Conv2d(1, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(32, 64, 3, padding=1), nn.BatchNorm2d(64), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(), nn.Dropout(0.1), nn.Linear(3136, 256), nn.ReLU(), nn.Linear(256, 10))


class Attn(nn.Module):
    def __init__(self, c, h):
        super().__init__()
        self.h = h
        self.c_attn = nn.Linear(c, 3 * c)
        self.c_proj = nn.Linear(c, c)

    def forward(self, x):
        b, t, c = x.shape
        q, k, v = self.c_attn(x).split(c, dim=2)
        q, k, v = (z.view(b, t, self.h, c // self.h).transpose(1, 2) for z in (q, k, v))
        att = (q @ k.transpose(-2, -1)) / math.sqrt(c // self.h)
        mask = torch.triu(torch.ones(t, t, dtype=torch.bool, device=x.device), 1)
        att = F.softmax(att.masked_fill(mask, float('-inf')), dim=-1)
        return self.c_proj((att @ v).transpose(1, 2).contiguous().view(b, t, c))


class Block(nn.Module):
    def __init__(self, c, h):
        super().__init__()
        self.ln_1, self.attn, self.ln_2 = nn.LayerNorm(c), Attn(c, h), nn.LayerNorm(c)
        self.mlp = nn.Sequential(nn.Linear(c, 4 * c), nn.GELU(), nn.Linear(4 * c, c))

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class GPT(nn.Module):
    def __init__(self, vocab=256, c=128, t=128, layers=4, heads=4):
        super().__init__()
        self.wte, self.wpe = nn.Embedding(vocab, c), nn.Embedding(t, c)
        self.h = nn.Sequential(*[Block(c, heads) for _ in range(layers)])
        self.ln_f, self.head = nn.LayerNorm(c), nn.Linear(c, vocab, bias=False)

    def forward(self, idx):
        pos = torch.arange(idx.shape[1], device=idx.device)
        return self.head(self.ln_f(self.h(self.wte(idx) + self.wpe(pos))))


def bench(name, steps, warmup, amp=None, device="cpu"):
    smoothing = 0.0
    torch.manual_seed(0)
    if name == "gpt":
        model, bs = GPT(), 32
        opt = torch.optim.AdamW(model.parameters(), lr=2e-3, weight_decay=0.1)
        x = torch.randint(0, 256, (bs, 128))
        y = torch.randint(0, 256, (bs, 128))
        per_sample = 128
    else:
        model, bs = (mlp() if name == "mlp" else cnn()), (128 if name == "mlp" else 64)
        if name == "mlp":
            opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
        else:  # configs/fmnist_cnn.toml's recipe (its EMA is left out on both sides)
            opt = torch.optim.AdamW(model.parameters(), lr=4e-3, weight_decay=0.05)
            smoothing = 0.1
        x = torch.rand(bs, 1, 28, 28)
        y = torch.randint(0, 10, (bs,))
        per_sample = 1
    model, x, y = model.to(device), x.to(device), y.to(device)
    dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(amp)
    scaler = torch.cuda.amp.GradScaler() if amp == "fp16" else None
    model.train()
    for i in range(warmup + steps):
        if i == warmup:
            if device != "cpu":
                torch.cuda.synchronize()
            t0 = time.perf_counter()
        # (torch 1.13's CPU autocast refuses any dtype but bf16, even disabled: no context without amp)
        ctx = torch.autocast(device.split(":")[0], dtype=dtype) if amp else contextlib.nullcontext()
        with ctx:
            out = model(x)
            loss = F.cross_entropy(out.reshape(-1, out.shape[-1]).float(), y.reshape(-1), label_smoothing=smoothing)
        opt.zero_grad(set_to_none=True)
        if scaler:
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
        else:
            loss.backward()
            opt.step()
    if device != "cpu":
        torch.cuda.synchronize()
    dt = time.perf_counter() - t0
    return steps * bs * per_sample / dt


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--steps", type=int, default=40)
    p.add_argument("--only", default="mlp,cnn,gpt")
    p.add_argument("--amp", choices=["bf16", "fp16"], default=None,
                   help="forward under autocast (torch 1.13's CPU autocast: bf16 only)")
    p.add_argument("--device", default="cpu")
    a = p.parse_args()
    torch.set_num_threads(a.threads)
    import os
    for name in a.only.split(","):
        steps = a.steps if name != "cnn" else max(10, a.steps // 2)
        v = bench(name, steps, warmup=3, amp=a.amp, device=a.device)
        print(json.dumps({"model": name, "impl": "torch", "value": round(v, 1),
                          "unit": "tokens/s" if name == "gpt" else "samples/s",
                          "setting": a.device if a.device != "cpu" else
                          f"omp={a.threads} openblas={os.environ.get('OPENBLAS_NUM_THREADS', 'all')}",
                          "amp": a.amp or "off"}),
              flush=True)


if __name__ == "__main__":
    main()
