"""Step-for-step parity of `trainer run` with PyTorch 1.13 on one recipe: the same starting weights
(torch's initialisation, saved to safetensors and loaded with [model] init), the same batches (the
training set in order: shuffle off, no augmentation, dropout layers left out), the same optimizer
and loss at a constant learning rate. Prints each step's loss on both sides and, at the end, the
largest difference of every parameter and buffer, so that a change in an op's summation order shows
as the step where the two sides part.

Run trainer with torch's own kernels for a close comparison: `--env TR_SGEMM=openblas --env
TR_CONV=im2col` (OpenBLAS's sgemm and im2col convolutions, as torch 1.13's CPU build).

Usage: /usr/bin/python3 bench/step_parity.py configs/fmnist_cnn.toml [--steps 20] [--threads 1]
           [--trainer build/trainer] [--env TR_SGEMM=openblas ...] [--set optimizer.lr=0.001 ...]
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

import torch
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(ROOT, "tests", "fixtures", "generators"))
from torch_recipe import build_model, build_optimizer, load_data, load_recipe  # noqa: E402
from safetensors_reader import load, save  # noqa: E402


def toml_value(v):
    if isinstance(v, str):
        return json.dumps(v)
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, list):
        return "[" + ", ".join(toml_value(x) for x in v) + "]"
    return repr(v)


def write_model_file(model_cfg, path):
    """The model file without its dropout layers (their masks come from different generators)."""
    lines = [f"input = {toml_value(model_cfg['input'])}"]
    for layer in model_cfg["layers"]:
        if layer["type"] == "dropout":
            continue
        lines.append("[[layers]]")
        lines += [f"{k} = {toml_value(v)}" for k, v in layer.items()]
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("config")
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--trainer", default=os.path.join(ROOT, "build", "trainer"))
    ap.add_argument("--env", action="append", default=[], help="NAME=value for trainer's environment")
    ap.add_argument("--set", action="append", default=[], dest="sets")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    cfg, base, model_cfg = load_recipe(a.config, a.sets)
    model_cfg["layers"] = [l for l in model_cfg["layers"] if l["type"] != "dropout"]

    work = tempfile.mkdtemp(prefix="step_parity_")
    write_model_file(model_cfg, os.path.join(work, "model.toml"))
    torch.manual_seed(a.seed)
    model = build_model(model_cfg)
    save(os.path.join(work, "init.safetensors"), {k: v.contiguous() for k, v in model.state_dict().items()},
         {"format": "pt"})

    # trainer: the same recipe from the same weights, one train line per step
    overrides = {"model.file": os.path.join(work, "model.toml"), "model.init": os.path.join(work, "init.safetensors"),
                 "data.shuffle": False,
                 "data.transforms": [], "scheduler.type": "lambda", "scheduler.lambda": "1.0",
                 "scheduler.interval": "step", "train.steps": a.steps, "train.log_every": 1,
                 "train.ema_decay": 0.0, "train.eval_every": 0, "run.name": "parity"}
    cmd = [a.trainer, "run", os.path.abspath(a.config)] + [f"--set={s}" for s in a.sets]
    for k, v in overrides.items():
        cmd.append(f"--set={k}={toml_value(v)}")
    env = dict(os.environ, OMP_NUM_THREADS=str(a.threads))
    env.update(e.split("=", 1) for e in a.env)
    subprocess.run(cmd, cwd=work, env=env, check=True, stdout=subprocess.DEVNULL)
    ours = [json.loads(l) for l in open(os.path.join(work, "runs", "parity", "metrics.jsonl"))]
    ours = [l["loss"] for l in ours if l.get("split") == "train"]
    final, _ = load(os.path.join(work, "runs", "parity", "checkpoints", "final", "model.safetensors"))
    opt_state, _ = load(os.path.join(work, "runs", "parity", "checkpoints", f"step_{a.steps}", "optimizer.safetensors"))

    # torch
    d = cfg["data"]
    x, y, _, _, _ = load_data(d, base)
    bs = d["batch_size"]
    opt = build_optimizer(cfg["optimizer"], model.parameters())
    smoothing = cfg.get("loss", {}).get("label_smoothing", 0.0)
    model.train()
    print("step  trainer       torch         |diff|")
    worst = 0.0
    for step in range(a.steps):
        xb, yb = x[step * bs:(step + 1) * bs], y[step * bs:(step + 1) * bs]
        opt.zero_grad()
        loss = F.cross_entropy(model(xb), yb, label_smoothing=smoothing)
        loss.backward()
        opt.step()
        diff = abs(ours[step] - loss.item())
        worst = max(worst, diff)
        print(f"{step + 1:4d}  {ours[step]:.8f}  {loss.item():.8f}  {diff:.2e}")
    print("optimizer state               max|trainer - torch|   max|torch|")
    for i, p in enumerate(model.parameters()):
        for name, v in opt.state[p].items():
            key = f"state.{i}.{name}"
            if key in opt_state and v.dim() > 0:
                print(f"{key:32s}{(opt_state[key].double() - v.double()).abs().max().item():12.3e}"
                      f"{v.abs().max().item():14.3e}")
    print(f"largest loss difference: {worst:.3e}")
    print("tensor                      max|trainer - torch|   max|torch|")
    for k, v in model.state_dict().items():
        if v.is_floating_point():
            print(f"{k:28s}{(final[k].double() - v.double()).abs().max().item():14.3e}"
                  f"{v.abs().max().item():14.3e}")


if __name__ == "__main__":
    main()
