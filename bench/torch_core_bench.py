#!/usr/bin/env python3
"""torch_core_bench: the benchmarks of core_bench.cpp in PyTorch, as JSON lines.

  OPENBLAS_NUM_THREADS=B /usr/bin/python3 torch_core_bench.py --threads T [--reps N]
      times sgemm (torch.mm), cnn_block (batch norm, relu, max pool: forward and backward), add,
      mul_scalar, exp, relu and sum with torch.set_num_threads(T)
      (torch's OpenMP pool: elementwise ops) and OPENBLAS_NUM_THREADS=B (OpenBLAS's own pthread
      pool: torch.mm on Debian's build). The variable must be set before torch is imported.
  /usr/bin/python3 torch_core_bench.py report ours.jsonl torch_*.jsonl
      prints the table: each side at its best setting per benchmark, and ours/torch (>1 = we are faster).

Only the benchmark harness uses Python; the library and its tests never do.
"""
import argparse
import json
import os
import statistics
import sys
import time


def median_seconds(reps, fn):
    fn()
    fn()
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def run(args):
    import torch

    torch.set_num_threads(args.threads)
    torch.set_grad_enabled(False)
    blas = os.environ.get("OPENBLAS_NUM_THREADS", "unset (all cores)")
    threads = f"omp={torch.get_num_threads()} openblas={blas}"
    # Same rule as core_bench.cpp: "reuse" when GLIBC_TUNABLES keeps freed 64 MiB blocks in the heap.
    mode = "reuse" if "mmap_threshold" in os.environ.get("GLIBC_TUNABLES", "") else "default"
    sink = [0.0]

    def emit(bench, shape, sec, value, unit):
        print(json.dumps({"bench": bench, "shape": shape, "impl": "torch", "version": torch.__version__, "threads": threads,
                          "malloc": mode,
                          "median_ms": round(sec * 1e3, 4), "value": round(value, 3), "unit": unit}), flush=True)

    def selected(name):
        return not args.only or name in args.only.split(",")

    if selected("sgemm"):
        for m, k, n in ((1024, 1024, 1024), (512, 512, 512), (256, 784, 128)):
            a, b = torch.rand(m, k), torch.rand(k, n)
            sec = median_seconds(args.reps, lambda: sink.__setitem__(0, sink[0] + torch.mm(a, b).numel()))
            emit("sgemm", f"{m}x{k}x{n}", sec, 2.0 * m * k * n / sec / 1e9, "GFLOP/s")

    if selected("cnn_block"):  # core_bench.cpp's cnn_block: batch norm (batch statistics) -> relu -> 2x2 max pool
        F = torch.nn.functional
        for nb, c, hw in ((64, 32, 28), (64, 64, 14)):
            x, w, bias = torch.randn(nb, c, hw, hw), torch.rand(c), torch.randn(c) * 0.1
            xb = x.numel() * 4.0
            yb = xb / 4
            block = lambda x, w, bias: F.max_pool2d(F.relu(F.batch_norm(x, None, None, w, bias, training=True)), 2)
            sec = median_seconds(args.reps, lambda: sink.__setitem__(0, sink[0] + block(x, w, bias).numel()))
            emit("cnn_block_forward", f"{nb}x{c}x{hw}x{hw}", sec, (xb + 3 * yb) / sec / 1e9, "GB/s")
            with torch.enable_grad():
                xs, ws, bs = (t.clone().requires_grad_(True) for t in (x, w, bias))
                y = block(xs, ws, bs)
                gy = torch.randn(y.shape)
                sec = median_seconds(args.reps, lambda: torch.autograd.grad(y, (xs, ws, bs), gy, retain_graph=True))
            emit("cnn_block_backward", f"{nb}x{c}x{hw}x{hw}", sec, (2 * xb + 4 * yb) / sec / 1e9, "GB/s")

    n = args.numel
    a, b = torch.randn(n), torch.randn(n)
    for _ in range(16):  # heap warm-up, as in core_bench.cpp (memalign-ed blocks refit only after ~10 calls)
        sink[0] += (a + b).numel()
    fb = n * 4.0
    cases = [
        ("add", 3 * fb, lambda: a + b),
        ("mul_scalar", 2 * fb, lambda: a * 2.0),
        ("exp", 2 * fb, lambda: torch.exp(a)),
        ("relu", 2 * fb, lambda: torch.relu(a)),
        ("sum", fb, lambda: torch.sum(a)),
    ]
    for name, nbytes, fn in cases:
        if selected(name):
            sec = median_seconds(args.reps, lambda: sink.__setitem__(0, sink[0] + fn().numel()))
            emit(name, str(n), sec, nbytes / sec / 1e9, "GB/s")


def load(paths):
    rows = []
    for p in paths:
        with open(p) as f:
            rows += [json.loads(line) for line in f if line.startswith("{")]
    return rows


def report(args):
    rows = load(args.files)
    order = []  # (bench, shape, malloc) in first-seen order
    for r in rows:
        key = (r["bench"], r["shape"], r["malloc"])
        if key not in order:
            order.append(key)

    def key_of(r):
        return (r["bench"], r["shape"], r["malloc"])

    def best(impl, key):
        cands = [r for r in rows if r["impl"] == impl and key_of(r) == key]
        return max(cands, key=lambda r: r["value"]) if cands else None

    version = next((r["version"] for r in rows if r["impl"] == "torch"), "?")
    print(f"trainer vs torch {version}: each at its best setting per row (median of its runs, best round)")
    print()
    print("| benchmark | shape | malloc | unit | trainer | trainer setting | torch | torch setting | ours/torch | raw loop |")
    print("| --- | --- | --- | --- | ---: | --- | ---: | --- | ---: | ---: |")
    for key in order:
        ours, torch_best, raw = best("trainer", key), best("torch", key), best("raw_loop", key)
        if ours is None or torch_best is None:
            continue
        ratio = ours["value"] / torch_best["value"]
        raw_s = f"{raw['value']:.1f}" if raw else "-"
        print(f"| {key[0]} | {key[1]} | {key[2]} | {ours['unit']} | {ours['value']:.1f} | {ours['threads']} | "
              f"{torch_best['value']:.1f} | {torch_best['threads']} | {ratio:.2f} | {raw_s} |")
    print()
    print("every setting (best round):")
    settings = []
    for r in rows:
        if (r["impl"], r["threads"]) not in settings:
            settings.append((r["impl"], r["threads"]))
    print("| setting | " + " | ".join(f"{b} {sh} {m}" for b, sh, m in order) + " |")
    print("| --- |" + " ---: |" * len(order))
    for s in settings:
        vals = []
        for key in order:
            v = [r["value"] for r in rows if (r["impl"], r["threads"]) == s and key_of(r) == key]
            vals.append(f"{max(v):.1f}" if v else "-")
        print(f"| {s[0]} {s[1]} | " + " | ".join(vals) + " |")


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "report":
        p = argparse.ArgumentParser(prog="torch_core_bench.py report")
        p.add_argument("files", nargs="+")
        report(p.parse_args(sys.argv[2:]))
        return
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--threads", type=int, default=1, help="torch.set_num_threads (OpenMP pool)")
    p.add_argument("--reps", type=int, default=11)
    p.add_argument("--numel", type=int, default=1 << 24)
    p.add_argument("--only", default="", help="comma-separated benchmark names (default: all)")
    run(p.parse_args())


if __name__ == "__main__":
    main()
