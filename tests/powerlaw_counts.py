"""The baselines' power-law samples drawn again in NumPy (a reader that is
not bench/powerlaw-counts.c) and counted: prints each distinct coordinate,
1-based, with how many samples hit it, sorted as a .tns.

usage: powerlaw_counts.py SAMPLES S DIM1 DIM2 ..."""
import math
import sys

import numpy as np


def mix(x):
    x = x ^ (x >> np.uint64(33))
    x = x * np.uint64(0xFF51AFD7ED558CCD)
    x = x ^ (x >> np.uint64(33))
    x = x * np.uint64(0xC4CEB9FE1A85EC53)
    return x ^ (x >> np.uint64(33))


def main():
    ns, s = int(sys.argv[1]), float(sys.argv[2])
    dims = [int(a) for a in sys.argv[3:]]
    cols = []
    with np.errstate(over="ignore"):
        h = mix(np.arange(ns, dtype=np.uint64) * np.uint64(0x9E3779B97F4A7C15) + np.uint64(7))
        for k, d in enumerate(dims):
            h = mix(h + np.uint64(k))
            u = ((h >> np.uint64(11)).astype(np.float64) + 0.5) * 2.0**-53
            x = (((float(d) ** (1.0 - s)) - 1.0) * u + 1.0) ** (1.0 / (1.0 - s))
            rank = np.minimum(x.astype(np.uint64) - np.uint64(1), np.uint64(d - 1))
            a = (d // 2 + 12345) | 1
            while math.gcd(a, d) != 1:
                a += 2
            b = int(mix(np.uint64(k + 99))) % d
            # a * rank can pass 64 bits: exact integers.
            cols.append(np.array((rank.astype(object) * a + b) % d, dtype=np.int64))
    coords, counts = np.unique(np.stack(cols, axis=1), axis=0, return_counts=True)
    out = sys.stdout
    for row, n in zip(coords, counts):
        out.write(" ".join(str(int(i) + 1) for i in row) + f" {n}\n")


main()
