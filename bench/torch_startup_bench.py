"""Start-up time and peak memory of PyTorch 1.13 (run with /usr/bin/python3) on the runs of
bench/run_startup_bench.sh: a few training steps and one evaluation of fmnist_mlp, fmnist_cnn or
gpt_char, with the data read the way a torch user without torchvision would (gzip + numpy for
Fashion-MNIST's IDX files, the fortunes files' bytes for the GPT).

startup_s: process start (the kernel's start time of this process, /proc/self/stat, as the trainer
measures its own) to the start of the first optimizer step (its batch in hand, before the forward).
peak_rss_mb: getrusage's ru_maxrss at the end (the harness also reads /usr/bin/time's %M).
Prints one JSON line. Same models as bench/torch_train_bench.py.
Usage: OPENBLAS_NUM_THREADS=1 python3 torch_startup_bench.py --config fmnist_cnn [--threads 2] [--steps 10]
"""
import os
import time


def since_process_start():
    # field 22 of /proc/self/stat (after the parenthesised command name) is the start time in
    # clock ticks since boot; CLOCK_BOOTTIME is the same clock
    with open("/proc/self/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    start = int(fields[19]) / os.sysconf("SC_CLK_TCK")
    return time.clock_gettime(time.CLOCK_BOOTTIME) - start


import argparse  # noqa: E402
import glob  # noqa: E402
import gzip  # noqa: E402
import json  # noqa: E402
import resource  # noqa: E402
import sys  # noqa: E402
import warnings  # noqa: E402

import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_train_bench import GPT, cnn, mlp  # noqa: E402

FMNIST = "/usr/share/datasets/fashion-mnist"
MEAN, STD = 0.2860, 0.3530


def read_idx(path):
    with gzip.open(path, "rb") as f:
        raw = f.read()
    ndim = raw[3]
    shape = [int.from_bytes(raw[4 + 4 * i:8 + 4 * i], "big") for i in range(ndim)]
    # no copy (the smallest memory for torch): the tensor is never written, so torch's warning
    # about a read-only buffer does not apply
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", "The given NumPy array is not writable")
        return torch.from_numpy(np.frombuffer(raw, np.uint8, offset=4 + 4 * ndim).reshape(shape))


def fmnist(split):
    images = read_idx(f"{FMNIST}/{split}-images-idx3-ubyte.gz").unsqueeze(1)  # u8 [N, 1, 28, 28]
    labels = read_idx(f"{FMNIST}/{split}-labels-idx1-ubyte.gz").long()
    return images, labels


def fmnist_batches(images, labels, batch, shuffle, gen):
    order = torch.randperm(len(labels), generator=gen) if shuffle else torch.arange(len(labels))
    for i in range(0, len(order), batch):
        idx = order[i:i + batch]
        yield (images[idx].float() / 255 - MEAN) / STD, labels[idx]


def fortunes():
    files = sorted(p for p in glob.glob("/usr/share/games/fortunes/*")
                   if os.path.isfile(p) and not p.endswith(".dat"))
    seen, data = set(), bytearray()
    for p in files:
        real = os.path.realpath(p)
        if real in seen:
            continue
        seen.add(real)
        with open(p, "rb") as f:
            data += f.read()
    tokens = torch.frombuffer(data, dtype=torch.uint8)
    split = len(tokens) - int(len(tokens) * 0.1)
    return tokens[:split], tokens[split:]


def text_batches(tokens, t, batch, shuffle, gen):
    n = (len(tokens) - 1) // t
    order = torch.randperm(n, generator=gen) if shuffle else torch.arange(n)
    for i in range(0, n, batch):
        starts = order[i:i + batch] * t
        idx = starts[:, None] + torch.arange(t + 1)
        w = tokens[idx].long()
        yield w[:, :-1], w[:, 1:]


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--config", required=True, choices=["fmnist_mlp", "fmnist_cnn", "gpt_char"])
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--steps", type=int, default=10)
    p.add_argument("--eval-batches", type=int, default=0, help="0: the config's (fmnist: all, gpt_char: 40)")
    a = p.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    gen = torch.Generator().manual_seed(0)
    if a.config == "gpt_char":
        train, test = fortunes()
        model = GPT()
        opt = torch.optim.AdamW(model.parameters(), lr=2e-3, weight_decay=0.1)
        batches = text_batches(train, 128, 32, True, gen)
        eval_batches = lambda: text_batches(test, 128, 32, False, gen)  # noqa: E731
        eval_limit = a.eval_batches or 40  # configs/gpt_char.toml: eval_batches = 40
    else:
        train, test = fmnist("train"), fmnist("t10k")
        if a.config == "fmnist_mlp":
            model = mlp()
            opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
        else:
            model = cnn()
            opt = torch.optim.AdamW(model.parameters(), lr=0.002, weight_decay=0.01)
        batches = fmnist_batches(*train, 128, True, gen)
        eval_batches = lambda: fmnist_batches(*test, 1000, False, gen)  # noqa: E731
        eval_limit = a.eval_batches or None  # default: the whole test set
    model.train()
    startup = None
    for step, (x, y) in enumerate(batches):
        if step == a.steps:
            break
        if startup is None:
            startup = since_process_start()
        out = model(x)
        loss = F.cross_entropy(out.reshape(-1, out.shape[-1]), y.reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
    model.eval()
    with torch.no_grad():
        for i, (x, y) in enumerate(eval_batches()):
            if eval_limit is not None and i == eval_limit:
                break
            out = model(x)
            F.cross_entropy(out.reshape(-1, out.shape[-1]), y.reshape(-1))
    rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps({"config": a.config, "impl": "torch", "startup_s": round(startup, 3),
                      "peak_rss_mb": round(rss_mb, 1),
                      "setting": f"omp={a.threads} openblas={os.environ.get('OPENBLAS_NUM_THREADS', 'all')}"}),
          flush=True)


if __name__ == "__main__":
    main()
