#!/usr/bin/env bash
# Training throughput on one GPU: fmnist_mlp, fmnist_cnn and gpt_char with run.device=cuda, beside
# the same models in the host's PyTorch on the same GPU (bench/torch_train_bench.py --device cuda),
# in f32 and under bf16 autocast; ROUNDS rounds alternating the two sides, the best of each kept
# (a fresh GPU machine swings 30% between runs). MFU = model FLOPs per sample x samples/s / peak,
# with the peak of the precision the GEMMs run in (PEAK_F32_TFLOPS, PEAK_BF16_TFLOPS; H100 SXM
# defaults: 67 and 989 dense). A model our CUDA backend cannot run prints its error instead.
# Both sides use their library defaults: cuDNN may use TF32 for f32 convolutions, f32 matrix
# products do not, and cuDNN picks algorithms by heuristics (no benchmark mode).
# Usage: PYTHON=python3 bench/run_gpu_bench.sh   (BUILD_DIR=build; STEPS=200; ROUNDS=3)
set -uo pipefail
STEPS="${STEPS:-200}"
ROUNDS="${ROUNDS:-3}"
PYTHON="${PYTHON:-python3}"
PEAK_F32_TFLOPS="${PEAK_F32_TFLOPS:-67}"
PEAK_BF16_TFLOPS="${PEAK_BF16_TFLOPS:-989}"
source "$(dirname "${BASH_SOURCE[0]}")/train_bench_lib.sh"

# Training FLOPs per sample (per token for the GPT) = 3 x forward = 6 x multiply-adds of the GEMMs
# and convolutions (attention's two batched GEMMs included; elementwise work not counted).
declare -A flops=([mlp]=$(( 6 * (784*512 + 512*512 + 512*10) ))
                  [cnn]=$(( 6 * (28*28*32*9 + 14*14*64*32*9 + 3136*128 + 128*10) ))
                  [gpt]=$(( 6 * (4 * (128*384 + 128*128 + 2*128*512 + 2*128*128) + 128*256) )))
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader >&2 || true
echo "CPU: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2-), $(nproc) cores" >&2

declare -A ours theirs err
for amp in off bf16; do
  for m in mlp cnn gpt; do ours[$m$amp]=0; theirs[$m$amp]=0; done
done
for ((r = 0; r < ROUNDS; ++r)); do
  for amp in off bf16; do
    targs=(); oargs=(--set run.device=cuda)
    [[ $amp == bf16 ]] && { targs=(--amp bf16); oargs+=(--set amp.enabled=true --set amp.dtype=\"bf16\"); }
    "$PYTHON" "$ROOT/bench/torch_train_bench.py" --device cuda --steps "$STEPS" "${targs[@]}" > "$OUT/t.jsonl"
    for m in mlp cnn gpt; do
      case $m in mlp) cfg=fmnist_mlp;; cnn) cfg=fmnist_cnn;; gpt) cfg=gpt_char;; esac
      t=$(grep "\"model\": \"$m\"" "$OUT/t.jsonl" | sed 's/.*"value": \([0-9.]*\).*/\1/')
      theirs[$m$amp]=$(max "${t:-0}" "${theirs[$m$amp]}")
      if v=$(ours $cfg "$STEPS" "${oargs[@]}" 2>"$OUT/err") && [[ -n $v ]]; then
        [[ $m == gpt ]] && v=$(awk "BEGIN{print $v*128}")
        ours[$m$amp]=$(max "$v" "${ours[$m$amp]}")
      else
        err[$m$amp]=$(grep -m1 -i error "$OUT/err" | cut -c1-160)
      fi
    done
  done
done

mfu() { awk "BEGIN{printf \"%.2f%%\", 100 * $1 * $2 / ($3 * 1e12)}"; }
echo "| model | amp | unit | trainer | torch $("$PYTHON" -c 'import torch; print(torch.__version__)') | ours/torch | trainer MFU | torch MFU |"
echo "| --- | --- | --- | ---: | ---: | ---: | ---: | ---: |"
for amp in off bf16; do
  peak=$PEAK_F32_TFLOPS; [[ $amp == bf16 ]] && peak=$PEAK_BF16_TFLOPS
  for m in mlp cnn gpt; do
    unit=samples/s; [[ $m == gpt ]] && unit=tokens/s
    o=${ours[$m$amp]} t=${theirs[$m$amp]}
    if [[ -n ${err[$m$amp]:-} && $o == 0 ]]; then
      printf "| %s | %s | %s | failed: %s | %.0f | - | - | %s |\n" $m $amp $unit "${err[$m$amp]}" "$t" "$(mfu "${flops[$m]}" "$t" "$peak")"
    else
      printf "| %s | %s | %s | %.0f | %.0f | %s | %s | %s |\n" $m $amp $unit "$o" "$t" "$(ratio "$o" "$t")" \
        "$(mfu "${flops[$m]}" "$o" "$peak")" "$(mfu "${flops[$m]}" "$t" "$peak")"
    fi
  done
done
