#!/usr/bin/env bash
# Training throughput of fmnist_mlp, fmnist_cnn and gpt_char: trainer vs PyTorch 1.13 in the same
# invocation, same batch sizes and optimizers, each side at its best thread setting (ours: one
# OpenMP pool of 2 and of 1; torch: set_num_threads x OPENBLAS_NUM_THREADS in {1,2}).
# Ours is read from the samples_per_s of the last metrics line (steps after the first window).
# Usage: bench/run_train_bench.sh   (BUILD_DIR=build by default; STEPS=60)
set -euo pipefail
STEPS="${STEPS:-60}"
source "$(dirname "${BASH_SOURCE[0]}")/train_bench_lib.sh"

declare -A best_ours best_ours_set best_torch best_torch_set
for m in mlp cnn gpt; do best_ours[$m]=0; best_torch[$m]=0; done
for t in 2 1; do
  for m in mlp cnn gpt; do
    case $m in mlp) cfg=fmnist_mlp; s=$STEPS;; cnn) cfg=fmnist_cnn; s=$(( STEPS / 2 ));; gpt) cfg=gpt_char; s=$STEPS;; esac
    v=$(OMP_NUM_THREADS=$t ours $cfg $s)
    [[ $m == gpt ]] && v=$(awk "BEGIN{print $v*128}")
    if awk "BEGIN{exit !($v > ${best_ours[$m]})}"; then best_ours[$m]=$v; best_ours_set[$m]="omp=$t"; fi
  done
done
for omp in 1 2; do
  for blas in 1 2; do
    OPENBLAS_NUM_THREADS=$blas "$PYTHON" "$ROOT/bench/torch_train_bench.py" --threads $omp --steps "$STEPS" > "$OUT/t.jsonl"
    while read -r line; do
      m=$(echo "$line" | sed 's/.*"model": "\([a-z]*\)".*/\1/')
      v=$(echo "$line" | sed 's/.*"value": \([0-9.]*\).*/\1/')
      if awk "BEGIN{exit !($v > ${best_torch[$m]})}"; then best_torch[$m]=$v; best_torch_set[$m]="omp=$omp openblas=$blas"; fi
    done < "$OUT/t.jsonl"
  done
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)" >&2
echo "| model | unit | trainer | trainer setting | torch 1.13 | torch setting | ours/torch |"
echo "| --- | --- | ---: | --- | ---: | --- | ---: |"
for m in mlp cnn gpt; do
  unit=samples/s; [[ $m == gpt ]] && unit=tokens/s
  r=$(ratio "${best_ours[$m]}" "${best_torch[$m]}")
  printf "| %s | %s | %.0f | %s | %.0f | %s | %s |\n" $m $unit "${best_ours[$m]}" "${best_ours_set[$m]}" \
    "${best_torch[$m]}" "${best_torch_set[$m]}" "$r"
done
