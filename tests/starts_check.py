#!/usr/bin/env python3
"""Checks for amped-run --starts and --ranks (tests/run_starts.sh), with NumPy.

  starts_check.py planted OUT.tns SEED
      a rank-5 model (40 x 30 x 20, each factor column non-zero in half its
      rows), its non-zero cells with noise of 1% of their spread, as .tns
  starts_check.py solo BATCH.json RANK SEED SOLO.json TOL
      the batch's model (RANK, SEED): its fit after every iteration within
      TOL of the run alone's, and as many iterations
  starts_check.py fms BATCH.json PREFIX RANK SEEDS TOL
      FMS of each start (PREFIX.rRANK.sSEED.*, npy) against the best
      (PREFIX.rRANK.*), computed here with every permutation
      (itertools), against the JSON's to TOL; and the best's FMS against
      itself, its columns permuted and scaled, is 1
  starts_check.py planted-fms BATCH.json RANK LOW
      at RANK the median FMS >= LOW, and above RANK the median is lower
  starts_check.py choose BATCH.json RANK
      the JSON's choice is RANK, with a reason
"""
import itertools
import json
import math
import sys

import numpy as np


def read_model(prefix, nmodes=3):
    A = [np.load(f"{prefix}.mode{m + 1}.npy") for m in range(nmodes)]
    lam = np.load(f"{prefix}.lambda.npy").reshape(-1)
    return lam, A


def fms(a, b):
    """The Tensor Toolbox's score with the lambda penalty, exhaustive."""
    la, A = a
    lb, B = b
    la = np.abs(la).astype(float).copy()
    lb = np.abs(lb).astype(float).copy()
    R = len(la)
    C = np.ones((R, R))
    for Am, Bm in zip(A, B):
        na = np.linalg.norm(Am, axis=0)
        nb = np.linalg.norm(Bm, axis=0)
        la = la * na
        lb = lb * nb
        den = np.outer(na, nb)
        C *= np.where(den > 0, np.abs(Am.T @ Bm) / np.where(den > 0, den, 1), 0)
    for i in range(R):
        for j in range(R):
            mx = max(la[i], lb[j])
            C[i, j] *= 1 - abs(la[i] - lb[j]) / mx if mx > 0 else 1
    best = max(sum(C[i, p[i]] for i in range(R)) for p in itertools.permutations(range(R)))
    return best / R


def planted(out, seed):
    rng = np.random.default_rng(int(seed))
    dims, R = (40, 30, 20), 5
    A = []
    for n in dims:
        F = np.zeros((n, R))
        for r in range(R):
            idx = rng.choice(n, n // 2, replace=False)
            F[idx, r] = rng.uniform(1.0, 2.0, len(idx))
        A.append(F)
    M = np.einsum("ir,jr,kr->ijk", *A)
    X = np.where(M > 0, M + rng.normal(0, 0.01 * M[M > 0].std(), M.shape), 0)
    with open(out, "w") as f:
        for idx in zip(*np.nonzero(X)):
            f.write("%d %d %d %.17g\n" % (idx[0] + 1, idx[1] + 1, idx[2] + 1, X[idx]))
    print(f"{int((X != 0).sum())} nonzeros")


def model_of(j, rank, seed):
    for m in j["models"]:
        if m["rank"] == rank and m["seed"] == seed:
            return m
    raise SystemExit(f"no model of rank {rank}, seed {seed} in the JSON")


def solo(batch, rank, seed, solo_json, tol):
    m = model_of(json.load(open(batch)), int(rank), int(seed))
    s = [it["fit"] for it in json.load(open(solo_json))["iterations"]]
    b = m["fits"]
    if len(b) != len(s):
        raise SystemExit(f"{len(b)} iterations batched, {len(s)} alone")
    d = max(abs(x - y) for x, y in zip(b, s))
    if not d <= float(tol):
        raise SystemExit(f"fits differ by {d:.3e} (> {tol})")
    print(f"{len(b)} iterations, largest difference {d:.1e}")


def fms_check(batch, prefix, rank, seeds, tol):
    j = json.load(open(batch))
    rank = int(rank)
    best = read_model(f"{prefix}.r{rank}")
    worst = 0
    for s in seeds.split(","):
        m = model_of(j, rank, int(s))
        here = fms(best, read_model(f"{prefix}.r{rank}.s{s}"))
        worst = max(worst, abs(here - m["fms"]))
    if not worst <= float(tol):
        raise SystemExit(f"FMS differs from the exhaustive one by {worst:.3e}")
    rng = np.random.default_rng(7)
    lam, A = best
    p = rng.permutation(len(lam))
    scaled = [a[:, p] * rng.uniform(0.5, 2, len(lam)) for a in A]
    # the scales moved into lambda, so the model is the same
    sc = [np.linalg.norm(a[:, p], axis=0) / np.linalg.norm(s, axis=0) for a, s in zip(A, scaled)]
    lam2 = lam[p] * np.prod(sc, axis=0)
    self_score = fms(best, (lam2, scaled))
    if abs(self_score - 1) > 1e-12:
        raise SystemExit(f"a model against itself permuted and scaled: {self_score}")
    print(f"largest difference {worst:.1e}; itself permuted {self_score:.15f}")


def planted_fms(batch, rank, low):
    j = json.load(open(batch))
    rows = {r["rank"]: r for r in j["ranks"]}
    rank = int(rank)
    at = rows[rank]["fms_median"]
    if not at >= float(low):
        raise SystemExit(f"median FMS at rank {rank}: {at}")
    above = [rows[r]["fms_median"] for r in rows if r > rank]
    if not all(a < at for a in above):
        raise SystemExit(f"above rank {rank} the median FMS {above} is not below {at}")
    print(f"rank {rank}: {at:.4f}; above: " + ", ".join(f"{a:.3f}" for a in above))


def choose(batch, rank):
    c = json.load(open(batch))["choose"]
    if c is None or c["rank"] != int(rank) or not c["reason"]:
        raise SystemExit(f"choice {c}")
    print(f"rank {c['rank']}: {c['reason']}")


if __name__ == "__main__":
    cmd, args = sys.argv[1], sys.argv[2:]
    {"planted": planted, "solo": solo, "fms": fms_check, "planted-fms": planted_fms,
     "choose": choose}[cmd](*args)
