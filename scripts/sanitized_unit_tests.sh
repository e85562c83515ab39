#!/usr/bin/env bash
# Runs the sanitizer build's unit tests (build-fuzz: ASan, LeakSanitizer, UBSan), all but [gpu] and
# [large], in two processes at once: a process runs its cases one after another, and CI has two
# cores. The cases are split by the first letter of their names into two halves of about equal
# count; the halves' listings must add up to the whole, or nothing runs.
#   scripts/sanitized_unit_tests.sh   (after scripts/build.sh --sanitize)
set -euo pipefail
cd "$(dirname "$0")/../build-fuzz"
export ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 OMP_WAIT_POLICY=passive
# [large]: the 124M-parameter GPT-2 cases (a minute under ASan); their code paths run small too
spec="~[gpu]~[large]"
# (a listing's exit status is its count)
names() { tests/unit_tests --list-test-names-only "$@" | grep -v '^$' || true; }
count() { names "$@" | wc -l; }
total=$(count "$spec")
# The names' first characters (Catch matches names case-insensitively), with their counts; the first
# half takes characters until it has half the cases. A half's spec: "<spec><c>*,<spec><d>*,..."
# (tags before the name; a character other than a letter or digit escaped).
halves=$(names "$spec" | cut -c1 | tr 'A-Z' 'a-z' | sort | uniq -c | awk -v half=$((total / 2)) -v spec="$spec" '{
    c = ($2 ~ /^[a-z0-9]$/) ? $2 : "\\" $2
    h = (n < half) ? 1 : 2
    n += $1
    s[h] = s[h] (s[h] == "" ? "" : ",") spec c "*"
  } END { print s[1]; print s[2] }')
first=$(sed -n 1p <<< "$halves")
rest=$(sed -n 2p <<< "$halves")
if [ "$(($(count "$first") + $(count "$rest")))" != "$total" ]; then
  echo "sanitized_unit_tests: the two halves do not add up to the $total cases of '$spec'" >&2
  exit 1
fi
tests/unit_tests "$first" > unit_tests_first.log 2>&1 & first_pid=$!
rc=0
tests/unit_tests "$rest" > unit_tests_rest.log 2>&1 || rc=$?
wait $first_pid || rc=$?
for half in first rest; do
  tail -n 3 unit_tests_$half.log | grep -v '^$' | sed "s/^/[$half half] /"
done
if [ $rc -ne 0 ]; then
  for half in first rest; do
    grep -q "All tests passed" unit_tests_$half.log || { echo "== $half half:"; tail -n 200 unit_tests_$half.log; }
  done
  exit 1
fi
