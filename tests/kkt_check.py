#!/usr/bin/env python3
"""The constraint and the KKT conditions of a constrained run's last update.

    kkt_check.py FILE.tns PREFIX NMODES CONSTRAINTS L1 L2 TOL

PREFIX.modeN.mat and PREFIX.lambda.mat are amped-run's text factors (a row
per index, columns normalized) of FILE.tns (1-based; repeated coordinates
summed); CONSTRAINTS is "none" or "nonneg" per mode, comma-separated; L1
and L2 one value for every mode. Every non-negative mode must have no
negative entry. The last mode's factor times lambda, B, was the last
update's answer to min (1/2)|X - [[A_1, ..., B]]|^2 + L1 sum|B| + (L2/2)|B|^2
(subject to B >= 0 where non-negative), the other factors as written; with
M the MTTKRP and V the Hadamard product of the others' Grams, g = B V - M +
L2 B must satisfy, entry by entry, |min(b, g + L1)| = 0 where non-negative
(b below 1e-9 counted as 0: MU and HALS keep a floor of 1e-12) and
g + L1 sign(b) = 0 where b != 0, |g| <= L1 where b = 0 otherwise; the
largest violation, relative to the largest |M|, must be at most TOL.
Prints the residual; exits 1 if either check fails.
"""
import sys


def read_mat(path):
    return [[float(x) for x in line.split()] for line in open(path) if line.strip()]


def main():
    tns, prefix, n, cons, l1, l2, tol = sys.argv[1:8]
    n, l1, l2, tol = int(n), float(l1), float(l2), float(tol)
    cons = cons.split(",")
    if len(cons) == 1:
        cons = cons * n
    A = [read_mat("%s.mode%d.mat" % (prefix, m + 1)) for m in range(n)]
    lam = [row[0] for row in read_mat(prefix + ".lambda.mat")]
    R = len(lam)
    X = {}
    for line in open(tns):
        f = line.split()
        if f and not f[0].startswith("#"):
            c = tuple(int(x) - 1 for x in f[:n])
            X[c] = X.get(c, 0.0) + float(f[n])
    bad = 0
    for m in range(n):
        if cons[m] == "nonneg":
            low = min(min(row) for row in A[m])
            if low < 0:
                print("mode %d is non-negative, yet has an entry %g" % (m + 1, low))
                bad = 1
    d = n - 1
    B = [[a * lam[r] for r, a in enumerate(row)] for row in A[d]]
    M = [[0.0] * R for _ in B]
    for c, v in X.items():
        for r in range(R):
            p = v
            for m in range(n - 1):
                p *= A[m][c[m]][r]
            M[c[d]][r] += p
    V = [[1.0] * R for _ in range(R)]
    for m in range(n - 1):
        for p in range(R):
            for q in range(R):
                V[p][q] *= sum(row[p] * row[q] for row in A[m])
    scale = max(abs(x) for row in M for x in row)
    worst = 0.0
    for i, b in enumerate(B):
        for r in range(R):
            g = sum(b[q] * V[q][r] for q in range(R)) - M[i][r] + l2 * b[r]
            if cons[d] == "nonneg":
                v = abs(min(b[r] if b[r] > 1e-9 else 0.0, g + l1))
            elif b[r] > 0:
                v = abs(g + l1)
            elif b[r] < 0:
                v = abs(g - l1)
            else:
                v = max(abs(g) - l1, 0.0)
            worst = max(worst, v)
    worst /= scale
    print("KKT residual of mode %d's last update: %.2e" % (n, worst))
    if not worst <= tol:
        bad = 1
    return bad


if __name__ == "__main__":
    sys.exit(main())
