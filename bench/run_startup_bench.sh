#!/usr/bin/env bash
# Start-up time and peak memory: trainer vs PyTorch 1.13 on fmnist_mlp, fmnist_cnn and gpt_char.
# Each run trains STEPS steps and evaluates EVAL_BATCHES batches (the configs' eval batch sizes:
# 1000 images, 32 windows), no checkpoints. Start-up is process start to the start of the first
# optimizer step, both sides measured alike (the kernel's start time of the process, see
# bench/torch_startup_bench.py; ours is metrics.jsonl's startup_s); peak RSS is /usr/bin/time's
# %M for both. Prints the median of RUNS runs of each, runs of the two sides alternating.
# Rows: "trainer" (decode cache warm: the usual case after the first run on a machine),
# "trainer, cold cache" (a fresh cache directory every run: decode + cache write),
# "trainer, OLD" when OLD_BUILD_DIR names another build (needs startup_s, i.e. a build of this
# commit's parent or later), and "torch 1.13".
# Usage: bench/run_startup_bench.sh   (BUILD_DIR=build, RUNS=5, STEPS=10, EVAL_BATCHES=4, THREADS=2,
#        CONFIGS="fmnist_mlp fmnist_cnn gpt_char", OLD_BUILD_DIR unset; other configs, e.g.
#        fmnist_resnet, run without a torch row)
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/train_bench_lib.sh"
RUNS="${RUNS:-5}"
STEPS="${STEPS:-10}"
EVAL_BATCHES="${EVAL_BATCHES:-4}"
THREADS="${THREADS:-2}"
CONFIGS="${CONFIGS:-fmnist_mlp fmnist_cnn gpt_char}"
[[ -x /usr/bin/time ]] || { echo "error: /usr/bin/time is missing (Debian package: time)" >&2; exit 1; }

# trainer_once BIN CONFIG [cache dir]: prints "startup_s peak_rss_kb" of one run.
trainer_once() {
  local bin=$1 cfg=$2 cache=${3:-} name="$2-$RANDOM$RANDOM"
  local env=(env OMP_NUM_THREADS="$THREADS")
  [[ -n $cache ]] && env+=(TRAINER_CACHE_DIR="$cache")
  "${env[@]}" /usr/bin/time -f %M -o "$OUT/time" "$bin" run "$ROOT/configs/$cfg.toml" \
    --set run.out_dir="$OUT" --set run.name="$name" --set train.steps="$STEPS" \
    --set train.eval_batches="$EVAL_BATCHES" --set log.progress=none --set checkpoint.save_final=false \
    --set checkpoint.every_epoch=false >/dev/null
  local s
  s=$(grep -o '"startup_s":[0-9.e+-]*' "$OUT/$name/metrics.jsonl" | head -1 | cut -d: -f2)
  [[ -n $s ]] || { echo "error: $bin wrote no startup_s (a build older than this benchmark?)" >&2; exit 1; }
  echo "$s $(tail -1 "$OUT/time")"
  rm -rf "$OUT/$name"
}

torch_once() {
  local cfg=$1
  OPENBLAS_NUM_THREADS=1 /usr/bin/time -f %M -o "$OUT/time" "$PYTHON" "$ROOT/bench/torch_startup_bench.py" \
    --config "$cfg" --threads "$THREADS" --steps "$STEPS" --eval-batches "$EVAL_BATCHES" > "$OUT/t.json"
  local s
  s=$(sed 's/.*"startup_s": \([0-9.e+-]*\).*/\1/' "$OUT/t.json")
  echo "$s $(tail -1 "$OUT/time")"
}

median() { sort -g | awk '{v[NR] = $1} END {print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }

# Warm the decode cache and the page cache once, so the runs measure the steady state.
for cfg in $CONFIGS; do trainer_once "$BUILD_DIR/trainer" "$cfg" >/dev/null; done

declare -A rows
row() {  # key label startups rss_kbs
  local s m
  s=$(tr ' ' '\n' <<< "$3" | grep . | median)
  m=$(tr ' ' '\n' <<< "$4" | grep . | median)
  rows[$1]=$(printf "| %s | %s | %.3f | %.0f |" "$2" "${1%%:*}" "$s" "$(awk "BEGIN{print $m / 1024}")")
}

for cfg in $CONFIGS; do
  declare -A S=() M=()
  add() {  # side "startup rss"
    S[$1]+=" ${2% *}"
    M[$1]+=" ${2#* }"
  }
  for ((i = 0; i < RUNS; i++)); do
    r=$(trainer_once "$BUILD_DIR/trainer" "$cfg"); add ours "$r"
    if [[ $cfg == fmnist_* ]]; then
      rm -rf "$OUT/cache"
      r=$(trainer_once "$BUILD_DIR/trainer" "$cfg" "$OUT/cache"); add cold "$r"
    fi
    if [[ -n ${OLD_BUILD_DIR:-} ]]; then
      r=$(trainer_once "$OLD_BUILD_DIR/trainer" "$cfg"); add old "$r"
    fi
    if [[ " fmnist_mlp fmnist_cnn gpt_char " == *" $cfg "* ]]; then  # the models torch_startup_bench.py has
      r=$(torch_once "$cfg"); add torch "$r"
    fi
  done
  row "$cfg:1" "trainer" "${S[ours]}" "${M[ours]}"
  [[ -n ${S[cold]:-} ]] && row "$cfg:2" "trainer, cold cache" "${S[cold]}" "${M[cold]}"
  [[ -n ${S[old]:-} ]] && row "$cfg:3" "trainer, OLD ($OLD_BUILD_DIR)" "${S[old]}" "${M[old]}"
  [[ -n ${S[torch]:-} ]] && row "$cfg:4" "torch 1.13" "${S[torch]}" "${M[torch]}"
  unset S M
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)" >&2
echo "| side | config | start-up (s) | peak RSS (MiB) |"
echo "| --- | --- | ---: | ---: |"
for k in $(printf '%s\n' "${!rows[@]}" | sort); do echo "${rows[$k]}"; done
