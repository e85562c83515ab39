#!/usr/bin/env bash
# Runs the sanitizer build's unit tests (build-fuzz: ASan, LeakSanitizer, UBSan), all but [gpu] and
# [large], as one process per core: a process runs its cases one after another, and CI has two
# cores. The cases are cut by the first letter of their names into eight parts of about equal
# count, which the processes take in turn, so that a part of slow cases does not leave a core idle;
# the parts' listings must add up to the whole, or nothing runs.
#   scripts/sanitized_unit_tests.sh   (after scripts/build.sh --sanitize)
set -euo pipefail
cd "$(dirname "$0")/../build-fuzz"
export ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 OMP_WAIT_POLICY=passive
# [large]: the 124M-parameter GPT-2 cases (a minute under ASan); their code paths run small too
spec="~[gpu]~[large]"
parts=8
# (a listing's exit status is its count)
names() { tests/unit_tests --list-test-names-only "$@" | grep -v '^$' || true; }
count() { names "$@" | wc -l; }
total=$(count "$spec")
# The names' first characters (Catch matches names case-insensitively), with their counts; a part
# takes characters until it has its share of the cases. A part's spec: "<spec><c>*,<spec><d>*,..."
# (tags before the name; a character other than a letter or digit escaped).
mapfile -t specs < <(names "$spec" | cut -c1 | tr 'A-Z' 'a-z' | sort | uniq -c |
  awk -v share=$(((total + parts - 1) / parts)) -v spec="$spec" '{
    c = ($2 ~ /^[a-z0-9]$/) ? $2 : "\\" $2
    if (n >= share) { print s; s = ""; n = 0 }
    n += $1
    s = s (s == "" ? "" : ",") spec c "*"
  } END { if (s != "") print s }')
sum=0
for s in "${specs[@]}"; do sum=$((sum + $(count "$s"))); done
if [ "$sum" != "$total" ]; then
  echo "sanitized_unit_tests: the parts do not add up to the $total cases of '$spec'" >&2
  exit 1
fi
rm -f unit_tests_part*.log unit_tests_part*.rc
jobs_max=$(nproc)
for i in "${!specs[@]}"; do
  while [ "$(jobs -rp | wc -l)" -ge "$jobs_max" ]; do wait -n || true; done
  (
    rc=0
    tests/unit_tests "${specs[$i]}" > "unit_tests_part$i.log" 2>&1 || rc=$?
    echo $rc > "unit_tests_part$i.rc"
  ) &
done
wait
rc=0
for i in "${!specs[@]}"; do
  tail -n 3 "unit_tests_part$i.log" | grep -v '^$' | sed "s/^/[part $i] /"
  [ "$(cat "unit_tests_part$i.rc")" = 0 ] || rc=1
done
if [ $rc -ne 0 ]; then
  for i in "${!specs[@]}"; do
    [ "$(cat "unit_tests_part$i.rc")" = 0 ] || { echo "== part $i (${specs[$i]}):"; tail -n 200 "unit_tests_part$i.log"; }
  done
  exit 1
fi
