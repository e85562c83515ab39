#!/usr/bin/env bash
# Where a GPT-2 124M training step's GPU time goes: Nsight Compute (ncu) times every kernel of
# STEPS steps of configs/gpt2_124m.toml (MICRO x 1024 tokens, run.attention = ATTENTION) on random
# llm.c-format shards, and the kernels are summed by name: ms per step, launches per step, share.
# Kernels run one at a time under ncu, without cache flushing or clock locking, so a row is the
# kernel's own time; launch gaps and host waits are not in it (bench/run_gpu_bench.sh has the
# step's wall time). Steps include the first (cuBLASLt's heuristics, the optimizer's state).
# Usage: bench/gpu_kernel_profile.sh [out.csv]   (MICRO=16 STEPS=2 ATTENTION=fused TOP=30)
# KERNEL=regex: instead, ncu's full report (--set full: occupancy, registers, memory and tensor-pipe
# throughput, stall reasons) of the first launch of each kernel whose name matches, one step.
set -euo pipefail
MICRO="${MICRO:-16}" STEPS="${STEPS:-2}" ATTENTION="${ATTENTION:-fused}" TOP="${TOP:-30}" PYTHON="${PYTHON:-python3}"
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"; BUILD_DIR="${BUILD_DIR:-$ROOT/build}"
NCU="${NCU:-$(command -v ncu || ls /usr/local/cuda/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)}"
OUT="$(mktemp -d)"; trap 'rm -rf "$OUT"' EXIT
CSV="${1:-$OUT/kernels.csv}"
ncu_args=(--metrics gpu__time_duration.sum --csv --page raw --print-units base --log-file "$CSV")
[[ -n ${KERNEL:-} ]] && { STEPS=1; ncu_args=(--set full --kernel-name "regex:$KERNEL" --launch-count 1 --page details
  --log-file "$CSV"); }
"$PYTHON" - "$OUT" <<'PY'
import os, random, struct, sys
random.seed(0)
for name, n in (('train_000001', 400_000), ('val_000000', 100_000)):
    with open(os.path.join(sys.argv[1], name + '.bin'), 'wb') as f:
        f.write(struct.pack('<256i', 20240520, 1, n, *([0] * 253)))
        f.write(struct.pack(f'<{n}H', *(random.randrange(50257) for _ in range(n))))
PY
"$NCU" "${ncu_args[@]}" --print-kernel-base function --cache-control none --clock-control none \
  "$BUILD_DIR/trainer" run "$ROOT/configs/gpt2_124m.toml" --set data.train=\"$OUT/train_*.bin\" \
  --set data.eval=\"$OUT/val_*.bin\" --set data.micro_batch_size="$MICRO" --set train.tokens_per_step=$((MICRO * 1024)) \
  --set train.steps="$STEPS" --set train.eval_every=0 --set train.eval_batches=1 --set checkpoint.every=0 \
  --set checkpoint.save_final=false --set log.progress=none --set run.device=\"cuda\" --set run.out_dir=\"$OUT/runs\" \
  --set run.attention=\"$ATTENTION\" > "$OUT/trainer.log" 2>&1 || { tail -20 "$OUT/trainer.log"; exit 1; }
[[ -n ${KERNEL:-} ]] && { cat "$CSV"; exit 0; }
"$PYTHON" - "$CSV" "$STEPS" "$TOP" <<'PY'
import csv, sys, collections
rows = [r for r in csv.reader(open(sys.argv[1])) if r and not r[0].startswith('==')]
head, body = rows[0], [r for r in rows[1:] if r[0].isdigit()]
name, t = head.index('Kernel Name'), head.index('gpu__time_duration.sum')
steps, top = int(sys.argv[2]), int(sys.argv[3])
ns, count = collections.Counter(), collections.Counter()
for r in body:
    ns[r[name]] += float(r[t].replace(",", "")); count[r[name]] += 1
total = sum(ns.values())
print(f"{len(body) / steps:.0f} kernel launches and {total / steps / 1e6:.1f} ms of kernel time per step")
print("| kernel | ms/step | launches/step | share |\n| --- | ---: | ---: | ---: |")
for k, v in ns.most_common(top):
    print(f"| `{k[:70]}` | {v / steps / 1e6:.2f} | {count[k] / steps:.0f} | {100 * v / total:.1f}% |")
PY
