#!/usr/bin/env bash
# What a checkpoint costs the step that takes it: gpt_char with a checkpoint every EVERY steps and a
# metrics line every step, [checkpoint] async = false (the state written during the step) against
# async = true (copied during the step, written by a background thread), runs of the two
# alternating. A checkpoint after step N is timed in step N+1's line (its window runs from line N
# to line N+1); each row is the median step time of those steps and of all the others (the first
# 10 steps left out: warm-up and the MFU measurement's line).
# Usage: bench/run_checkpoint_bench.sh   (BUILD_DIR=build, RUNS=2, STEPS=200, EVERY=20, THREADS=2;
#        on a build with the CUDA emulator, DEVICE=cpu keeps the run off its emulated GPUs;
#        EXTRA="--set ..." more trainer arguments, e.g. data.paths where the fortunes are elsewhere)
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/train_bench_lib.sh"
RUNS="${RUNS:-2}"
STEPS="${STEPS:-200}"
EVERY="${EVERY:-20}"
THREADS="${THREADS:-2}"
DEVICE="${DEVICE:-auto}"
read -ra extra <<< "${EXTRA:-}"

# once MODE: a run's metrics.jsonl, kept as $OUT/MODE-<n>.jsonl
n=0
once() {
  local mode=$1 name="ckpt-$1-$n"
  OMP_NUM_THREADS="$THREADS" "$BUILD_DIR/trainer" run "$ROOT/configs/gpt_char.toml" --set run.out_dir="$OUT" \
    --set run.name="$name" --set run.device=\""$DEVICE"\" --set train.steps="$STEPS" --set train.log_every=1 \
    --set train.eval_every=0 --set train.eval_batches=1 --set log.progress=none --set checkpoint.every="$EVERY" \
    --set checkpoint.keep_last=2 --set checkpoint.async="$([[ $mode == async ]] && echo true || echo false)" \
    "${extra[@]}" >/dev/null
  cp "$OUT/$name/metrics.jsonl" "$OUT/$mode-$n.jsonl"
  du -sb "$OUT/$name/checkpoints/$(cat "$OUT/$name/checkpoints/latest")" | cut -f1 > "$OUT/checkpoint_bytes"
}
for ((n = 0; n < RUNS; n++)); do once sync; once async; done

echo "gpt_char, $STEPS steps, a checkpoint every $EVERY ($(( $(cat "$OUT/checkpoint_bytes") / 1024 )) KiB), $RUNS runs each, OMP_NUM_THREADS=$THREADS"
echo "| writes | other steps (ms, median) | checkpointing steps (ms, median) | checkpointing / other |"
echo "| --- | ---: | ---: | ---: |"
for mode in sync async; do
  "$PYTHON" - "$EVERY" "$OUT"/$mode-*.jsonl <<'EOF' | sed "s/^/| $mode /"
import json, statistics, sys
every = int(sys.argv[1])
ckpt, other = [], []
for path in sys.argv[2:]:
    for line in open(path):
        r = json.loads(line)
        if r.get("split") != "train" or r["step"] <= 10:
            continue
        ms = 1000 * 32 / r["samples_per_s"]  # gpt_char's batch: 32 windows
        (ckpt if (r["step"] - 1) % every == 0 else other).append(ms)
o, c = statistics.median(other), statistics.median(ckpt)
print(f"| {o:.1f} | {c:.1f} | {c / o:.2f} |")
EOF
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)" >&2
