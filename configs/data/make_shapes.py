#!/usr/bin/env python3
"""A CIFAR-sized image folder for configs/shapes_resnet.toml: 32x32 RGB PNGs of ten kinds of shape
(disc, ring, square, frame, triangle, cross, horizontal bar, vertical bar, diagonal, dots) in random
colours, sizes and places over a noisy background; OUT/train/<class>/*.png (600 a class) and
OUT/eval/<class>/*.png (100 a class). Seeded; only Python's standard library (zlib writes the PNGs).

    python3 configs/data/make_shapes.py data/shapes
"""
import math
import os
import random
import struct
import sys
import zlib

CLASSES = ["disc", "ring", "square", "frame", "triangle", "cross", "hbar", "vbar", "diagonal", "dots"]
S = 32


def png(path, rgb):
    raw = b"".join(b"\0" + bytes(rgb[y * S * 3:(y + 1) * S * 3]) for y in range(S))

    def chunk(kind, data):
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)

    with open(path, "wb") as f:
        f.write(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", S, S, 8, 2, 0, 0, 0)) +
                chunk(b"IDAT", zlib.compress(raw, 6)) + chunk(b"IEND", b""))


def inside(kind, x, y, cx, cy, r, rng_state):
    dx, dy = x - cx, y - cy
    d = math.hypot(dx, dy)
    if kind == "disc": return d <= r
    if kind == "ring": return r * 0.6 <= d <= r
    if kind == "square": return abs(dx) <= r * 0.8 and abs(dy) <= r * 0.8
    if kind == "frame": return max(abs(dx), abs(dy)) <= r * 0.85 and max(abs(dx), abs(dy)) >= r * 0.5
    if kind == "triangle": return dy <= r * 0.7 and dy >= -r and abs(dx) <= (dy + r) * 0.6
    if kind == "cross": return (abs(dx) <= r * 0.25 and abs(dy) <= r) or (abs(dy) <= r * 0.25 and abs(dx) <= r)
    if kind == "hbar": return abs(dy) <= r * 0.3 and abs(dx) <= r
    if kind == "vbar": return abs(dx) <= r * 0.3 and abs(dy) <= r
    if kind == "diagonal": return abs(dx - dy) <= r * 0.35 and abs(dx) <= r
    return any(math.hypot(dx - ox, dy - oy) <= r * 0.3 for ox, oy in rng_state)


def image(rng, kind):
    bg = [rng.randrange(256) for _ in range(3)]
    fg = [(c + 96 + rng.randrange(64)) % 256 for c in bg]
    r = rng.uniform(6, 11)
    cx, cy = rng.uniform(r, S - r), rng.uniform(r, S - r)
    dots = [(rng.uniform(-r, r) * 0.7, rng.uniform(-r, r) * 0.7) for _ in range(3)]
    px = []
    for y in range(S):
        for x in range(S):
            col = fg if inside(kind, x, y, cx, cy, r, dots) else bg
            px += [max(0, min(255, c + rng.randrange(-24, 25))) for c in col]
    return px


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else "data/shapes"
    rng = random.Random(32)
    for split, n in (("train", 600), ("eval", 100)):
        for c in CLASSES:
            d = os.path.join(out, split, c)
            os.makedirs(d, exist_ok=True)
            for i in range(n):
                png(os.path.join(d, "%04d.png" % i), image(rng, c))
    print("wrote", out, ":", len(CLASSES), "classes, 600 train and 100 eval images each")


if __name__ == "__main__":
    main()
