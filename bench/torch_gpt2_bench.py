"""GPT-2 (124M) training throughput in PyTorch on a GPU: nanoGPT's model (the same layout as
models/gpt2_124m_padded.toml: vocab 50304, 12 blocks of 12 heads, n_embd 768, context 1024, the lm
head tied to wte), bf16 autocast, F.scaled_dot_product_attention (flash on Hopper), fused AdamW
(betas 0.9/0.95, weight decay 0.1 on 2-D weights), clip_grad_norm_(1.0); random tokens (loading
is not timed). Prints one JSON line: tokens/s over the timed steps, peak memory, the mode.
Usage: python3 torch_gpt2_bench.py [--batch 16] [--steps 10] [--warmup 3] [--compile]
"""
import argparse
import json
import math
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


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
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.c_proj(y.transpose(1, 2).contiguous().view(b, t, c))


class Block(nn.Module):
    def __init__(self, c, h):
        super().__init__()
        self.ln_1, self.attn, self.ln_2 = nn.LayerNorm(c), Attn(c, h), nn.LayerNorm(c)
        self.c_fc, self.c_proj = nn.Linear(c, 4 * c), nn.Linear(4 * c, c)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.c_proj(F.gelu(self.c_fc(self.ln_2(x)), approximate='tanh'))


class GPT(nn.Module):
    def __init__(self, vocab=50304, c=768, t=1024, layers=12, heads=12):
        super().__init__()
        self.wte, self.wpe = nn.Embedding(vocab, c), nn.Embedding(t, c)
        self.h = nn.ModuleList(Block(c, heads) for _ in range(layers))
        self.ln_f = nn.LayerNorm(c)
        self.lm_head = nn.Linear(c, vocab, bias=False)
        self.lm_head.weight = self.wte.weight  # tied, as nanoGPT
        for n, p in self.named_parameters():
            if p.dim() >= 2:
                nn.init.normal_(p, 0.0, 0.02 / math.sqrt(2 * layers) if n.endswith('c_proj.weight') else 0.02)
            else:
                nn.init.zeros_(p) if n.endswith('bias') else nn.init.ones_(p)

    def forward(self, idx, targets):
        t = idx.shape[1]
        x = self.wte(idx) + self.wpe(torch.arange(t, device=idx.device))
        for b in self.h:
            x = b(x)
        logits = self.lm_head(self.ln_f(x))
        return F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--batch', type=int, default=16)
    ap.add_argument('--seq', type=int, default=1024)
    ap.add_argument('--steps', type=int, default=10)
    ap.add_argument('--warmup', type=int, default=3)
    ap.add_argument('--compile', action='store_true')
    a = ap.parse_args()
    torch.manual_seed(0)
    dev = 'cuda'
    model = GPT().to(dev)
    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{'params': decay, 'weight_decay': 0.1}, {'params': no_decay, 'weight_decay': 0.0}],
                            lr=6e-4, betas=(0.9, 0.95), eps=1e-8, fused=True)
    step_model = torch.compile(model) if a.compile else model
    x = torch.randint(0, 50257, (a.batch, a.seq), device=dev)
    y = torch.randint(0, 50257, (a.batch, a.seq), device=dev)

    def step():
        with torch.autocast('cuda', dtype=torch.bfloat16):
            loss = step_model(x, y)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        return loss

    t0 = time.time()
    for _ in range(a.warmup):
        step()
    torch.cuda.synchronize()
    warm = time.time() - t0
    torch.cuda.reset_peak_memory_stats()
    t0 = time.time()
    for _ in range(a.steps):
        loss = step()
    loss.item()
    torch.cuda.synchronize()
    dt = time.time() - t0
    print(json.dumps({'bench': 'torch_gpt2', 'compile': a.compile, 'torch': torch.__version__,
                      'tokens_per_s': a.batch * a.seq * a.steps / dt, 'ms_per_step': 1000 * dt / a.steps,
                      'warmup_s': warm, 'mem_peak_mb': torch.cuda.max_memory_allocated() / 2**20,
                      'gpu': torch.cuda.get_device_name()}), flush=True)


if __name__ == '__main__':
    main()
