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
# `bench/run_gpu_bench.sh gpt2`: GPT-2 124M instead (configs/gpt2_124m.toml on random llm.c-format
# shards, MICRO x 1024 tokens a step, no accumulation), ours with each attention path
# (run.attention = composite, the CUDA default until the flash kernels measure faster, and fused,
# the FlashAttention-2 kernels), beside bench/torch_gpt2_bench.py (nanoGPT's model, bf16, SDPA,
# fused AdamW) eager and compiled; tokens/s, peak memory, and MFU at 6N + 12LTd = 0.86 GFLOP per
# token against PEAK_BF16_TFLOPS. Three runs of at most RUN_TIMEOUT s and torch.compile's of at most
# COMPILE_TIMEOUT s (it compiles first): under 8 minutes in all.
set -uo pipefail
if [[ ${1:-} == gpt2 ]]; then
  MICRO="${MICRO:-16}" STEPS="${STEPS:-50}" PYTHON="${PYTHON:-python3}" PEAK="${PEAK_BF16_TFLOPS:-989}"
  RUN_TIMEOUT="${RUN_TIMEOUT:-100}" COMPILE_TIMEOUT="${COMPILE_TIMEOUT:-150}"  # seconds a run
  ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"; BUILD_DIR="${BUILD_DIR:-$ROOT/build}"
  OUT="$(mktemp -d)"; trap 'rm -rf "$OUT"' EXIT
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader >&2 || true
  echo "CPU: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2-), $(nproc) cores" >&2
  "$PYTHON" - "$OUT" <<'PY'
import os, random, struct, sys
random.seed(0)
for name, n in (('train_000001', 2_000_000), ('val_000000', 300_000)):
    with open(os.path.join(sys.argv[1], name + '.bin'), 'wb') as f:
        f.write(struct.pack('<256i', 20240520, 1, n, *([0] * 253)))
        f.write(struct.pack(f'<{n}H', *(random.randrange(50257) for _ in range(n))))
PY
  mfu() { awk "BEGIN{printf \"%.1f%%\", 100 * $1 * 0.86e9 / ($PEAK * 1e12)}"; }
  echo "| side | mode | tokens/s | MFU | peak MB | ms/step |"
  echo "| --- | --- | ---: | ---: | ---: | ---: |"
  ours() {  # ours MODE: configs/gpt2_124m.toml on the random shards, attention's path MODE
    local mode=$1
    local args=(--set data.train=\"$OUT/train_*.bin\" --set data.eval=\"$OUT/val_*.bin\"
      --set data.micro_batch_size="$MICRO" --set train.tokens_per_step=$((MICRO * 1024)) --set train.steps="$STEPS"
      --set train.log_every=$((STEPS / 3)) --set train.eval_batches=1 --set train.eval_every=0 --set checkpoint.every=0
      --set checkpoint.save_final=false --set log.progress=none --set run.device=\"cuda\" --set run.out_dir=\"$OUT/runs\"
      --set run.name="$mode" --set run.attention=\"$mode\")
    if timeout "$RUN_TIMEOUT" "$BUILD_DIR/trainer" run "$ROOT/configs/gpt2_124m.toml" "${args[@]}" > "$OUT/$mode.log" 2>&1; then
      local line sps mem tps
      line=$(grep '"split":"train"' "$OUT/runs/$mode/metrics.jsonl" | tail -1)
      sps=$(sed -n 's/.*"samples_per_s":\([0-9.e+]*\).*/\1/p' <<<"$line")
      mem=$(sed -n 's/.*"mem_peak_mb":\([0-9.e+]*\).*/\1/p' <<<"$line")
      tps=$(awk "BEGIN{print $sps * 1024}")
      printf "| trainer | attention = %s | %.0f | %s | %.0f | %.1f |\n" "$mode" "$tps" "$(mfu "$tps")" "$mem" \
        "$(awk "BEGIN{print 1000 * $MICRO * 1024 / $tps}")"
    else
      echo "| trainer | attention = $mode | failed or over ${RUN_TIMEOUT}s: $(grep -m1 -i -E 'error|killed' "$OUT/$mode.log" | cut -c1-120) | | | |"
    fi
  }
  torch() {  # torch "" | --compile
    local c=$1 j tps mem ms limit=$RUN_TIMEOUT
    [[ $c == --compile ]] && limit=$COMPILE_TIMEOUT
    if j=$(timeout "$limit" "$PYTHON" "$ROOT/bench/torch_gpt2_bench.py" --batch "$MICRO" --steps "$STEPS" $c \
           2>"$OUT/torch.err"); then
      tps=$(sed -n 's/.*"tokens_per_s": \([0-9.e+]*\).*/\1/p' <<<"$j")
      mem=$(sed -n 's/.*"mem_peak_mb": \([0-9.e+]*\).*/\1/p' <<<"$j")
      ms=$(sed -n 's/.*"ms_per_step": \([0-9.e+]*\).*/\1/p' <<<"$j")
      printf "| torch %s | %s | %.0f | %s | %.0f | %.1f |\n" "$("$PYTHON" -c 'import torch; print(torch.__version__)')" \
        "${c:-eager}" "$tps" "$(mfu "$tps")" "$mem" "$ms"
    else
      echo "| torch | ${c:-eager} | failed or over ${limit}s: $(tail -1 "$OUT/torch.err" | cut -c1-120) | | | |"
    fi
  }
  # ours both ways first (the comparison that decides CUDA's default attention): a lease can end
  # before the last
  ours composite; ours fused; torch ""; torch --compile
  exit 0
fi
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
