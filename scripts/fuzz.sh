#!/usr/bin/env bash
# Runs the libFuzzer targets of the sanitizer build (tests/fuzz) over their seed corpora, under
# ASan, LeakSanitizer and UBSan; prints executions, corpus and crashes per target.
#   scripts/fuzz.sh [--runs N | --seconds S] [--jobs J] [--merge] [target ...]
#     --runs N      N executions per target (the acceptance figure: 1000000)
#     --seconds S   S seconds per target instead (CI runs each briefly)
#     --jobs J      J targets at once (default: 1)
#     --merge       add the new inputs that reach new coverage to tests/fuzz/corpus/<target>/
#     target        run_config, store_server, ... (default: every fuzz_*.cpp)
# New inputs go to a scratch corpus (build-fuzz/fuzz/work/<target>), never into the committed one
# unless --merge. A crash, leak or sanitizer report fails the script and leaves the input in
# build-fuzz/fuzz/artifacts/; it becomes a regression input under tests/fuzz/corpus/<target>/.
# Builds build-fuzz first (scripts/build.sh --sanitize) unless FUZZ_NO_BUILD=1.
set -euo pipefail
cd "$(dirname "$0")/.."
runs=""; seconds=""; jobs=1; merge=0; targets=()
while [ $# -gt 0 ]; do
  case "$1" in
    --runs) runs=$2; shift 2 ;;
    --seconds) seconds=$2; shift 2 ;;
    --jobs) jobs=$2; shift 2 ;;
    --merge) merge=1; shift ;;
    -*) echo "fuzz.sh: unknown option $1" >&2; exit 2 ;;
    *) targets+=("$1"); shift ;;
  esac
done
if [ -z "$runs" ] && [ -z "$seconds" ]; then runs=100000; fi
if [ ${#targets[@]} -eq 0 ]; then
  for f in tests/fuzz/fuzz_*.cpp; do n=$(basename "$f" .cpp); targets+=("${n#fuzz_}"); done
fi
[ "${FUZZ_NO_BUILD:-0}" = 1 ] || bash scripts/build.sh --sanitize >/dev/null

out=build-fuzz/fuzz
mkdir -p "$out/artifacts" "$out/work" "$out/logs"
# allocations over 256 MiB (per target below) fail (the product's out-of-memory error) instead of
# taking the machine; one thread per fuzzer process
export ASAN_OPTIONS=detect_leaks=1:allocator_may_return_null=1:symbolize=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1

run_one() {
  local t=$1 limit
  if [ -n "$runs" ]; then limit="-runs=$runs"; else limit="-max_total_time=$seconds"; fi
  local dict=""
  [ -f "tests/fuzz/dict/$t.dict" ] && dict="-dict=tests/fuzz/dict/$t.dict"
  # model files: tensors over 32 MiB (libFuzzer itself needs 21) fail at once as out of memory, so
  # that the fuzzer spends its time on parsing and shape inference, not on initialising big layers
  local cap=256
  [ "$t" = model_file ] && cap=32
  # images: up to PIL's limit of 178,956,970 pixels, decoded as RGBA (716 MB)
  [ "$t" = image_decode ] || [ "$t" = recordio ] && cap=1024
  local ASAN_OPTIONS="$ASAN_OPTIONS:max_allocation_size_mb=$cap"
  export ASAN_OPTIONS
  # the store logs every connection it refuses (one line each, as it should): not into the log here
  # (libFuzzer keeps the sanitizers' reports on a copy of stderr)
  local quiet=""
  [ "$t" = store_server ] && quiet="-close_fd_mask=2"
  mkdir -p "$out/work/$t" "tests/fuzz/corpus/$t"
  local t0=$SECONDS rc=0
  "$out/fuzz_$t" $limit $dict $quiet -timeout=20 -rss_limit_mb=3072 -max_len=8192 -print_final_stats=1 \
    -artifact_prefix="$out/artifacts/$t-" "$out/work/$t" "tests/fuzz/corpus/$t" > "$out/logs/$t.log" 2>&1 || rc=$?
  local execs corpus
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$out/logs/$t.log" | tail -1)
  corpus=$(ls "$out/work/$t" "tests/fuzz/corpus/$t" | grep -v -e ':$' -e '^$' | sort -u | wc -l)
  if [ $rc -ne 0 ]; then
    echo "FAIL $t: exit $rc after ${execs:-?} executions ($((SECONDS - t0)) s); see $out/logs/$t.log:"
    grep -m5 -E "ERROR|SUMMARY|runtime error|deadly signal|Test unit written" "$out/logs/$t.log" | sed 's/^/  /'
    return 1
  fi
  echo "ok   $t: ${execs} executions in $((SECONDS - t0)) s, 0 crashes; corpus ${corpus} inputs ($(ls "tests/fuzz/corpus/$t" | wc -l) committed)"
  if [ $merge = 1 ]; then
    "$out/fuzz_$t" -merge=1 -use_counters=0 $dict -timeout=20 -max_len=8192 "tests/fuzz/corpus/$t" "$out/work/$t" > "$out/logs/$t.merge.log" 2>&1
    echo "     merged: $(ls "tests/fuzz/corpus/$t" | wc -l) inputs committed"
  fi
}
export -f run_one
export out runs seconds merge

printf '%s\n' "${targets[@]}" | xargs -P "$jobs" -I{} bash -c 'run_one {}'
