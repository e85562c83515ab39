#!/usr/bin/env bash
# Training throughput of two trainer builds on the same machine in the same run: a change's
# before/after. Runs fmnist_mlp, fmnist_cnn and gpt_char with each binary in turn (A, B, A, B, ...),
# ROUNDS times, keeps each side's best, and prints B/A (> 1: B is faster).
# Usage: bench/run_ab_bench.sh DIR_A DIR_B   (each a build dir holding `trainer`; STEPS=60, ROUNDS=3,
#        OMP_NUM_THREADS=2)
set -euo pipefail
A=$(realpath "$1") B=$(realpath "$2")
STEPS="${STEPS:-60}" ROUNDS="${ROUNDS:-3}"
export OMP_NUM_THREADS="${OMP_NUM_THREADS:-2}"
BUILD_DIR="$A" source "$(dirname "${BASH_SOURCE[0]}")/train_bench_lib.sh"

declare -A best
for side in A B; do for m in mlp cnn gpt; do best[$side$m]=0; done; done
for r in $(seq "$ROUNDS"); do
  for m in mlp cnn gpt; do
    case $m in mlp) cfg=fmnist_mlp; s=$STEPS;; cnn) cfg=fmnist_cnn; s=$(( STEPS / 2 ));; gpt) cfg=gpt_char; s=$STEPS;; esac
    for side in A B; do
      dir=$A; [[ $side == B ]] && dir=$B
      v=$(BUILD_DIR=$dir ours $cfg $s)
      best[$side$m]=$(max "$v" "${best[$side$m]}")
    done
  done
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)" >&2
echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | xargs); avx512: $(grep -qw avx512f /proc/cpuinfo && echo yes || echo no); threads: $OMP_NUM_THREADS"
echo "| model | A (samples/s) | B (samples/s) | B/A |"
echo "| --- | ---: | ---: | ---: |"
for m in mlp cnn gpt; do
  printf "| %s | %.0f | %.0f | %s |\n" $m "${best[A$m]}" "${best[B$m]}" "$(ratio "${best[B$m]}" "${best[A$m]}")"
done
