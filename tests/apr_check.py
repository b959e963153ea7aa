#!/usr/bin/env python3
"""CP-APR's outputs read back independently (tests/run_apr.sh).

    apr_check.py planted OUT.tns TRUTH_PREFIX SEED [NMODES]
        a rank-5 Poisson tensor of 3 (or 4) modes drawn from a planted
        sparse model: the
        counts as FROSTT text, the truth as TRUTH_PREFIX.modeN.npy and
        TRUTH_PREFIX.lambda.npy
    apr_check.py sparse OUT.tns N NNZ SEED
        NNZ counts of 1 at coordinates drawn uniformly from a 4-mode index
        space of N a mode, the empty slices dropped (so that pyttb's rows
        are amped's): a fit puts model values far below 1e-10 at its
        nonzeros
    apr_check.py longrows OUT.tns SEED
        counts at every coordinate of mode 1's first slice and of mode 3's
        first (200 x 200 each, 79,800 nonzeros in a 200 x 200 x 200
        tensor): rows of 40,000 nonzeros, more than the CPU keeps of one
        row's pi at rank 16
    apr_check.py init PREFIX R SEED TNS
        starting factors for TNS's dims, uniform in [0.1, 1), as npy
    apr_check.py pyttb TNS INIT_PREFIX R JSON K
        pyttb's cp_apr (algorithm "mu") from the same start, with the
        JSON's eps_div_zero and tol, stopped after k = 1 .. K outer
        iterations: its log-likelihood against the JSON's after iteration
        k, and its inner iterations in iteration k against the JSON's;
        exit 1 above 1e-9 relative or where the inner iterations differ
        (two -inf agree: the JSON writes null)
    apr_check.py loglik TNS PREFIX JSON
        the log-likelihood recomputed from the factor files (npy) and the
        tensor, against the JSON's final_loglik: exit 1 above 1e-10
        relative
    apr_check.py fms TRUTH_PREFIX PREFIX MIN
        the factor match score of the model in PREFIX against the truth
        (best matching of components): exit 1 below MIN
    apr_check.py same JSON_A JSON_B TOL exact|any
        two runs' log-likelihoods after every outer iteration (the GPU's
        against the CPU's from the same start): exit 1 where one differs
        by more than TOL relative, the counts of iterations differ, or
        (exact) the inner iterations of one do

Every number is recomputed here from the files with NumPy; nothing of
amped is imported."""
import itertools
import json
import math
import sys

import numpy as np


def read_tns(path):
    d = np.loadtxt(path, ndmin=2)
    subs = d[:, :-1].astype(np.int64) - 1
    return subs, d[:, -1], tuple(int(n) for n in subs.max(axis=0) + 1)


def read_model(prefix, nmodes):
    A = [np.load(f"{prefix}.mode{m + 1}.npy") for m in range(nmodes)]
    lam = np.load(f"{prefix}.lambda.npy").reshape(-1)
    return lam, A


def loglik(subs, vals, lam, A):
    """sum x log m - sum of the model's entries; the model never formed."""
    P = np.tile(lam, (len(vals), 1))
    for m, a in enumerate(A):
        P = P * a[subs[:, m], :]
    mvals = P.sum(axis=1)
    total = lam.copy()
    for a in A:
        total = total * a.sum(axis=0)
    nz = vals != 0
    return float(np.sum(vals[nz] * np.log(mvals[nz])) - total.sum())


def planted(out, truth, seed, nmodes=3):
    rng = np.random.default_rng(seed)
    dims, R = ((30, 40, 50) if nmodes == 3 else (20, 25, 30, 15)), 5
    A = []
    for n in dims:
        a = rng.gamma(1.0, 1.0, (n, R)) * (rng.random((n, R)) < 0.4)
        a[rng.integers(0, n, R), np.arange(R)] += 1.0   # no empty column
        A.append(a / a.sum(axis=0))
    lam = np.array([4000.0, 3000.0, 2500.0, 2000.0, 1500.0])
    letters = "ijkl"[:len(dims)]
    M = np.einsum("r," + ",".join(c + "r" for c in letters) + "->" + letters, lam, *A)
    X = rng.poisson(M)
    # Every slice holds a count, so the compact and full index spaces agree.
    for m, n in enumerate(dims):
        for i in range(n):
            sl = [slice(None)] * len(dims)
            sl[m] = i
            if X[tuple(sl)].sum() == 0:
                idx = [0] * len(dims)
                idx[m] = i
                X[tuple(idx)] = 1
    subs = np.argwhere(X > 0)
    with open(out, "w") as f:
        for s in subs:
            f.write(" ".join(str(i + 1) for i in s) + f" {X[tuple(s)]}\n")
    for m, a in enumerate(A):
        np.save(f"{truth}.mode{m + 1}.npy", a)
    np.save(f"{truth}.lambda.npy", lam)
    print(f"{len(subs)} nonzeros, {int(X.sum())} counts")


def sparse(out, n, nnz, seed):
    rng = np.random.default_rng(seed)
    subs = np.unique(rng.integers(0, n, (nnz, 4)), axis=0)
    for m in range(subs.shape[1]):
        subs[:, m] = np.unique(subs[:, m], return_inverse=True)[1]
    with open(out, "w") as f:
        for s in subs:
            f.write(" ".join(str(i + 1) for i in s) + " 1\n")
    print(f"{len(subs)} nonzeros, dims {' x '.join(str(int(d)) for d in subs.max(axis=0) + 1)}")


def longrows(out, seed):
    rng = np.random.default_rng(seed)
    n = 200
    X = np.zeros((n, n, n), dtype=np.int64)
    X[0, :, :] = rng.poisson(2.0, (n, n)) + 1
    X[:, :, 0] = rng.poisson(2.0, (n, n)) + 1
    subs = np.argwhere(X > 0)
    with open(out, "w") as f:
        for t in subs:
            f.write(f"{t[0] + 1} {t[1] + 1} {t[2] + 1} {X[tuple(t)]}\n")
    print(f"{len(subs)} nonzeros")


def init(prefix, R, seed, tns):
    _, _, shape = read_tns(tns)
    rng = np.random.default_rng(seed)
    for m, n in enumerate(shape):
        np.save(f"{prefix}.mode{m + 1}.npy", rng.uniform(0.1, 1.0, (n, R)))


def against_pyttb(tns, init_prefix, R, js, K):
    import pyttb as ttb
    subs, vals, shape = read_tns(tns)
    X = ttb.sptensor(subs, vals.reshape(-1, 1), shape)
    A0 = [np.load(f"{init_prefix}.mode{m + 1}.npy") for m in range(len(shape))]
    j = json.load(open(js))
    ours = [-math.inf if it["loglik"] is None else it["loglik"] for it in j["iterations"]]
    worst = 0.0
    for k in range(1, K + 1):
        with np.errstate(divide="ignore"):
            _, _, out = ttb.cp_apr(X, R, init=ttb.ktensor([a.copy() for a in A0]), maxiters=k,
                                   printitn=0, epsDivZero=j["eps_div_zero"], stoptol=j["tol"])
        if k > len(ours):
            break
        if ours[k - 1] == out["obj"] == -math.inf:
            rel = 0.0
        else:
            rel = abs(ours[k - 1] - out["obj"]) / abs(out["obj"])
        inner = int(out["nInnerIters"][-1])
        if inner != j["iterations"][k - 1]["inner"]:
            print(f"iteration {k}: {j['iterations'][k - 1]['inner']} inner iterations, "
                  f"pyttb {inner}")
            worst = math.inf
        worst = max(worst, rel)
        print(f"iteration {k}: amped {ours[k - 1]:.15e} pyttb {out['obj']:.15e} rel {rel:.2e}")
    print(f"largest relative difference {worst:.2e}")
    return worst <= 1e-9


def check_loglik(tns, prefix, js):
    subs, vals, shape = read_tns(tns)
    lam, A = read_model(prefix, len(shape))
    ours = json.load(open(js))["final_loglik"]
    mine = loglik(subs, vals, lam, A)
    rel = abs(ours - mine) / abs(mine)
    print(f"recomputed {mine:.15e}, reported {ours:.15e}, rel {rel:.2e}")
    return rel <= 1e-10


def fms(truth, prefix, least):
    nmodes = 1
    while True:
        try:
            np.load(f"{truth}.mode{nmodes + 1}.npy")
            nmodes += 1
        except OSError:
            break
    lt, At = read_model(truth, nmodes)
    le, Ae = read_model(prefix, nmodes)
    R = len(lt)
    score = np.zeros((R, R))
    for p in range(R):
        for q in range(R):
            s = 1 - abs(lt[p] - le[q]) / max(lt[p], le[q])
            for a, b in zip(At, Ae):
                u, v = a[:, p], b[:, q]
                s *= abs(u @ v) / (np.linalg.norm(u) * np.linalg.norm(v))
            score[p, q] = s
    best = max(np.mean([score[p, perm[p]] for p in range(R)])
               for perm in itertools.permutations(range(R)))
    print(f"factor match score {best:.4f} (at least {least})")
    return best >= least


def same(js_a, js_b, tol, exact_inner):
    """Every outer iteration's log-likelihood of run b within tol
    (relative) of run a's, as many iterations, and (exact_inner) the same
    inner iterations at each."""
    a = json.load(open(js_a))["iterations"]
    b = json.load(open(js_b))["iterations"]
    worst = 0.0
    for k, (x, y) in enumerate(zip(a, b)):
        rel = abs(x["loglik"] - y["loglik"]) / abs(x["loglik"])
        worst = max(worst, rel)
        if rel > tol or (exact_inner and x["inner"] != y["inner"]):
            print(f"iteration {k + 1}: {x['loglik']:.15e} ({x['inner']} inner) against "
                  f"{y['loglik']:.15e} ({y['inner']} inner), rel {rel:.2e}")
    good = len(a) == len(b) and len(a) > 0 and worst <= tol
    good = good and (not exact_inner or [x["inner"] for x in a] == [y["inner"] for y in b])
    print(f"{len(b)} iterations of {len(a)}, largest relative difference {worst:.2e} "
          f"(tolerance {tol:g})")
    return good


def main(argv):
    cmd = argv[1]
    if cmd == "planted":
        planted(argv[2], argv[3], int(argv[4]), int(argv[5]) if len(argv) > 5 else 3)
        return 0
    if cmd == "sparse":
        sparse(argv[2], int(argv[3]), int(argv[4]), int(argv[5]))
        return 0
    if cmd == "longrows":
        longrows(argv[2], int(argv[3]))
        return 0
    if cmd == "init":
        init(argv[2], int(argv[3]), int(argv[4]), argv[5])
        return 0
    if cmd == "pyttb":
        return 0 if against_pyttb(argv[2], argv[3], int(argv[4]), argv[5], int(argv[6])) else 1
    if cmd == "loglik":
        return 0 if check_loglik(argv[2], argv[3], argv[4]) else 1
    if cmd == "same":
        return 0 if same(argv[2], argv[3], float(argv[4]), argv[5] == "exact") else 1
    if cmd == "fms":
        return 0 if fms(argv[2], argv[3], float(argv[4])) else 1
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
