#!/usr/bin/env bash
# Data-parallel throughput on this machine: trainer with 2 ranks x 1 thread (--nproc 2) against one
# process x 2 threads, and PyTorch 1.13 the same two ways (DDP over gloo, torch_ddp_bench.py; one
# process, torch_train_bench.py at its best OpenMP x OpenBLAS setting), same models, global batches
# and optimizers. Ours is the samples_per_s of the last metrics line (steps after the first window).
# Usage: bench/run_ddp_bench.sh   (BUILD_DIR=build by default; STEPS=60; ROUNDS=2, best kept)
set -euo pipefail
STEPS="${STEPS:-60}"
ROUNDS="${ROUNDS:-2}"
source "$(dirname "${BASH_SOURCE[0]}")/train_bench_lib.sh"

declare -A o12 o21 t12 t12_set t21
for m in mlp cnn gpt; do o12[$m]=0; o21[$m]=0; t12[$m]=0; t21[$m]=0; done
for round in $(seq "$ROUNDS"); do
  for m in mlp cnn gpt; do
    case $m in mlp) cfg=fmnist_mlp; s=$STEPS;; cnn) cfg=fmnist_cnn; s=$(( STEPS / 2 ));; gpt) cfg=gpt_char; s=$STEPS;; esac
    scale=1; [[ $m == gpt ]] && scale=128
    v=$(OMP_NUM_THREADS=2 ours $cfg $s); o12[$m]=$(max "${o12[$m]}" "$(awk "BEGIN{print $v*$scale}")")
    v=$(ours $cfg $s --nproc 2); o21[$m]=$(max "${o21[$m]}" "$(awk "BEGIN{print $v*$scale}")")
  done
  for setting in "2 1" "1 2" "2 2"; do
    set -- $setting
    env ${coretype:+OPENBLAS_CORETYPE=$coretype} OPENBLAS_NUM_THREADS=$2 "$PYTHON" "$ROOT/bench/torch_train_bench.py" --threads "$1" --steps "$STEPS" > "$OUT/t.jsonl"
    while read -r line; do
      m=$(echo "$line" | sed 's/.*"model": "\([a-z]*\)".*/\1/')
      v=$(echo "$line" | sed 's/.*"value": \([0-9.]*\).*/\1/')
      if awk "BEGIN{exit !($v > ${t12[$m]})}"; then t12[$m]=$v; t12_set[$m]="omp=$1 openblas=$2"; fi
    done < "$OUT/t.jsonl"
  done
  env ${coretype:+OPENBLAS_CORETYPE=$coretype} OPENBLAS_NUM_THREADS=1 "$PYTHON" "$ROOT/bench/torch_ddp_bench.py" --nproc 2 --threads 1 --steps "$STEPS" > "$OUT/d.jsonl"
  while read -r line; do
    m=$(echo "$line" | sed 's/.*"model": "\([a-z]*\)".*/\1/')
    v=$(echo "$line" | sed 's/.*"value": \([0-9.]*\).*/\1/')
    t21[$m]=$(max "${t21[$m]}" "$v")
  done < "$OUT/d.jsonl"
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)" >&2
echo "| model | unit | trainer 1x2 | trainer 2x1 | 2x1 / 1x2 | torch 1x2 (setting) | torch DDP 2x1 | torch 2x1 / 1x2 | trainer 2x1 / torch DDP 2x1 | trainer 1x2 / torch 1x2 |"
echo "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"
for m in mlp cnn gpt; do
  unit=samples/s; [[ $m == gpt ]] && unit=tokens/s
  printf "| %s | %s | %.0f | %.0f | %s | %.0f (%s) | %.0f | %s | %s | %s |\n" $m $unit "${o12[$m]}" "${o21[$m]}" \
    "$(ratio "${o21[$m]}" "${o12[$m]}")" "${t12[$m]}" "${t12_set[$m]}" "${t21[$m]}" "$(ratio "${t21[$m]}" "${t12[$m]}")" \
    "$(ratio "${o21[$m]}" "${t21[$m]}")" "$(ratio "${o12[$m]}" "${t12[$m]}")"
done
