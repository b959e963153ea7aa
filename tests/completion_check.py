#!/usr/bin/env python3
"""CP completion's outputs (amped-run --observed nonzeros) read back
independently (tests/run_completion.sh).

    completion_check.py planted OUT.tns TEST.tns TRUTH_PREFIX SEED FRAC SIGMA
        a 30 x 25 x 20 tensor of a planted rank-3 model (Gaussian factors)
        plus Gaussian noise of standard deviation SIGMA; a share FRAC of
        its cells, drawn at random, as FROSTT text in OUT.tns (every slice
        holds one at least, so the compact and full index spaces agree),
        and 2000 of the hidden cells in TEST.tns; the truth as
        TRUTH_PREFIX.modeN.npy
    completion_check.py random OUT.tns DIMS NNZ SEED
        NNZ distinct random cells of a tensor of DIMS (e.g. 6,5,4,3),
        values uniform in [-1, 1), every slice holding one
    completion_check.py split TNS FRAC SEED TRAIN.tns TEST.tns
        TNS's entries parted as --holdout FRAC --seed SEED parts them
    completion_check.py init PREFIX R SEED TNS
        starting factors for TNS's dims, uniform in [0.1, 1), as npy
    completion_check.py reference TNS INIT_PREFIX JSON OUT_PREFIX L2 TEST
        the dense masked reference in NumPy from the same start (INIT's
        factors, lambda 1): X and the training mask as dense arrays, row
        i of mode n solving (K_i + l2 I) h = b_i with K_i = KR^T diag(w_i)
        KR from the mode-n unfolding's mask row w_i and the Khatri-Rao
        product KR of the other factors, rows with no training entry or a
        singular system (a squared Cholesky pivot at most 1000 R eps times
        the largest diagonal entry) kept; lambda as CP-ALS takes it. TEST: "holdout
        F SEED" (the test entries drawn here by the documented hash of the
        original coordinates), "file TEST.tns", or "none". Every
        iteration's fit, training and test RMSE against the JSON's, and
        the final factors and lambda against OUT_PREFIX's npy files:
        exit 1 above 1e-10 relative (or $COMPLETION_TOL)
    completion_check.py recompute TNS PREFIX JSON TEST
        every number of the report recomputed from the factor files
        (npy) and the data: the final fit over the training entries, the
        RMSEs, the training and test counts, the rows with no training
        entry per mode; exit 1 where one differs by more than 1e-10
        relative (counts: at all)
    completion_check.py rmse JSON MAX
        the last test RMSE at most MAX (exit 1 above)
    completion_check.py same JSON_A JSON_B TOL
        two runs' fits and RMSEs at every iteration and their counts
        (exit 1 above TOL relative, or where the counts differ)

Nothing of amped is imported; the holdout hash is written out here from
amped-run(1)'s description."""
import json
import os
import sys

import numpy as np

M64 = (1 << 64) - 1


def read_tns(path, shape=None):
    d = np.loadtxt(path, ndmin=2)
    subs = d[:, :-1].astype(np.int64) - 1
    if shape is None:
        shape = tuple(int(n) for n in subs.max(axis=0) + 1)
    return subs, d[:, -1], shape


def write_tns(path, subs, vals):
    with open(path, "w") as f:
        for s, v in zip(subs, vals):
            f.write(" ".join(str(int(i) + 1) for i in s) + f" {float(v)!r}\n")


def mix(z):
    """SplitMix64's finalizer on uint64 arrays (wrapping arithmetic)."""
    z = z + np.uint64(0x9e3779b97f4a7c15)
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xbf58476d1ce4e5b9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94d049bb133111eb)
    return z ^ (z >> np.uint64(31))


def holdout_draw(subs, seed):
    """amped-run(1): h = mix(seed ^ 0x6a09e667f3bcc909), then h = mix(h ^ i_m)
    for each mode's original 0-based index; the draw is (h >> 11) / 2^53."""
    with np.errstate(over="ignore"):
        h = np.full(len(subs), np.uint64((seed ^ 0x6a09e667f3bcc909) & M64))
        h = mix(h)
        for m in range(subs.shape[1]):
            h = mix(h ^ subs[:, m].astype(np.uint64))
    return (h >> np.uint64(11)).astype(np.float64) * 2.0 ** -53


def test_split(subs, vals, shape, test):
    """(train mask over the stored entries, test subs, test vals)."""
    kind = test[0]
    if kind == "holdout":
        held = holdout_draw(subs, int(test[2])) < float(test[1])
        return ~held, subs[held], vals[held]
    if kind == "file":
        ts, tv, _ = read_tns(test[1], shape)
        return np.ones(len(vals), bool), ts, tv
    return np.ones(len(vals), bool), subs[:0], vals[:0]


def model_at(lam, A, subs):
    P = np.tile(lam, (len(subs), 1))
    for m, a in enumerate(A):
        P = P * a[subs[:, m], :]
    return P.sum(axis=1)


def khatri_rao(A, skip):
    """Rows in C order over the other modes: row (j_a, j_b, ...) is
    A_a[j_a] * A_b[j_b] * ..., the modes in increasing order."""
    out = None
    for m, a in enumerate(A):
        if m == skip:
            continue
        out = a.copy() if out is None else (out[:, None, :] * a[None, :, :]).reshape(-1, a.shape[1])
    return out


def reference(tns, init_prefix, js, out_prefix, l2, test):
    subs, vals, shape = read_tns(tns)
    N = len(shape)
    A = [np.load(f"{init_prefix}.mode{m + 1}.npy") for m in range(N)]
    R = A[0].shape[1]
    lam = np.ones(R)
    train, tsubs, tvals = test_split(subs, vals, shape, test)
    X = np.zeros(shape)
    W = np.zeros(shape)
    X[tuple(subs.T)] = vals
    W[tuple(subs[train].T)] = 1.0
    Xt, Wt = X * W, W
    report = json.load(open(js))
    its = report["iterations"]
    worst = 0.0
    eps = np.finfo(float).eps
    for it in range(len(its)):
        for d in range(N):
            KR = khatri_rao(A, d)
            Xd = np.moveaxis(Xt, d, 0).reshape(shape[d], -1)
            Wd = np.moveaxis(Wt, d, 0).reshape(shape[d], -1)
            new = A[d] * lam
            for i in range(shape[d]):
                w = Wd[i]
                if w.sum() == 0:
                    continue
                K = KR.T @ (w[:, None] * KR)
                b = KR.T @ Xd[i]
                tiny = 1000.0 * R * eps * (K.diagonal().max() + l2)
                K = K + l2 * np.eye(R)
                try:
                    L = np.linalg.cholesky(K)
                except np.linalg.LinAlgError:
                    continue
                if np.any(L.diagonal() ** 2 <= tiny):
                    continue
                new[i] = np.linalg.solve(L.T, np.linalg.solve(L, b))
            if it == 0:
                lam = np.sqrt((new ** 2).sum(axis=0))
            else:
                lam = np.maximum(np.abs(new).max(axis=0), 1.0)
            lam[lam == 0] = 1.0
            A[d] = new / lam
        m_tr = model_at(lam, A, subs[train])
        sse = np.sum((vals[train] - m_tr) ** 2)
        fit = 1 - np.sqrt(sse) / np.sqrt(np.sum(vals[train] ** 2))
        rmse_tr = np.sqrt(sse / train.sum())
        ours = its[it]
        pairs = [("fit", fit, ours["fit"]), ("rmse_train", rmse_tr, ours["rmse_train"])]
        if len(tvals):
            rmse_te = np.sqrt(np.mean((tvals - model_at(lam, A, tsubs)) ** 2))
            pairs.append(("rmse_test", rmse_te, ours["rmse_test"]))
        elif ours["rmse_test"] is not None:
            print(f"iteration {it + 1}: rmse_test {ours['rmse_test']} without test entries")
            return False
        for name, mine, theirs in pairs:
            rel = abs(mine - theirs) / max(abs(mine), 1e-300)
            worst = max(worst, rel)
            if rel > float(os.environ.get("COMPLETION_TOL", "1e-10")):
                print(f"iteration {it + 1}: {name} reference {mine:.17g} amped {theirs:.17g} "
                      f"rel {rel:.2e}")
    lam_o = np.load(f"{out_prefix}.lambda.npy").reshape(-1)
    fw = np.max(np.abs(lam_o - lam)) / np.max(np.abs(lam))
    for m in range(N):
        a = np.load(f"{out_prefix}.mode{m + 1}.npy")
        fw = max(fw, np.max(np.abs(a - A[m])) / np.max(np.abs(A[m])))
    print(f"{len(its)} iterations: fits and RMSEs within {worst:.1e}, factors and lambda "
          f"within {fw:.1e} of the dense masked reference")
    tol = float(os.environ.get("COMPLETION_TOL", "1e-10"))
    return worst <= tol and fw <= tol


def recompute(tns, prefix, js, test):
    subs, vals, shape = read_tns(tns)
    N = len(shape)
    A = [np.load(f"{prefix}.mode{m + 1}.npy") for m in range(N)]
    lam = np.load(f"{prefix}.lambda.npy").reshape(-1)
    train, tsubs, tvals = test_split(subs, vals, shape, test)
    rep = json.load(open(js))
    c = rep["completion"]
    m_tr = model_at(lam, A, subs[train])
    sse = np.sum((vals[train] - m_tr) ** 2)
    mine = {"final_fit": 1 - np.sqrt(sse) / np.sqrt(np.sum(vals[train] ** 2)),
            "rmse_train": np.sqrt(sse / train.sum())}
    theirs = {"final_fit": rep["final_fit"], "rmse_train": c["rmse_train"]}
    if len(tvals):
        mine["rmse_test"] = np.sqrt(np.mean((tvals - model_at(lam, A, tsubs)) ** 2))
        theirs["rmse_test"] = c["rmse_test"]
    last = rep["iterations"][-1]
    ok = True
    for k in mine:
        rel = abs(mine[k] - theirs[k]) / max(abs(mine[k]), 1e-300)
        if rel > 1e-10:
            print(f"{k}: recomputed {mine[k]:.17g}, reported {theirs[k]:.17g}, rel {rel:.2e}")
            ok = False
    for k in ("rmse_train", "rmse_test"):
        if last[k] != c[k]:
            print(f"the last iteration's {k} {last[k]} is not the run's {c[k]}")
            ok = False
    unobs = []
    for d in range(N):
        rows = np.zeros(shape[d], bool)
        rows[subs[train][:, d]] = True
        unobs.append(int(shape[d] - rows.sum()))
    counts = {"n_train": int(train.sum()), "n_test": len(tvals), "unobserved_rows": unobs}
    for k, v in counts.items():
        if c[k] != v:
            print(f"{k}: recomputed {v}, reported {c[k]}")
            ok = False
    if ok:
        print(f"fit {mine['final_fit']:.12f}, RMSE train {mine['rmse_train']:.6e}"
              + (f", test {mine['rmse_test']:.6e}" if "rmse_test" in mine else "")
              + f", {counts['n_train']} training and {counts['n_test']} test entries, "
              f"unobserved rows {unobs}: as reported")
    return ok


def planted(out, test_out, truth, seed, frac, sigma):
    rng = np.random.default_rng(seed)
    shape, R = (30, 25, 20), 3
    A = [rng.standard_normal((n, R)) for n in shape]
    X = np.einsum("ir,jr,kr->ijk", *A) + sigma * rng.standard_normal(shape)
    obs = rng.random(shape) < frac
    for m, n in enumerate(shape):   # every slice observed once at least
        for i in range(n):
            sl = [slice(None)] * 3
            sl[m] = i
            if not obs[tuple(sl)].any():
                idx = [int(rng.integers(0, k)) for k in shape]
                idx[m] = i
                obs[tuple(idx)] = True
    subs = np.argwhere(obs)
    write_tns(out, subs, X[tuple(subs.T)])
    hidden = np.argwhere(~obs)
    pick = hidden[rng.choice(len(hidden), 2000, replace=False)]
    write_tns(test_out, pick, X[tuple(pick.T)])
    for m, a in enumerate(A):
        np.save(f"{truth}.mode{m + 1}.npy", a)
    print(f"{len(subs)} of {obs.size} cells observed ({len(subs) / obs.size:.1%}), "
          f"noise sigma {sigma}")


def random_tensor(out, dims, nnz, seed):
    rng = np.random.default_rng(seed)
    shape = tuple(int(x) for x in dims.split(","))
    cells = set()
    for m, n in enumerate(shape):
        for i in range(n):
            idx = [int(rng.integers(0, k)) for k in shape]
            idx[m] = i
            cells.add(tuple(idx))
    while len(cells) < nnz:
        cells.add(tuple(int(rng.integers(0, k)) for k in shape))
    subs = np.array(sorted(cells))
    write_tns(out, subs, rng.uniform(-1, 1, len(subs)))


def init(prefix, R, seed, tns):
    _, _, shape = read_tns(tns)
    rng = np.random.default_rng(seed)
    for m, n in enumerate(shape):
        np.save(f"{prefix}.mode{m + 1}.npy", rng.uniform(0.1, 1.0, (n, R)))


def same(ja, jb, tol):
    a, b = json.load(open(ja)), json.load(open(jb))
    ia, ib = a["iterations"], b["iterations"]
    if len(ia) != len(ib):
        print(f"{len(ia)} iterations against {len(ib)}")
        return False
    worst = 0.0
    for x, y in zip(ia, ib):
        for k in ("fit", "rmse_train", "rmse_test"):
            if (x[k] is None) != (y[k] is None):
                print(f"iteration {x['iter']}: {k} {x[k]} against {y[k]}")
                return False
            if x[k] is not None:
                worst = max(worst, abs(x[k] - y[k]) / max(abs(x[k]), 1e-300))
    for k in ("n_train", "n_test", "unobserved_rows"):
        if a["completion"][k] != b["completion"][k]:
            print(f"{k}: {a['completion'][k]} against {b['completion'][k]}")
            return False
    print(f"{len(ia)} iterations within {worst:.1e}; {a['completion']['n_test']} test entries "
          "in both")
    return worst <= tol


def parse_test(args):
    if not args or args[0] == "none":
        return ("none",)
    return tuple(args)


def main(argv):
    cmd = argv[1]
    if cmd == "planted":
        planted(argv[2], argv[3], argv[4], int(argv[5]), float(argv[6]), float(argv[7]))
        return 0
    if cmd == "random":
        random_tensor(argv[2], argv[3], int(argv[4]), int(argv[5]))
        return 0
    if cmd == "split":
        subs, vals, _ = read_tns(argv[2])
        held = holdout_draw(subs, int(argv[4])) < float(argv[3])
        write_tns(argv[5], subs[~held], vals[~held])
        write_tns(argv[6], subs[held], vals[held])
        return 0
    if cmd == "init":
        init(argv[2], int(argv[3]), int(argv[4]), argv[5])
        return 0
    if cmd == "reference":
        return 0 if reference(argv[2], argv[3], argv[4], argv[5], float(argv[6]),
                              parse_test(argv[7:])) else 1
    if cmd == "recompute":
        return 0 if recompute(argv[2], argv[3], argv[4], parse_test(argv[5:])) else 1
    if cmd == "rmse":
        got = json.load(open(argv[2]))["iterations"][-1]["rmse_test"]
        print(f"test RMSE {got:.4e} (bound {float(argv[3]):.4e})")
        return 0 if got is not None and got <= float(argv[3]) else 1
    if cmd == "same":
        return 0 if same(argv[2], argv[3], float(argv[4])) else 1
    print(f"unknown command {cmd}", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
