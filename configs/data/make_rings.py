#!/usr/bin/env python3
"""rings.csv, the table configs/tabular_rings.toml trains on: 1500 points on three noisy concentric
rings in the plane (x, y), two distractor columns, and the ring's name as the label. Seeded, so the
committed file is what this script writes; Python's csv module writes it (an independent writer).

    /usr/bin/python3 configs/data/make_rings.py
"""
import csv
import math
import os
import random

HERE = os.path.dirname(os.path.abspath(__file__))


def main():
    rng = random.Random(20261126)
    rows = []
    for i in range(1500):
        ring = i % 3
        name = ["inner", "middle", "outer"][ring]
        r = 1.0 + ring + rng.gauss(0, 0.3)
        a = rng.uniform(0, 2 * math.pi)
        rows.append([i, round(r * math.cos(a) * 10 + 50, 4), round(r * math.sin(a) * 10 - 20, 4),
                     round(rng.gauss(0, 1), 4), round(rng.uniform(0, 1000), 3), name])
    with open(os.path.join(HERE, "rings.csv"), "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["id", "x", "y", "noise", "uniform noise", "ring"])
        w.writerows(rows)
    print("wrote rings.csv:", len(rows), "rows")


if __name__ == "__main__":
    main()
