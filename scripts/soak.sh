#!/usr/bin/env bash
# Soak test of exact resume: trains with a checkpoint every few steps, kills the trainer with
# SIGKILL at random moments and restarts it, then compares the final weights and metrics with an
# uninterrupted run of the same config. Prints one line per kill and a verdict; exits 1 on any
# difference or failed restart.
#   scripts/soak.sh [--kills N] [--nproc 2] [--seed S] [--steps T] [--every K] [--dir D]
#     --kills N   SIGKILLs (default 100). With --nproc 2 each kill hits one random rank and the
#                 launcher's --max-restarts restarts the group from the newest checkpoint.
#     --steps T   the run's length (default 1500 steps of fmnist_mlp), --every K a checkpoint
#                 every K steps (default 10)
#     --dir D     the scratch directory (default /tmp/trainer-soak), removed first
#     --in-write MS  every kill lands inside a checkpoint write (one rank): each write pauses MS ms
#                 before its commit (TR_TEST_CHECKPOINT_WRITE_MS), and the kill waits for a write's
#                 temporary directory, then comes at a random moment of the pause; the newest
#                 checkpoint after it must be an older one than the write it cut short
#     --sync      [checkpoint] async = false (the default writes in the background)
#     --binary B  the trainer to soak (default build/trainer)
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$PWD
kills=100; nproc=1; seed=1; steps=1500; every=10; dir=/tmp/trainer-soak; in_write=0; async=true; binary=build/trainer
while [ $# -gt 0 ]; do
  case "$1" in
    --kills) kills=$2; shift 2 ;;
    --nproc) nproc=$2; shift 2 ;;
    --seed) seed=$2; shift 2 ;;
    --steps) steps=$2; shift 2 ;;
    --every) every=$2; shift 2 ;;
    --dir) dir=$2; shift 2 ;;
    --in-write) in_write=$2; shift 2 ;;
    --sync) async=false; shift ;;
    --binary) binary=$2; shift 2 ;;
    *) echo "soak.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
[ "$in_write" -gt 0 ] && [ "$nproc" -gt 1 ] && { echo "soak.sh: --in-write takes one rank" >&2; exit 2; }
[ "$binary" != build/trainer ] || [ -x build/trainer ] || bash scripts/build.sh >/dev/null
binary=$(realpath "$binary")
RANDOM=$seed
rm -rf "$dir" && mkdir -p "$dir" && cd "$dir"
# a copy of the binary: a rebuild during the soak must not swap it under a restart
cp "$binary" ./trainer
T=$dir/trainer
cfg=$repo/configs/fmnist_mlp.toml
common=(--set train.steps=$steps --set checkpoint.every=$every --set checkpoint.keep_last=2 --set log.progress=none
        --set train.eval_every=250 --set checkpoint.async=$async)
launch=()
[ "$nproc" -gt 1 ] && launch=(--nproc "$nproc" --max-restarts $((kills + 5)))

echo "soak: fmnist_mlp, $steps steps, a checkpoint every $every ($([ $async = true ] && echo async || echo sync) writes$(
  [ "$in_write" -gt 0 ] && echo ", each pausing $in_write ms; every kill inside one")), $nproc rank(s), $kills SIGKILLs (seed $seed)"
t0=$SECONDS
"$T" run "$cfg" "${common[@]}" "${launch[@]}" --set run.name=straight > straight.log 2>&1 || { cat straight.log; exit 1; }
echo "uninterrupted run: $((SECONDS - t0)) s"
straight_s=$((SECONDS - t0))

# a random moment: 0.05 s up to half the uninterrupted run's length (a restart has less left to
# do); with ranks, up to a tenth (each kill costs a restart of the group)
div=2; [ "$nproc" -gt 1 ] && div=10
moment() { awk -v r=$RANDOM -v m="$straight_s" -v d=$div 'BEGIN { printf "%.2f", 0.05 + (r / 32768.0) * (m > d ? m / d : 1) }'; }
step_of() { cat runs/soak/checkpoints/latest 2>/dev/null | sed 's/step_//' || true; }

# Until N kills have landed in a running trainer: a run that finishes before its kill is checked
# (status 0) and started over, so that every kill interrupts training.
t0=$SECONDS
failed=0; landed=0; attempts=0; launcher=""
while [ $landed -lt "$kills" ] && [ $attempts -lt $((3 * kills)) ]; do
  attempts=$((attempts + 1))
  if [ "$nproc" -eq 1 ]; then
    from=$(step_of)
    TR_TEST_CHECKPOINT_WRITE_MS=$in_write "$T" run "$cfg" "${common[@]}" --set run.name=soak --resume auto >> soak.log 2>&1 &
    pid=$!
    at=$(moment)
    sleep "$at"
    writing=""
    if [ "$in_write" -gt 0 ]; then
      # the next write of this process (its temporary directory names its pid), then a random
      # moment of its pause, while the directory still shows
      for _ in $(seq 2000); do
        writing=$(ls -d runs/soak/checkpoints/.tmp-step_*-"$pid" 2>/dev/null | head -1 || true)
        [ -n "$writing" ] || ! kill -0 "$pid" 2>/dev/null && break
        sleep 0.005
      done
      sleep "$(awk -v r=$RANDOM -v ms="$in_write" 'BEGIN { printf "%.3f", (r / 32768.0) * ms * 0.8 / 1000 }')"
      [ -n "$writing" ] && [ -d "$writing" ] || writing=""
    fi
    if [ "$in_write" -gt 0 ] && [ -z "$writing" ] && kill -0 "$pid" 2>/dev/null; then
      kill -9 "$pid" 2>/dev/null; wait "$pid" 2>/dev/null || true  # the write ended first: not counted
      echo "(the write ended before its kill: tried again)"
    elif kill -9 "$pid" 2>/dev/null; then
      wait "$pid" 2>/dev/null || true
      landed=$((landed + 1))
      if [ -n "$writing" ]; then
        cut=$(basename "$writing" | sed -E 's/^\.tmp-step_([0-9]+)-.*/\1/')
        now=$(step_of)
        echo "kill $landed: started from checkpoint ${from:-none}, SIGKILL during the write of step_$cut; newest checkpoint then: ${now:-none}"
        [ -z "$now" ] || [ "$now" -lt "$cut" ] || { echo "  the cut-short write of step_$cut became the newest"; failed=1; }
      else
        echo "kill $landed: started from checkpoint ${from:-none}, SIGKILL after $at s; newest checkpoint then: $(step_of)"
      fi
    else
      wait "$pid" && rc=0 || rc=$?
      echo "(the run finished before its kill, status $rc: started over)"
      [ "$rc" -eq 0 ] || failed=1
      rm -rf runs/soak
    fi
  else
    if [ -z "$launcher" ] || ! kill -0 "$launcher" 2>/dev/null; then
      if [ -n "$launcher" ]; then
        wait "$launcher" && rc=0 || rc=$?
        echo "(the run finished before the next kill, status $rc: started over)"
        [ "$rc" -eq 0 ] || failed=1
        rm -rf runs/soak
      fi
      "$T" run "$cfg" "${common[@]}" "${launch[@]}" --set run.name=soak >> soak.log 2>&1 &
      launcher=$!
    fi
    sleep "$(moment)"
    ranks=($(pgrep -P "$launcher" || true))
    [ ${#ranks[@]} -eq "$nproc" ] || continue
    victim=${ranks[$((RANDOM % ${#ranks[@]}))]}
    kill -9 "$victim" 2>/dev/null || continue
    landed=$((landed + 1))
    echo "kill $landed: SIGKILL to rank pid $victim; newest checkpoint: $(step_of)"
    # the group's restart (new rank processes) before the next kill
    for _ in $(seq 600); do
      now=($(pgrep -P "$launcher" || true))
      [ ${#now[@]} -eq "$nproc" ] && [[ " ${now[*]} " != *" $victim "* ]] && break
      kill -0 "$launcher" 2>/dev/null || break
      sleep 0.05
    done
  fi
done
if [ "$nproc" -eq 1 ]; then
  "$T" run "$cfg" "${common[@]}" --set run.name=soak --resume auto >> soak.log 2>&1 || { echo "final restart failed"; failed=1; }
else
  wait "$launcher" || { echo "the launcher failed (status $?)"; failed=1; }
fi
echo "soak: $((SECONDS - t0)) s; $landed SIGKILLs landed in a running trainer ($attempts tries), every restart succeeded: $([ $failed = 0 ] && echo yes || echo NO)"
[ "$landed" -eq "$kills" ] || { echo "only $landed of $kills kills landed"; failed=1; }

strip() { sed -E 's/,"(samples_per_s|tokens_per_s|startup_s|peak_flops|mfu|mem_peak_mb|mem_reserved_mb|mem_peak_reserved_mb)":[-0-9.e+]+//g' "$1"; }
if cmp -s runs/straight/checkpoints/final/model.safetensors runs/soak/checkpoints/final/model.safetensors; then
  echo "final weights: byte-identical to the uninterrupted run"
else
  echo "final weights: DIFFER from the uninterrupted run"; failed=1
fi
if [ "$(strip runs/straight/metrics.jsonl)" = "$(strip runs/soak/metrics.jsonl)" ]; then
  echo "metrics.jsonl: identical (timing fields aside), $(wc -l < runs/soak/metrics.jsonl) records"
else
  echo "metrics.jsonl: DIFFERS"; failed=1
fi
exit $failed
