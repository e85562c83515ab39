# Sourced by run_train_bench.sh, run_ddp_bench.sh and run_amp_bench.sh: the paths, a scratch
# directory removed on exit, and one trainer run that reports its throughput.
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD_DIR="${BUILD_DIR:-$ROOT/build}"
PYTHON="${PYTHON:-/usr/bin/python3}"
OUT="$(mktemp -d)"
trap 'rm -rf "$OUT"' EXIT
[[ -x "$BUILD_DIR/trainer" ]] || bash "$ROOT/scripts/build.sh"
echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)" >&2

# ours CONFIG STEPS [trainer args...]: samples/s of configs/CONFIG.toml over STEPS steps, read from
# the last train line of metrics.jsonl (the steps after the first window, so start-up is not timed).
ours() {
  local cfg=$1 steps=$2 half=$(( $2 / 2 )) name="$1-$RANDOM$RANDOM"
  shift 2
  "$BUILD_DIR/trainer" run "$ROOT/configs/$cfg.toml" "$@" --set run.out_dir="$OUT" --set run.name="$name" \
    --set train.steps="$steps" --set train.log_every="$half" --set train.eval_batches=1 \
    --set log.progress=none --set checkpoint.save_final=false --set checkpoint.every_epoch=false >/dev/null
  grep '"split":"train"' "$OUT/$name/metrics.jsonl" | tail -1 > "$OUT/last_line"
  field samples_per_s < "$OUT/last_line"
}
# field KEY < line: the number KEY has in a metrics line
field() { sed -n "s/.*\"$1\":\([-0-9.e+]*\).*/\1/p"; }
max() { awk "BEGIN{print ($1 > $2) ? $1 : $2}"; }
ratio() { awk "BEGIN{if ($1 == 0 || $2 == 0) printf \"-\"; else printf \"%.2f\", $1/$2}"; }
# The OpenBLAS kernels the trainer chose where the library fell back to its SSE3 ones (see
# lib/ops/cpu/blas_coretype.cpp), empty otherwise: the scripts give torch the same choice, since
# Debian's torch 1.13 also runs OpenBLAS's fallback kernels on a CPU the library does not know.
coretype=$("$BUILD_DIR/trainer" info | sed -n 's/^cpu blas: OpenBLAS, \([A-Za-z0-9]*\) kernels (OPENBLAS_CORETYPE chosen.*/\1/p')
