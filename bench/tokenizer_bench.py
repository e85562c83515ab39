#!/usr/bin/env python3
"""The tokenizers side of bench/run_tokenizer_bench.sh (PyPI's tokenizers; /work/hfvenv has it).

  tokenizer_bench.py train OUT_DIR VOCAB_SIZE FILE...
      a ByteLevelBPETokenizer trained on the files, special "<|endoftext|>", saved as GPT-2's
      vocab.json + merges.txt (no download)
  tokenizer_bench.py split OUT_DIR FILE...
      each fortune of the files (the text between "\n%\n" delimiters, with its delimiter) as a file
      of its own, OUT_DIR/000000.txt, ...: documents of web-page size rather than whole files
  tokenizer_bench.py time TOKENIZER_DIR OURS_TRAIN_BIN OURS_VAL_BIN REPS FILE...
      encodes the files (one document each) with encode_batch, single-threaded
      (TOKENIZERS_PARALLELISM=false) and with tokenizers' default thread pool, best of REPS;
      checks that [eot] + ids of each file, concatenated, equals the tokens `trainer pack` wrote
      (nanoGPT uint16 train.bin + val.bin); prints one line "name MB/s" per setting.
MB = 10^6 bytes of UTF-8 text, as `trainer pack` counts them.
"""
import os
import sys
import time

import numpy as np
from tokenizers import ByteLevelBPETokenizer

EOT = "<|endoftext|>"


def train(out, vocab_size, files):
    os.makedirs(out, exist_ok=True)
    tok = ByteLevelBPETokenizer()
    tok.train(files, vocab_size=int(vocab_size), min_frequency=2, special_tokens=[EOT], show_progress=False)
    tok.save_model(out)
    print(f"trained vocab {tok.get_vocab_size()} into {out}", file=sys.stderr)


def split(out, files):
    os.makedirs(out, exist_ok=True)
    n = 0
    for p in files:
        with open(p, encoding="utf-8") as f:
            for t in f.read().split("\n%\n"):
                if t.strip():
                    with open(os.path.join(out, f"{n:06d}.txt"), "w", encoding="utf-8") as g:
                        g.write(t + "\n%\n")
                    n += 1
    print(f"{n} documents in {out}", file=sys.stderr)


def best_time(fn, reps):
    best = float("inf")
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def timed(tok_dir, train_bin, val_bin, reps, files):
    tok = ByteLevelBPETokenizer(os.path.join(tok_dir, "vocab.json"), os.path.join(tok_dir, "merges.txt"))
    docs = []
    for p in files:
        with open(p, encoding="utf-8") as f:
            docs.append(f.read())
    mb = sum(len(d.encode("utf-8")) for d in docs) / 1e6
    reps = int(reps)

    os.environ["TOKENIZERS_PARALLELISM"] = "false"
    single = best_time(lambda: tok.encode_batch(docs), reps)
    os.environ["TOKENIZERS_PARALLELISM"] = "true"
    default = best_time(lambda: tok.encode_batch(docs), reps)

    eot = tok.token_to_id(EOT)
    want = []
    for enc in tok.encode_batch(docs):
        want.append(eot)
        want.extend(enc.ids)
    ours = np.concatenate([np.fromfile(train_bin, dtype=np.uint16), np.fromfile(val_bin, dtype=np.uint16)])
    if ours.tolist() != want:
        diff = next((i for i, (a, b) in enumerate(zip(ours.tolist(), want)) if a != b), min(len(ours), len(want)))
        sys.exit(f"ids differ: ours {len(ours)} tokens, tokenizers {len(want)}; first difference at token {diff}")
    print(f"ids equal: {len(want)} tokens", file=sys.stderr)
    print(f"tokenizers_1_thread {mb / single:.2f}")
    print(f"tokenizers_default_{os.cpu_count()}_threads {mb / default:.2f}")


if __name__ == "__main__":
    cmd, args = sys.argv[1], sys.argv[2:]
    if cmd == "train":
        train(args[0], args[1], args[2:])
    elif cmd == "split":
        split(args[0], args[1:])
    elif cmd == "time":
        timed(args[0], args[1], args[2], args[3], args[4:])
    else:
        sys.exit(__doc__)
