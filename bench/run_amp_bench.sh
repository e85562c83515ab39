#!/usr/bin/env bash
# Mixed-precision training throughput on this CPU: trainer's fmnist_mlp, fmnist_cnn and gpt_char
# in f32, [amp] bf16 and [amp] fp16 (with its scaler), beside PyTorch 1.13 in f32 and under CPU
# autocast bf16 (torch 1.13 has no CPU fp16 autocast). Each side at its best thread setting.
# Ours is the samples_per_s of the last metrics line (steps after the first window).
# Usage: bench/run_amp_bench.sh   (BUILD_DIR=build by default; STEPS=40; ROUNDS=1, best kept)
set -euo pipefail
STEPS="${STEPS:-40}"
ROUNDS="${ROUNDS:-1}"
source "$(dirname "${BASH_SOURCE[0]}")/train_bench_lib.sh"

declare -A v
for m in mlp cnn gpt; do for k in f32 bf16 fp16 tf32 tbf16; do v[$m-$k]=0; done; done
declare -A tset
for round in $(seq "$ROUNDS"); do
  for m in mlp cnn gpt; do
    case $m in mlp) cfg=fmnist_mlp; s=$STEPS;; cnn) cfg=fmnist_cnn; s=$(( STEPS / 2 ));; gpt) cfg=gpt_char; s=$STEPS;; esac
    scale=1; [[ $m == gpt ]] && scale=128
    for k in f32 bf16 fp16; do
      if [[ $k == f32 ]]; then x=$(OMP_NUM_THREADS=2 ours $cfg $s); else x=$(OMP_NUM_THREADS=2 ours $cfg $s --set amp.enabled=true --set amp.dtype=$k); fi
      v[$m-$k]=$(max "${v[$m-$k]}" "$(awk "BEGIN{print $x*$scale}")")
    done
  done
  for setting in "2 1" "1 2"; do
    set -- $setting
    for amp in off bf16; do
      args=(); [[ $amp == bf16 ]] && args=(--amp bf16)
      # torch 1.13's bf16 linear needs oneDNN's AVX-512 bf16 kernels: under ONEDNN_MAX_CPU_ISA=AVX2
      # it fails ("could not create a primitive descriptor"), and its column stays 0 ("-" ratios)
      if ! env ${coretype:+OPENBLAS_CORETYPE=$coretype} OPENBLAS_NUM_THREADS=$2 "$PYTHON" "$ROOT/bench/torch_train_bench.py" \
          --threads "$1" --steps "$STEPS" "${args[@]}" > "$OUT/t.jsonl" 2> "$OUT/t.err"; then
        echo "torch ${amp} (omp=$1 openblas=$2) failed: $(tail -1 "$OUT/t.err")" >&2
        continue
      fi
      key=tf32; [[ $amp == bf16 ]] && key=tbf16
      while read -r line; do
        m=$(echo "$line" | sed 's/.*"model": "\([a-z]*\)".*/\1/')
        x=$(echo "$line" | sed 's/.*"value": \([0-9.]*\).*/\1/')
        if awk "BEGIN{exit !($x > ${v[$m-$key]})}"; then v[$m-$key]=$x; tset[$m-$key]="omp=$1 openblas=$2"; fi
      done < "$OUT/t.jsonl"
    done
  done
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)" >&2
echo "| model | unit | trainer f32 | trainer bf16 | trainer fp16 | bf16/f32 | fp16/f32 | torch f32 | torch bf16 | torch bf16/f32 | trainer bf16 / torch bf16 |"
echo "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"
for m in mlp cnn gpt; do
  unit=samples/s; [[ $m == gpt ]] && unit=tokens/s
  printf "| %s | %s | %.0f | %.0f | %.0f | %s | %s | %.0f | %.0f | %s | %s |\n" $m $unit "${v[$m-f32]}" "${v[$m-bf16]}" \
    "${v[$m-fp16]}" "$(ratio "${v[$m-bf16]}" "${v[$m-f32]}")" "$(ratio "${v[$m-fp16]}" "${v[$m-f32]}")" "${v[$m-tf32]}" \
    "${v[$m-tbf16]}" "$(ratio "${v[$m-tbf16]}" "${v[$m-tf32]}")" "$(ratio "${v[$m-bf16]}" "${v[$m-tbf16]}")"
done
