"""The recipe of a trainer run config, run in PyTorch 1.13 (CPU; /usr/bin/python3): wall time to the
same accuracy on the same data, for comparing `trainer run` with the reference.

It reads the trainer's own files, so both sides run one recipe: the run config (configs/*.toml) and
its model file (models/*.toml) give the model (the same layers in the same order; torch's default
initialisation, as trainer's), the [data] IDX files (default: Debian's Fashion-MNIST), batch size,
normalisation and transforms (random_crop with padding/fill, random_horizontal_flip: per sample, as
torchvision's, before Normalize), the optimizer and its hyperparameters, the scheduler (cosine,
onecycle, linear, step, exponential, lambda, sequential of those; interval step or epoch), the loss
(cross_entropy with label_smoothing), [train] epochs / steps and ema_decay (AveragedModel with
ema_avg = decay * e + (1 - decay) * p and use_buffers=True: BatchNorm's running statistics averaged,
integer buffers copied at each update, as trainer does). The random
numbers differ from trainer's (another generator), so the accuracies agree statistically, not
bit for bit. Features the script does not know are refused rather than ignored.

Prints one JSON line per eval (end of every epoch, on the whole test set) with the wall time since
training began (eval time included, data loading before it excluded), and a summary line.

Usage: /usr/bin/python3 bench/torch_recipe.py configs/fmnist_cnn.toml [--threads 2] [--seed 0]
                                              [--set train.epochs=1 ...]
"""
import argparse
import gzip
import json
import math
import os
import time
import tomllib
import warnings

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.optim import lr_scheduler as S
from torch.optim.swa_utils import AveragedModel

FMNIST = "/usr/share/datasets/fashion-mnist"
warnings.filterwarnings("ignore", message="Lazy modules are a new feature")


def refuse(msg):
    raise SystemExit(f"torch_recipe.py: {msg}")


def check_keys(table, known, what):
    extra = set(table) - set(known)
    if extra:
        refuse(f"{what}: keys this script does not implement: {sorted(extra)}")


# ---------------------------------------------------------------- config

def apply_set(cfg, assignment):
    key, value = assignment.split("=", 1)
    try:
        v = tomllib.loads(f"v = {value}")["v"]
    except tomllib.TOMLDecodeError:
        v = value
    t = cfg
    parts = key.split(".")
    for p in parts[:-1]:
        t = t.setdefault(p, {})
    t[parts[-1]] = v


def resolve(path, base_dir):
    if os.path.isabs(path) or os.path.exists(path):
        return path
    return os.path.join(base_dir, path)


# ---------------------------------------------------------------- model

def build_layers(layers, what):
    mods = []
    for i, l in enumerate(layers):
        mods.append(build_layer(l, f"{what} layer {i}"))
    return nn.Sequential(*mods)


class Residual(nn.Module):
    def __init__(self, body, shortcut, activation):
        super().__init__()
        self.body, self.shortcut, self.activation = body, shortcut, activation

    def forward(self, x):
        y = self.body(x) + (self.shortcut(x) if self.shortcut is not None else x)
        return {"relu": F.relu, "none": lambda v: v}[self.activation](y)


def build_layer(l, what):
    t = l["type"]
    k = dict(l)
    k.pop("type")
    k.pop("name", None)
    if t == "conv2d":
        check_keys(k, {"out_channels", "kernel_size", "stride", "padding", "dilation", "groups", "bias"}, what)
        return nn.LazyConv2d(k["out_channels"], k["kernel_size"], stride=k.get("stride", 1), padding=k.get("padding", 0),
                             dilation=k.get("dilation", 1), groups=k.get("groups", 1), bias=k.get("bias", True))
    if t == "batch_norm2d":
        check_keys(k, {"eps", "momentum"}, what)
        return nn.LazyBatchNorm2d(eps=k.get("eps", 1e-5), momentum=k.get("momentum", 0.1))
    if t == "linear":
        check_keys(k, {"out_features", "bias"}, what)
        return nn.LazyLinear(k["out_features"], bias=k.get("bias", True))
    if t == "relu":
        return nn.ReLU()
    if t == "max_pool2d":
        check_keys(k, {"kernel_size", "stride", "padding"}, what)
        return nn.MaxPool2d(k["kernel_size"], stride=k.get("stride"), padding=k.get("padding", 0))
    if t == "adaptive_avg_pool2d":
        return nn.AdaptiveAvgPool2d(k["output_size"])
    if t == "flatten":
        return nn.Flatten()
    if t == "dropout":
        return nn.Dropout(k.get("p", 0.5))
    if t == "residual":
        check_keys(k, {"layers", "shortcut", "activation"}, what)
        short = build_layers(k["shortcut"], what + " shortcut") if "shortcut" in k else None
        return Residual(build_layers(k["layers"], what + " body"), short, k.get("activation", "none"))
    refuse(f"{what}: layer type '{t}' is not implemented here")


def build_model(model_cfg):
    check_keys(model_cfg, {"input", "layers"}, "model file")
    m = build_layers(model_cfg["layers"], "model")
    with torch.no_grad():
        m(torch.zeros(2, *model_cfg["input"]))  # materialise the lazy layers (torch's default init)
    return m


# ---------------------------------------------------------------- data

def read_idx(path):
    with gzip.open(path, "rb") as f:
        raw = f.read()
    ndim = raw[3]
    dims = [int.from_bytes(raw[4 + 4 * i:8 + 4 * i], "big") for i in range(ndim)]
    return np.frombuffer(raw, dtype=np.uint8, offset=4 + 4 * ndim).reshape(dims)


def load_data(d, base_dir):
    def p(key, name):
        return resolve(d[key], base_dir) if key in d else os.path.join(FMNIST, name)

    xs = {s: torch.from_numpy(read_idx(p(f"{s}_images", f"{n}-images-idx3-ubyte.gz")).copy()) for s, n in
          (("train", "train"), ("test", "t10k"))}
    ys = {s: torch.from_numpy(read_idx(p(f"{s}_labels", f"{n}-labels-idx1-ubyte.gz")).astype(np.int64)) for s, n in
          (("train", "train"), ("test", "t10k"))}
    mean, std = d.get("normalize", [0.0, 1.0])
    # ToTensor (x / 255) and Normalize, in f32 as torchvision
    norm = {s: ((x.float().div(255.0) - mean) / std).unsqueeze(1) for s, x in xs.items()}
    return norm["train"], ys["train"], norm["test"], ys["test"], (mean, std)


def make_augment(transforms, mean_std):
    mean, std = mean_std
    steps = []
    for i, t in enumerate(transforms):
        k = dict(t)
        kind = k.pop("type")
        if kind == "random_crop":
            check_keys(k, {"padding", "fill", "size"}, f"transform {i}")
            pad, fill = k.get("padding", 0), (k.get("fill", 0.0) - mean) / std

            def crop(x, pad=pad, fill=fill):
                if pad == 0:
                    return x
                b, _, h, w = x.shape
                xp = F.pad(x, (pad, pad, pad, pad), value=fill)
                top = torch.randint(0, 2 * pad + 1, (b,)).tolist()
                left = torch.randint(0, 2 * pad + 1, (b,)).tolist()
                return torch.stack([xp[j, :, top[j]:top[j] + h, left[j]:left[j] + w] for j in range(b)])
            steps.append(crop)
        elif kind == "random_horizontal_flip":
            check_keys(k, {"p"}, f"transform {i}")
            p = k.get("p", 0.5)

            def flip(x, p=p):
                m = (torch.rand(x.shape[0]) < p).view(-1, 1, 1, 1)
                return torch.where(m, x.flip(-1), x)
            steps.append(flip)
        else:
            refuse(f"transform '{kind}' is not implemented here")

    def augment(x):
        for s in steps:
            x = s(x)
        return x
    return augment


# ---------------------------------------------------------------- optimizer, scheduler

def build_optimizer(o, params):
    o = dict(o)
    kind = o.pop("type", "sgd")
    if "groups" in o:
        refuse("[[optimizer.groups]] is not implemented here")
    if kind == "sgd":
        return torch.optim.SGD(params, lr=o.get("lr", 0.01), momentum=o.get("momentum", 0.0),
                               dampening=o.get("dampening", 0.0), weight_decay=o.get("weight_decay", 0.0),
                               nesterov=o.get("nesterov", False))
    cls = {"adam": torch.optim.Adam, "adamw": torch.optim.AdamW}[kind]
    return cls(params, lr=o.get("lr", 1e-3), betas=tuple(o.get("betas", (0.9, 0.999))), eps=o.get("eps", 1e-8),
               weight_decay=o.get("weight_decay", 0.01 if kind == "adamw" else 0.0), amsgrad=o.get("amsgrad", False))


def lambda_fn(expr, ctx, interval, base_lr):
    if "?" in expr:
        refuse(f"lambda '{expr}': the ternary is not translated here")
    code = compile(expr.replace("^", "**"), "lambda", "eval")

    def warmup(s, w):
        return 1.0 if w <= 0 else min(1.0, (s + 1) / w)

    def cosine(s, total):
        return 0.5 * (1 + math.cos(math.pi * min(s, total) / total))

    def fn(e):
        step, epoch = (e, e // ctx["steps_per_epoch"]) if interval == "step" else (e * ctx["steps_per_epoch"], e)
        env = dict(step=step, epoch=epoch, last_epoch=e, base_lr=base_lr, total_steps=ctx["total_steps"],
                   total_epochs=ctx["epochs"], steps_per_epoch=ctx["steps_per_epoch"],
                   warmup_steps=ctx["warmup_steps"], warmup=warmup, cosine=cosine, min=min, max=max,
                   cos=math.cos, sin=math.sin, exp=math.exp, sqrt=math.sqrt, floor=math.floor, ceil=math.ceil,
                   pi=math.pi, _pi=math.pi)
        return eval(code, {"__builtins__": {}}, env)
    return fn


def build_scheduler(s, opt, ctx, span=None, interval=None):
    s = dict(s)
    t = s.pop("type")
    interval = interval or s.pop("interval", "step" if t == "onecycle" else "epoch")
    s.pop("interval", None)
    if span is None:
        span = ctx["total_steps"] if interval == "step" else ctx["epochs"]
    if t == "cosine":
        return S.CosineAnnealingLR(opt, s.get("T_max", span), s.get("eta_min", 0.0)), interval
    if t == "onecycle":
        kw = {k: s[k] for k in ("pct_start", "anneal_strategy", "cycle_momentum", "base_momentum", "max_momentum",
                                "div_factor", "final_div_factor", "three_phase") if k in s}
        return S.OneCycleLR(opt, s["max_lr"], total_steps=s.get("total_steps", span), **kw), interval
    if t == "linear":
        return S.LinearLR(opt, s.get("start_factor", 1 / 3), s.get("end_factor", 1.0), s.get("total_iters", 5)), interval
    if t == "step":
        return S.StepLR(opt, s["step_size"], s.get("gamma", 0.1)), interval
    if t == "exponential":
        return S.ExponentialLR(opt, s["gamma"]), interval
    if t == "lambda":
        exprs = s["lambda"] if isinstance(s["lambda"], list) else [s["lambda"]]
        c = dict(ctx, warmup_steps=s.get("warmup_steps", ctx["warmup_steps"]))
        fns = [lambda_fn(exprs[0 if len(exprs) == 1 else g], c, interval, grp["lr"])
               for g, grp in enumerate(opt.param_groups)]
        return S.LambdaLR(opt, fns), interval
    if t == "sequential":
        ms = s["milestones"]
        children = []
        for i, c in enumerate(s["schedulers"]):
            begin = 0 if i == 0 else ms[i - 1]
            child_span = ms[i] - begin if i + 1 < len(s["schedulers"]) else max(span - begin, 0)
            children.append(build_scheduler(c, opt, ctx, child_span, interval)[0])
        return S.SequentialLR(opt, children, ms), interval
    refuse(f"scheduler '{t}' is not implemented here")


# ---------------------------------------------------------------- loop

def evaluate(model, x, y, bs, label_smoothing):
    model.eval()
    loss_sum, correct = 0.0, 0
    with torch.no_grad():
        for i in range(0, len(y), bs):
            out = model(x[i:i + bs])
            loss_sum += F.cross_entropy(out, y[i:i + bs], label_smoothing=label_smoothing).item() * len(out)
            correct += (out.argmax(1) == y[i:i + bs]).sum().item()
    model.train()
    return loss_sum / len(y), correct / len(y)


def load_recipe(config, sets):
    """The run config (with trainer's --set overrides), its directory, and its model file's table."""
    with open(config, "rb") as f:
        cfg = tomllib.load(f)
    for s in sets:
        apply_set(cfg, s)
    base = os.path.dirname(os.path.abspath(config))
    with open(resolve(cfg["model"]["file"], base), "rb") as f:
        model_cfg = tomllib.load(f)
    return cfg, base, model_cfg


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("config")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--seed", type=int, default=None, help="default: the config's [run] seed")
    ap.add_argument("--set", action="append", default=[], help="section.key=value, as trainer's --set")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    cfg, base, model_cfg = load_recipe(a.config, a.set)
    run, data, train = cfg.get("run", {}), cfg.get("data", {}), cfg.get("train", {})
    loss_cfg = cfg.get("loss", {})
    if loss_cfg.get("type", "cross_entropy") != "cross_entropy":
        refuse("only the cross_entropy loss is implemented here")
    check_keys(train, {"epochs", "steps", "log_every", "eval_every", "eval_batches", "ema_decay"}, "[train]")
    if data.get("dataset", "idx") != "idx":
        refuse("only the idx dataset is implemented here")
    torch.manual_seed(a.seed if a.seed is not None else run.get("seed", 0))

    model = build_model(model_cfg)
    xtr, ytr, xte, yte, mean_std = load_data(data, base)
    augment = make_augment(data.get("transforms", []), mean_std)
    bs, ebs = data.get("batch_size", 64), data.get("eval_batch_size", 0) or data.get("batch_size", 64)
    drop_last = data.get("drop_last", False)
    steps_per_epoch = len(ytr) // bs if drop_last else math.ceil(len(ytr) / bs)
    epochs = train.get("epochs", 1)
    total_steps = train.get("steps", 0) or steps_per_epoch * epochs
    epochs = math.ceil(total_steps / steps_per_epoch)
    ctx = dict(total_steps=total_steps, steps_per_epoch=steps_per_epoch, epochs=epochs, warmup_steps=0)
    opt = build_optimizer(cfg.get("optimizer", {}), model.parameters())
    sched, interval = build_scheduler(cfg["scheduler"], opt, ctx) if cfg.get("scheduler") else (None, None)
    ls = loss_cfg.get("label_smoothing", 0.0)
    decay = train.get("ema_decay", 0.0)
    ema = (AveragedModel(model, avg_fn=lambda e, p, n: decay * e + (1 - decay) * p, use_buffers=True)
           if decay > 0 else None)
    print(json.dumps(dict(config=a.config, params=sum(p.numel() for p in model.parameters()), steps=total_steps,
                          threads=a.threads, torch=torch.__version__)), flush=True)

    step, t0 = 0, time.perf_counter()
    result = {}
    for epoch in range(epochs):
        model.train()
        perm = torch.randperm(len(ytr))
        for i in range(steps_per_epoch):
            if step >= total_steps:
                break
            idx = perm[i * bs:(i + 1) * bs]
            x, y = augment(xtr[idx]), ytr[idx]
            loss = F.cross_entropy(model(x), y, label_smoothing=ls)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            step += 1
            if ema is not None:
                ema.update_parameters(model)
                with torch.no_grad():
                    for b_ema, b in zip(ema.module.buffers(), model.buffers()):
                        if not b.is_floating_point():  # num_batches_tracked: copied, as trainer does
                            b_ema.copy_(b)
            if sched is not None and interval == "step":
                sched.step()
        if sched is not None and interval == "epoch":
            sched.step()
        el, ea = evaluate(model, xte, yte, ebs, ls)
        line = dict(split="eval", step=step, epoch=epoch, loss=round(el, 6), accuracy=ea)
        if ema is not None:
            ml, ma = evaluate(ema.module, xte, yte, ebs, ls)
            line.update(ema_loss=round(ml, 6), ema_accuracy=ma)
        line["wall_s"] = round(time.perf_counter() - t0, 1)
        print(json.dumps(line), flush=True)
        result = line
    print(json.dumps(dict(done=True, steps=step, wall_s=result.get("wall_s"), accuracy=result.get("accuracy"),
                          ema_accuracy=result.get("ema_accuracy"))), flush=True)


if __name__ == "__main__":
    main()
