#!/usr/bin/env bash
# Training throughput of fmnist_mlp, fmnist_cnn and gpt_char: trainer vs PyTorch 1.13 in the same
# invocation, same batch sizes and optimizers, each side at its best thread setting (ours: one
# OpenMP pool of 2 and of 1; torch: set_num_threads x OPENBLAS_NUM_THREADS in {1,2}).
# Ours is read from the samples_per_s of the last metrics line (steps after the first window).
# Usage: bench/run_train_bench.sh   (BUILD_DIR=build by default; STEPS=60; ROUNDS=1: every setting of
#        both sides is run ROUNDS times, alternating, and each side's best kept: this VM swings)
# An AVX2-only CPU, approximated on an AVX-512 one (both sides held to AVX2 kernels):
#   OPENBLAS_CORETYPE=Haswell ATEN_CPU_CAPABILITY=avx2 ONEDNN_MAX_CPU_ISA=AVX2 TR_CPU_ISA=avx2 TORCH_CORETYPE=0 bench/run_train_bench.sh
set -euo pipefail
STEPS="${STEPS:-60}"
ROUNDS="${ROUNDS:-1}"
source "$(dirname "${BASH_SOURCE[0]}")/train_bench_lib.sh"

declare -A best_ours best_ours_set best_torch best_torch_set flops peak mfu
for m in mlp cnn gpt; do best_ours[$m]=0; best_torch[$m]=0; done
# OpenBLAS kernels: the trainer replaces OpenBLAS's SSE3 fallback on CPUs it does not know (see
# lib/ops/cpu/blas_coretype.cpp); torch gets the same choice as an extra setting, so that its best
# is not held back by the library's detection.
user_ct=${OPENBLAS_CORETYPE:-}  # a core type given to the script applies to both sides
for round in $(seq "$ROUNDS"); do
  for t in 2 1; do
    for m in mlp cnn gpt; do
      case $m in mlp) cfg=fmnist_mlp; s=$STEPS;; cnn) cfg=fmnist_cnn; s=$(( STEPS / 2 ));; gpt) cfg=gpt_char; s=$STEPS;; esac
      # fmnist_cnn's EMA of the weights is left out: torch_train_bench.py runs the recipe without one
      v=$(OMP_NUM_THREADS=$t ours $cfg $s --set train.ema_decay=0)
      [[ $m == gpt ]] && v=$(awk "BEGIN{print $v*128}")
      if awk "BEGIN{exit !($v > ${best_ours[$m]})}"; then
        best_ours[$m]=$v; best_ours_set[$m]="omp=$t"
        flops[$m]=$(field flops_per_step < "$OUT/last_line"); peak[$m]=$(field peak_flops < "$OUT/last_line")
        mfu[$m]=$(field mfu < "$OUT/last_line")
      fi
    done
  done
  # TORCH_CORETYPE=0 skips that extra setting. Debian's torch 1.13 does depend on it on a CPU that
  # OpenBLAS does not know: 8.6k vs 29.3k MLP samples/s on one thread (2026-11-25, Emerald Rapids).
  [[ ${TORCH_CORETYPE:-1} == 0 ]] && coretype=""
  for ct in "" $coretype; do
    for omp in 1 2; do
      for blas in 1 2; do
        if [[ -n $ct ]]; then export OPENBLAS_CORETYPE=$ct; elif [[ -n $user_ct ]]; then export OPENBLAS_CORETYPE=$user_ct; else unset OPENBLAS_CORETYPE; fi
        OPENBLAS_NUM_THREADS=$blas "$PYTHON" "$ROOT/bench/torch_train_bench.py" --threads $omp --steps "$STEPS" > "$OUT/t.jsonl"
        while read -r line; do
          m=$(echo "$line" | sed 's/.*"model": "\([a-z]*\)".*/\1/')
          v=$(echo "$line" | sed 's/.*"value": \([0-9.]*\).*/\1/')
          if awk "BEGIN{exit !($v > ${best_torch[$m]})}"; then
            best_torch[$m]=$v; best_torch_set[$m]="omp=$omp openblas=$blas${ct:+ coretype=$ct}"
          fi
        done < "$OUT/t.jsonl"
      done
    done
  done
done
if [[ -n $user_ct ]]; then export OPENBLAS_CORETYPE=$user_ct; else unset OPENBLAS_CORETYPE; fi
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)" >&2
echo "cpu: $(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1); $(grep -o 'avx512[a-z_0-9]*\|avx2\|fma' /proc/cpuinfo | sort -u | tr '\n' ' ')"
echo "trainer blas: $("$BUILD_DIR/trainer" info | sed -n 's/^cpu blas: //p')"
echo
echo "| model | unit | trainer | trainer setting | torch 1.13 | torch setting | ours/torch | GFLOP/step | trainer GFLOP/s | peak GFLOP/s | trainer MFU | torch MFU |"
echo "| --- | --- | ---: | --- | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: |"
for m in mlp cnn gpt; do
  unit=samples/s; per_step=128; [[ $m == cnn ]] && per_step=64; [[ $m == gpt ]] && { unit=tokens/s; per_step=4096; }
  r=$(ratio "${best_ours[$m]}" "${best_torch[$m]}")
  # achieved FLOP/s = FLOPs per step x steps per second; the same model FLOPs for torch's steps
  awk -v m=$m -v u=$unit -v o="${best_ours[$m]}" -v os="${best_ours_set[$m]}" -v t="${best_torch[$m]}" \
      -v ts="${best_torch_set[$m]}" -v r="$r" -v f="${flops[$m]:-0}" -v p="${peak[$m]:-1}" -v mf="${mfu[$m]:-0}" -v b=$per_step \
      'BEGIN { printf "| %s | %s | %.0f | %s | %.0f | %s | %s | %.3f | %.1f | %.1f | %.2f | %.2f |\n", m, u, o, os, t, ts, r,
               f / 1e9, f * o / b / 1e9, p / 1e9, mf, f * t / b / p }'
done
echo
echo "GFLOP/step: the matrix products and convolutions of one step (forward and backward, 2 per multiply-add);"
echo "peak: the trainer's measured 1024^3 f32 matmul at its thread setting; MFU = achieved / peak (torch: same FLOPs, its steps/s)."
