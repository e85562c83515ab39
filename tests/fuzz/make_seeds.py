#!/usr/bin/env python3
"""Writes the generated part of the fuzz seed corpora (tests/fuzz/corpus/<target>/seed-*): small
valid inputs of each format, from the repo's configs, models and fixtures and from the formats'
layouts. Inputs the fuzzers found (and crash regressions) sit beside them under other names.
Run from the repository root: /usr/bin/python3 tests/fuzz/make_seeds.py [state.json ...]
(state.json files of real checkpoints become checkpoint_state seeds)."""
import glob, gzip, json, os, shutil, struct, sys

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus")


def put(target, name, data):
    d = os.path.join(ROOT, target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "seed-" + name), "wb") as f:
        f.write(data if isinstance(data, bytes) else data.encode())


def copy_files(target, pattern):
    for p in sorted(glob.glob(pattern)):
        with open(p, "rb") as f:
            put(target, os.path.basename(p), f.read())


# run configs, with --set strings after NUL bytes
copy_files("run_config", "configs/*.toml")
put("run_config", "sets", open("configs/fmnist_mlp.toml").read() + "\0train.steps=5\0optimizer.lr=0.1\0run.name=x")
# model files
copy_files("model_file", "models/*.toml")


# safetensors: a prefix, a JSON header, the data
def safetensors(tensors, metadata=None):
    header, data = {}, b""
    for name, (dtype, shape, raw) in tensors.items():
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [len(data), len(data) + len(raw)]}
        data += raw
    if metadata:
        header["__metadata__"] = metadata
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    return struct.pack("<Q", len(h)) + h + data


put("safetensors", "f32", safetensors({"w": ("F32", [2, 2], struct.pack("<4f", 1, 2, 3, 4)),
                                       "b": ("F32", [2], struct.pack("<2f", 0.5, -1))}, {"format": "pt"}))
put("safetensors", "mixed", safetensors({"a": ("BF16", [3], b"\x80\x3f" * 3), "i": ("I64", [1], struct.pack("<q", 7)),
                                         "m": ("BOOL", [2], b"\x01\x00"), "h": ("F16", [], b"\x00\x3c"),
                                         "e": ("F64", [0], b"")}))
copy_files("safetensors", "tests/fixtures/safetensors_torch.safetensors")


# IDX: magic 0x0000 08 <dims>, big-endian sizes, u8 data; raw and gzip
def idx(shape, data):
    return struct.pack(">I", 0x0800 + len(shape)) + b"".join(struct.pack(">I", s) for s in shape) + data


put("idx", "images", idx([2, 3, 3], bytes(range(18))))
put("idx", "labels", idx([4], bytes([0, 9, 3, 1])))
put("idx", "images.gz", gzip.compress(idx([1, 2, 2], b"\x00\x7f\x80\xff"), mtime=0))

# text: 4 option bytes (block size + 8, eval fraction * 200 + 16, windows, an index), then the corpus
put("text", "fortune", bytes([16, 36, 0, 5]) + b"The best way to predict the future is to invent it.\n%\n")
put("text", "overlap", bytes([12, 16, 1, 0]) + b"abcdefghijklmnop")

copy_files("tokens", "tests/fixtures/tokens_*.bin")
copy_files("csv", "tests/fixtures/tabular_*.csv")
put("csv", "quoted", 'a,"b c",label\n1,"2",x\n"3.5",4e1,"y,z"\n-1,0,x\n')
copy_files("recordio", "tests/fixtures/recordio_fixture.*")
for p in sorted(glob.glob("tests/fixtures/image_folder/*/*/*")):
    with open(p, "rb") as f:
        put("image_decode", os.path.basename(os.path.dirname(p)) + "-" + os.path.basename(p), f.read())


# the store's wire format: chunks [u8 c][u8 n][n bytes] (c & 0x80: a correct hello first)
def frame(payload):
    return struct.pack("<I", len(payload)) + payload


def s(b):
    b = b.encode() if isinstance(b, str) else b
    return struct.pack("<I", len(b)) + b


def chunk(c, data):
    out = b""
    while True:  # n is one byte: longer data goes in several chunks on the same connection
        out += bytes([c, min(len(data), 255)]) + data[:255]
        data = data[255:]
        c &= 0x3F  # the hello only once
        if not data:
            return out


SET, GET, ADD, WAIT, CHECK, DELETE = 2, 3, 4, 5, 6, 7
put("store_server", "set-get", chunk(0x80, frame(bytes([SET]) + s("k") + s("v")) + frame(bytes([GET]) + s("k") + struct.pack("<Q", 100))))
put("store_server", "wait-then-set",
    chunk(0x80, frame(bytes([WAIT]) + struct.pack("<I", 2) + s("a") + s("b") + struct.pack("<Q", 10000))) +
    chunk(0x81, frame(bytes([SET]) + s("a") + s("1")) + frame(bytes([ADD]) + s("b") + struct.pack("<q", 5))) +
    chunk(0x82, frame(bytes([CHECK]) + struct.pack("<I", 1) + s("a")) + frame(bytes([DELETE]) + s("a"))))
put("store_server", "get-parked-hangup", chunk(0x80, frame(bytes([GET]) + s("never") + struct.pack("<Q", 5))) + bytes([0x40, 0]))
put("store_server", "wrong-token", chunk(0, frame(bytes([1]) + s("not-the-token"))))
put("store_server", "huge-length", chunk(0x80, struct.pack("<I", 0xFFFFFFF0) + b"xx"))
put("store_server", "add-overflow", chunk(0x80, frame(bytes([ADD]) + s("c") + struct.pack("<q", 2**63 - 1)) +
                                          frame(bytes([ADD]) + s("c") + struct.pack("<q", 1))))

for p in sys.argv[1:]:
    with open(p, "rb") as f:
        put("checkpoint_state", os.path.basename(os.path.dirname(os.path.dirname(os.path.dirname(p)))) + "-" +
            os.path.basename(os.path.dirname(p)) + ".json", f.read())


# dictionaries (libFuzzer -dict): the words of the seeds' TOML and the layer and option names the docs list
def dictionary(name, texts):
    import re
    words = set()
    for t in texts:
        words.update(re.findall(r"[A-Za-z_][A-Za-z0-9_]*", t))
        words.update(re.findall(r"`([a-z_0-9]+)`", t))
    words.update(["[[", "]]", " = ", "\n[", "]\n", "'", '"', "true", "false", "[]", "{}", "inf", "nan", "-1", "0", "1e309"])
    os.makedirs(os.path.join(os.path.dirname(ROOT), "dict"), exist_ok=True)
    path = os.path.join(os.path.dirname(ROOT), "dict", name + ".dict")
    # the run config's declared keys (lib/config/run_config_keys.def): tests/unit/test_config_keys.cpp
    # writes that block and fails when it is stale, so it is kept as it is
    keys = ""
    if os.path.exists(path):
        text = open(path, encoding="utf-8").read()
        begin, end = text.find("# run_config_keys.def"), text.find("# end of run_config_keys.def\n")
        if begin >= 0 and end > begin:
            keys = text[begin:end + len("# end of run_config_keys.def\n")]
    with open(path, "w") as f:
        f.write(keys)
        for w in sorted(words):  # libFuzzer's escapes: \\, \" and \xNN
            f.write('"' + "".join(c if 32 <= ord(c) < 127 and c not in '\\"' else "\\x%02X" % ord(c) for c in w) + '"\n')


read = lambda p: open(p, encoding="utf-8").read()
dictionary("run_config", [read(p) for p in glob.glob("configs/*.toml")] + [read("docs/config.md")])
dictionary("model_file", [read(p) for p in glob.glob("models/*.toml")] + [read(p) for p in glob.glob("docs/*.md")])
