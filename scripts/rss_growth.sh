#!/usr/bin/env bash
# Resident memory over a long run: trains CONFIG (default fmnist_mlp) for STEPS steps (default
# 10000) in a scratch directory, reads the process's VmRSS whenever a new train line appears
# (log_every = STEPS / 10), and prints step and RSS; the last line compares the RSS at the last
# step with the one at step STEPS/10 (after warm-up). Usage: scripts/rss_growth.sh [config] [steps]
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
CFG="${1:-$ROOT/configs/fmnist_mlp.toml}" STEPS="${2:-10000}"
OUT="$(mktemp -d)"
trap 'rm -rf "$OUT"' EXIT
"$ROOT/build/trainer" run "$CFG" --set run.out_dir="$OUT" --set run.name=rss --set train.steps="$STEPS" \
  --set train.log_every=$(( STEPS / 10 )) --set log.progress=none --set checkpoint.every_epoch=false \
  --set checkpoint.save_final=false --set train.eval_batches=1 > "$OUT/log" 2>&1 &
pid=$!
seen=0 first=0 last=0
while kill -0 $pid 2>/dev/null; do
  n=$(grep -c '"split":"train"' "$OUT/rss/metrics.jsonl" 2>/dev/null || true)
  if [[ ${n:-0} -gt $seen ]]; then
    seen=$n
    rss=$(awk '/VmRSS/ {print $2}' /proc/$pid/status 2>/dev/null || echo 0)
    step=$(grep '"split":"train"' "$OUT/rss/metrics.jsonl" | tail -1 | sed 's/.*"step":\([0-9]*\).*/\1/')
    echo "step $step  rss $(( rss / 1024 )) MiB"
    [[ $first -eq 0 ]] && first=$rss
    last=$rss
  fi
  sleep 0.05
done
wait $pid
awk "BEGIN{printf \"growth from the first line to the last: %+.1f%%\n\", ($last - $first) * 100.0 / $first}"
