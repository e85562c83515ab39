#!/usr/bin/env bash
# GPT-2 BPE encoding speed: `trainer pack --tokens --tokenizer` (data/gpt2_tokenizer, one thread)
# against PyPI's tokenizers (ByteLevelBPETokenizer.encode_batch, one thread and its default pool)
# on the same files with the same vocab.json + merges.txt, in one invocation; the ids are checked
# equal. Prints MB/s (10^6 bytes of text, encoding only) and ours/tokenizers. See bench/README.md.
#   BUILD_DIR   build directory with `trainer` (default <repo>/build; configured Release on first use)
#   PYTHON      a Python with tokenizers and numpy (default /work/hfvenv/bin/python)
#   CORPUS      files or globs to encode (default: Debian's fortunes, all of them, ~2.6 MB)
#   VOCABS      vocabularies to time: "fixture" (tests/fixtures/gpt2_bpe, 2000 tokens) and/or a
#               number, a tokenizer of that size trained on CORPUS first (default "fixture 50257")
#   DOCS        what a document is: "files" (each file of CORPUS, 5-240 KB) and/or "fortunes" (each
#               fortune of them, ~170 bytes on average, written as files of their own first)
#               (default "files fortunes"); trainer pack puts <|endoftext|> before each
#   REPS        timed runs per side and setting, best kept (default 3)
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD_DIR="${BUILD_DIR:-$ROOT/build}"
PYTHON="${PYTHON:-/work/hfvenv/bin/python}"
CORPUS="${CORPUS:-/usr/share/games/fortunes/*}"
VOCABS="${VOCABS:-fixture 50257}"
DOCS="${DOCS:-files fortunes}"
REPS="${REPS:-3}"

if [[ ! -f "$BUILD_DIR/build.ninja" ]]; then
  cmake -S "$ROOT" -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
fi
OUT="$(mktemp -d)"
trap 'rm -rf "$OUT"' EXIT
ninja -C "$BUILD_DIR" -j2 trainer >"$OUT/build.log" 2>&1 || { cat "$OUT/build.log" >&2; exit 1; }
TRAINER="$BUILD_DIR/trainer"

# the files trainer pack reads for CORPUS (its globbing skips fortune's *.dat and *.u8 links)
files=()
for pattern in $CORPUS; do
  for f in $pattern; do
    [[ -f $f && ! -L $f && $f != *.dat ]] && files+=("$f")
  done
done

echo "cpu: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)"
echo "cpu flags: $(grep -m1 '^flags' /proc/cpuinfo | tr ' ' '\n' | grep -E '^(sse4_2|avx|avx2|fma|bmi2|avx512f|avx512bw|avx512vl|avx512_vbmi|sha_ni)$' | xargs)"
echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "corpus: ${#files[@]} files, $(cat "${files[@]}" | wc -c) bytes"
"$PYTHON" "$ROOT/bench/tokenizer_bench.py" split "$OUT/fortunes" "${files[@]}" 2>/dev/null
fortunes=("$OUT"/fortunes/*.txt)
echo "documents: files ${#files[@]}, fortunes ${#fortunes[@]}"
printf '%-9s %-6s %-32s %8s %10s\n' docs vocab encoder "MB/s" "ours/this"
for v in $VOCABS; do
  if [[ $v == fixture ]]; then
    dir="$ROOT/tests/fixtures/gpt2_bpe"
  else
    dir="$OUT/vocab_$v"
    "$PYTHON" "$ROOT/bench/tokenizer_bench.py" train "$dir" "$v" "${files[@]}" 2>/dev/null
  fi
  size=$("$PYTHON" -c "import json,sys; print(len(json.load(open(sys.argv[1]))))" "$dir/vocab.json")
  for docs in $DOCS; do
    if [[ $docs == files ]]; then inputs=("${files[@]}"); else inputs=("${fortunes[@]}"); fi
    ours=0
    for _ in $(seq 1 "$REPS"); do
      mbs=$("$TRAINER" pack --tokens "$OUT/packed" --tokenizer "$dir" "${inputs[@]}" |
            sed -n 's/^encoded .*: \([0-9.]*\) MB\/s$/\1/p')
      ours=$(awk -v a="$ours" -v b="$mbs" 'BEGIN { print (b > a ? b : a) }')
    done
    printf '%-9s %-6s %-32s %8.2f %10s\n' "$docs" "$size" "trainer (1 thread)" "$ours" "-"
    if ! theirs=$("$PYTHON" "$ROOT/bench/tokenizer_bench.py" time "$dir" "$OUT/packed/train.bin" "$OUT/packed/val.bin" \
                   "$REPS" "${inputs[@]}" 2>"$OUT/py.err"); then
      cat "$OUT/py.err" >&2
      exit 1
    fi
    while read -r name mbs; do
      printf '%-9s %-6s %-32s %8.2f %10.2f\n' "$docs" "$size" "$name" "$mbs" "$(awk -v a="$ours" -v b="$mbs" 'BEGIN { print a / b }')"
    done <<<"$theirs"
    echo "          ($(tail -1 "$OUT/py.err"))"
  done
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
