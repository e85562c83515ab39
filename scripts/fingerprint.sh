#!/usr/bin/env bash
# Behaviour fingerprint of a trainer binary: runs fmnist_mlp, fmnist_cnn, gpt_char and a small
# synthetic config for 30 steps each (plus fmnist_cnn under bf16 autocast and fmnist_mlp on
# 2 ranks), and prints, per run, the sha256 of metrics.jsonl without its timing fields, of the
# final model.safetensors and of the resolved config.toml. A refactor that changes no behaviour leaves every line equal:
#   scripts/fingerprint.sh build/trainer > before.txt   (then after the change)
#   scripts/fingerprint.sh build/trainer > after.txt && diff before.txt after.txt
set -euo pipefail
cd "$(dirname "$0")/.."
bin=$(realpath "${1:-build/trainer}")
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export OMP_NUM_THREADS=2
common=(--set train.steps=30 --set train.epochs=1 --set train.log_every=1 --set train.eval_every=10
        --set train.eval_batches=4 --set log.progress=none --set run.out_dir="$work/runs")
run() {  # name config [extra args...]
  local name=$1 cfg=$2
  shift 2
  "$bin" run "$cfg" "${common[@]}" --set run.name="$name" "$@" > "$work/$name.log" 2>&1 ||
    { echo "$name: trainer failed" >&2; cat "$work/$name.log" >&2; exit 1; }
  local d="$work/runs/$name"
  # timing fields differ between runs; everything else must not
  local m=$(sed -E 's/,"(samples_per_s|startup_s|peak_flops|mfu)":[-0-9.e+]+//g' "$d/metrics.jsonl" | sha256sum | cut -c1-16)
  local w=$(sha256sum < "$d/checkpoints/final/model.safetensors" | cut -c1-16)
  # the resolved config, but for the scratch directory's path
  local c=$(grep -v -e '^#' -e '^out_dir' "$d/config.toml" | sha256sum | cut -c1-16)
  printf '%-12s metrics %s  weights %s  config %s  (%s lines)\n' "$name" "$m" "$w" "$c" "$(wc -l < "$d/metrics.jsonl")"
}
run fmnist_mlp configs/fmnist_mlp.toml
run fmnist_cnn configs/fmnist_cnn.toml
run gpt_char configs/gpt_char.toml
run synthetic configs/synthetic.toml
run cnn_bf16 configs/fmnist_cnn.toml --set amp.enabled=true --set amp.dtype=bf16
run mlp_2ranks configs/fmnist_mlp.toml --nproc 2
