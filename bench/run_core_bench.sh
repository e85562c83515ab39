#!/usr/bin/env bash
# Builds core_bench if needed, runs it and bench/torch_core_bench.py in this one invocation, and
# prints the table of ours/torch ratios (>1 = we are faster). See bench/README.md.
#   BUILD_DIR   build directory (default <repo>/build-bench; configured Release on first use)
#   ROUNDS      times every setting is run, alternating ours and torch (default 2; best round kept)
#   REPS        timed runs per benchmark, median reported (default 11)
#   OURS_THREADS   our OpenMP pool sizes to try (default "2 1")
#   TORCH_OMP      torch.set_num_threads values to try (default "1 2")
#   TORCH_BLAS     OPENBLAS_NUM_THREADS values to try for torch (default "1 2")
#   PYTHON      the Python with torch 1.13 (default /usr/bin/python3)
# Every setting runs twice: with glibc's default malloc ("default": each 64 MiB output is a fresh
# mmap, so a kernel also pays ~16k first-touch page faults) and with GLIBC_TUNABLES raising the mmap
# threshold ("reuse": freed blocks stay in the heap, so the kernel itself is timed). Same for both sides.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD_DIR="${BUILD_DIR:-$ROOT/build-bench}"
ROUNDS="${ROUNDS:-2}"
REPS="${REPS:-11}"
OURS_THREADS="${OURS_THREADS:-2 1}"
TORCH_OMP="${TORCH_OMP:-1 2}"
TORCH_BLAS="${TORCH_BLAS:-1 2}"
PYTHON="${PYTHON:-/usr/bin/python3}"

if [[ ! -f "$BUILD_DIR/build.ninja" ]]; then
  cmake -S "$ROOT" -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
fi
ninja -C "$BUILD_DIR" -j2 core_bench >/dev/null

OUT="$(mktemp -d)"
trap 'rm -rf "$OUT"' EXIT

echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs); load before: $(cut -d' ' -f1-3 /proc/loadavg)" >&2
REUSE="glibc.malloc.mmap_threshold=1073741824:glibc.malloc.trim_threshold=4294967296"
ELEMENTWISE="add,mul_scalar,exp,relu,sum"
for round in $(seq 1 "$ROUNDS"); do
  for mode in default reuse; do
    tun=""; only=""
    if [[ $mode == reuse ]]; then tun="$REUSE"; only="--only $ELEMENTWISE"; fi
    for t in $OURS_THREADS; do
      echo "round $round, malloc $mode: trainer omp=$t" >&2
      # Our kernels and OpenBLAS (OpenMP build) share one pool sized by OMP_NUM_THREADS.
      GLIBC_TUNABLES="$tun" OMP_NUM_THREADS="$t" "$BUILD_DIR/bench/core_bench" --reps "$REPS" $only >>"$OUT/ours.jsonl"
    done
    for omp in $TORCH_OMP; do
      for blas in $TORCH_BLAS; do
        echo "round $round, malloc $mode: torch set_num_threads($omp) OPENBLAS_NUM_THREADS=$blas" >&2
        env -u OMP_NUM_THREADS GLIBC_TUNABLES="$tun" OPENBLAS_NUM_THREADS="$blas" "$PYTHON" \
          "$ROOT/bench/torch_core_bench.py" --threads "$omp" --reps "$REPS" $only >>"$OUT/torch.jsonl"
      done
    done
  done
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)" >&2
if [[ -n "${KEEP_JSONL:-}" ]]; then cp "$OUT"/*.jsonl "$KEEP_JSONL"/; fi
"$PYTHON" "$ROOT/bench/torch_core_bench.py" report "$OUT/ours.jsonl" "$OUT/torch.jsonl"
