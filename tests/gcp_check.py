#!/usr/bin/env python3
"""GCP's outputs read back independently (tests/run_gcp.sh).

    gcp_check.py planted LOSS OUT.tns TRUTH_PREFIX SEED
        a 3-mode tensor drawn from a planted model for LOSS (gaussian:
        the values of a sparse non-negative rank-3 model, with noise;
        poisson: counts drawn from it; bernoulli-logit: 0/1 drawn with
        probability sigmoid(m), m the sparse model's blocks plus a
        constant -4, a rank-4 model): FROSTT text, the truth as
        TRUTH_PREFIX.modeN.npy and TRUTH_PREFIX.lambda.npy
    gcp_check.py fms TRUTH_PREFIX PREFIX MIN
        the factor match score of the model in PREFIX (npy) against the
        truth, columns of both normalized here (best matching of
        components, the weights' penalty as the Tensor Toolbox's score):
        exit 1 below MIN
    gcp_check.py exact TNS PREFIX JSON LOSS [DELTA]
        the loss of the model in PREFIX over every cell of the nonempty
        slices, with pyttb's own handle for LOSS (pyttb.gcp.handles;
        NumPy's formulas where pyttb is absent), against the JSON's
        loss_exact of its last epoch that did not fail: exit 1 above 1e-9
        relative
    gcp_check.py stderr JSON K
        every epoch's estimate within K of its standard errors of the
        exact loss: exit 1 otherwise, or without exact losses
    gcp_check.py same JSON_A JSON_B TOL
        two runs' estimates after every epoch within TOL relative, the
        same failed epochs (the GPU's run against the CPU's)
    gcp_check.py adam DIR LOSS RATE dense|lazy
        the steps tests/gcp_trace wrote in DIR recomputed from its start
        and its samples alone: each step's gradient (the sampled MTTKRP,
        weight times f'(x, m)), then Adam (beta1 0.9, beta2 0.999, eps
        1e-8, bias correction with the step count) on every entry (dense)
        or, as PyTorch's SparseAdam, on the rows the step's samples touch
        (lazy: the others keep their entries and moments), projected onto
        the loss's bound; the factors and both moments against amped's
        within 1e-9 relative; and the other update's result more than
        1e-6 from amped's, so that the samples do tell them apart: exit 1
        otherwise
    gcp_check.py pyttb TNS JSON R LOSS EPOCH_ITERS EPOCHS SEED
        pyttb's gcp_opt with its Adam on the same tensor (the nonempty
        slices), the sample sizes the JSON reports, the same steps an
        epoch and epochs; its final loss over every cell against amped's
        (the JSON's last accepted loss_exact): exit 1 where amped's is
        more than 5% above pyttb's. pyttb's L-BFGS-B (deterministic, on
        the dense tensor) printed beside for the optimum's scale.

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
    return subs, d[:, -1]


def read_model(prefix, nmodes):
    A = [np.load(f"{prefix}.mode{m + 1}.npy") for m in range(nmodes)]
    lam = np.load(f"{prefix}.lambda.npy").reshape(-1)
    return lam, A


def nmodes_of(prefix):
    n = 1
    while True:
        try:
            np.load(f"{prefix}.mode{n + 1}.npy")
            n += 1
        except OSError:
            return n


def sparse_factors(rng, dims, R):
    A = []
    for n in dims:
        F = np.zeros((n, R))
        for r in range(R):
            idx = rng.choice(n, n // 3, replace=False)
            F[idx, r] = rng.uniform(1.0, 2.0, len(idx))
        A.append(F)
    return A


def write_truth(prefix, lam, A):
    for m, a in enumerate(A):
        np.save(f"{prefix}.mode{m + 1}.npy", a)
    np.save(f"{prefix}.lambda.npy", lam)


def planted(loss, out, truth, seed):
    rng = np.random.default_rng(seed)
    dims, R = ((80, 70, 60) if loss == "bernoulli-logit" else (40, 35, 30)), 3
    A = sparse_factors(rng, dims, R)
    M = np.einsum("ir,jr,kr->ijk", *A)
    if loss == "gaussian":
        X = np.where(M > 0, M + rng.normal(0, 0.05, M.shape), 0)
    elif loss == "poisson":
        A = [a * 0.7 for a in A]
        M = np.einsum("ir,jr,kr->ijk", *A)
        X = rng.poisson(M).astype(float)
    elif loss == "bernoulli-logit":
        c = -(4.0 ** (1 / 3))
        A = [np.hstack([a * 1.6, np.full((a.shape[0], 1), c)]) for a in A]
        M = np.einsum("ir,jr,kr->ijk", *A)
        X = (rng.uniform(size=M.shape) < 1 / (1 + np.exp(-M))).astype(float)
    else:
        raise SystemExit(f"no planted model for {loss}")
    subs = np.argwhere(X != 0)
    with open(out, "w") as f:
        for s in subs:
            f.write(" ".join(str(i + 1) for i in s) + f" {X[tuple(s)]:.17g}\n")
    write_truth(truth, np.ones(A[0].shape[1]), A)
    print(f"{len(subs)} nonzeros of {X.size} cells, rank {A[0].shape[1]}")


def normalized(lam, A):
    lam = lam.copy()
    B = []
    for a in A:
        n = np.linalg.norm(a, axis=0)
        n[n == 0] = 1
        B.append(a / n)
        lam = lam * n
    return np.abs(lam), B


def fms(truth, prefix, least):
    N = nmodes_of(truth)
    lt, At = normalized(*read_model(truth, N))
    le, Ae = normalized(*read_model(prefix, N))
    # Trailing slices with no nonzero are absent from the .tns: pad.
    for m in range(N):
        n = max(At[m].shape[0], Ae[m].shape[0])
        At[m] = np.vstack([At[m], np.zeros((n - At[m].shape[0], At[m].shape[1]))])
        Ae[m] = np.vstack([Ae[m], np.zeros((n - Ae[m].shape[0], Ae[m].shape[1]))])
    R, Re = len(lt), len(le)
    score = np.zeros((R, Re))
    for p in range(R):
        for q in range(Re):
            s = 1 - abs(lt[p] - le[q]) / max(lt[p], le[q])
            for a, b in zip(At, Ae):
                s *= abs(a[:, p] @ b[:, q])
            score[p, q] = s
    best = max(np.mean([score[p, perm[p]] for p in range(R)])
               for perm in itertools.permutations(range(Re), R))
    print(f"factor match score {best:.4f} (at least {least})")
    return best >= least


def handle(loss, delta):
    try:
        from pyttb.gcp import handles as h
        f = {"gaussian": h.gaussian, "poisson": h.poisson, "poisson-log": h.poisson_log,
             "bernoulli-logit": h.bernoulli_logit, "bernoulli-odds": h.bernoulli_odds,
             "gamma": h.gamma, "rayleigh": h.rayleigh}.get(loss)
        if loss == "huber":
            return lambda x, m: h.huber(x, m, delta)
        return f
    except ImportError:
        eps = 1e-10
        return {"gaussian": lambda x, m: (m - x) ** 2,
                "poisson": lambda x, m: m - x * np.log(m + eps),
                "poisson-log": lambda x, m: np.exp(m) - x * m,
                "bernoulli-logit": lambda x, m: np.log(np.exp(m) + 1) - x * m,
                "bernoulli-odds": lambda x, m: np.log(m + 1) - x * np.log(m + eps),
                "gamma": lambda x, m: x / (m + eps) + np.log(m + eps),
                "rayleigh": lambda x, m: 2 * np.log(m + eps)
                + (np.pi / 4) * (x / (m + eps)) ** 2,
                "huber": lambda x, m: np.where(np.abs(x - m) < delta, (x - m) ** 2,
                                               2 * delta * np.abs(x - m) - delta ** 2)}[loss]


def nonempty_dense(subs, vals):
    """The tensor over its nonempty slices (indices in ascending order)."""
    keep = [np.unique(subs[:, m]) for m in range(subs.shape[1])]
    X = np.zeros(tuple(len(k) for k in keep))
    idx = tuple(np.searchsorted(keep[m], subs[:, m]) for m in range(subs.shape[1]))
    np.add.at(X, idx, vals)
    return X, keep


def model_on(keep, lam, A):
    B = [a[k, :] for a, k in zip(A, keep)]
    B[0] = B[0] * lam
    letters = "abcdefgh"[:len(B)]
    return np.einsum(",".join(c + "r" for c in letters) + "->" + letters, *B)


def last_accepted(js):
    it = [i for i in js["iterations"] if not i["failed"]]
    return it[-1] if it else None


def exact(tns, prefix, js_path, loss, delta):
    subs, vals = read_tns(tns)
    X, keep = nonempty_dense(subs, vals)
    lam, A = read_model(prefix, subs.shape[1])
    f = handle(loss, delta)
    mine = float(np.sum(f(X, model_on(keep, lam, A))))
    js = json.load(open(js_path))
    it = last_accepted(js)
    if it is None or it["loss_exact"] is None:
        print("no epoch that did not fail, or no exact loss")
        return False
    rel = abs(mine - it["loss_exact"]) / abs(mine)
    print(f"the loss recomputed {mine:.12g}, the JSON's {it['loss_exact']:.12g} ({rel:.1e})")
    return rel <= 1e-9


def stderr(js_path, k):
    js = json.load(open(js_path))
    worst, n = 0.0, 0
    for it in js["iterations"]:
        if it["loss_exact"] is None:
            print(f"epoch {it['iter']}: no exact loss")
            return False
        z = abs(it["loss"] - it["loss_exact"]) / it["loss_stderr"]
        worst = max(worst, z)
        n += 1
    print(f"{n} epochs: the estimate at most {worst:.2f} standard errors from the exact loss "
          f"(at most {k})")
    return n > 0 and worst <= k


def pyttb_run(tns, js_path, R, loss, epoch_iters, epochs, seed):
    import logging
    import pyttb as ttb
    from pyttb.gcp.handles import Objectives
    from pyttb.gcp.optimizers import Adam, LBFGSB
    from pyttb.gcp.samplers import GCPSampler, StratifiedCount
    logging.disable(logging.CRITICAL)
    js = json.load(open(js_path))
    subs, vals = read_tns(tns)
    X, keep = nonempty_dense(subs, vals)
    obj = {"gaussian": Objectives.GAUSSIAN, "poisson": Objectives.POISSON,
           "bernoulli-logit": Objectives.BERNOULLI_LOGIT}[loss]
    S = ttb.sptensor.from_tensor_type(ttb.tensor(X)) if hasattr(ttb.sptensor, "from_tensor_type") \
        else ttb.tensor(X).to_sptensor()
    gn, gz = js["samples_grad"]
    fn, fz = js["samples_loss"]
    np.random.seed(seed)
    sampler = GCPSampler(S, function_samples=StratifiedCount(fz, fn),
                         gradient_samples=StratifiedCount(gz, gn))
    opt = Adam(epoch_iters=epoch_iters, max_iters=epochs, printitn=0)
    M, _, info = ttb.gcp_opt(S, R, obj, opt, sampler=sampler, printitn=0)
    f = handle(loss, 0.25)
    theirs = float(np.sum(f(X, M.full().data)))
    np.random.seed(seed)
    Ml, _, _ = ttb.gcp_opt(ttb.tensor(X), R, obj, LBFGSB(maxiter=500), printitn=0)
    lbfgs = float(np.sum(f(X, Ml.full().data)))
    it = last_accepted(js)
    ours = it["loss_exact"]
    print(f"amped {ours:.6g} after {js['iterations'][-1]['iter']} epochs; pyttb's Adam "
          f"{theirs:.6g} after {info['n_epoch'] + 1}; pyttb's L-BFGS-B {lbfgs:.6g}")
    return ours <= 1.05 * theirs


def dloss(loss, x, m):
    eps = 1e-10
    return {"gaussian": lambda: 2 * (m - x),
            "poisson": lambda: 1 - x / (m + eps),
            "bernoulli-logit": lambda: np.exp(m) / (1 + np.exp(m)) - x}[loss]()


def adam_steps(A, S, N, loss, rate, lazy):
    """SparseAdam (lazy) or Adam on A from the samples S (step, rows, x, w)."""
    A = [a.copy() for a in A]
    M = [np.zeros_like(a) for a in A]
    V = [np.zeros_like(a) for a in A]
    lower = 0.0 if loss == "poisson" else -np.inf
    step = S[:, 0].astype(np.int64)
    held = 0
    for t in range(1, step.max() + 1):
        s = S[step == t]
        rows = s[:, 1:1 + N].astype(np.int64)
        x, w = s[:, 1 + N], s[:, 2 + N]
        got = [A[n][rows[:, n]] for n in range(N)]
        m = np.prod(got, axis=0).sum(axis=1)
        y = w * dloss(loss, x, m)
        G = []
        for n in range(N):
            z = y[:, None] * np.prod([got[q] for q in range(N) if q != n], axis=0)
            g = np.zeros_like(A[n])
            np.add.at(g, rows[:, n], z)
            G.append(g)
        b1, b2 = 1 - 0.9 ** t, 1 - 0.999 ** t
        for n in range(N):
            if lazy:
                idx = np.unique(rows[:, n])
                held += int(np.count_nonzero(np.any(V[n] != 0, axis=1))) - int(
                    np.count_nonzero(np.any(V[n][idx] != 0, axis=1)))
            else:
                idx = np.arange(A[n].shape[0])
            M[n][idx] = 0.9 * M[n][idx] + 0.1 * G[n][idx]
            V[n][idx] = 0.999 * V[n][idx] + 0.001 * G[n][idx] ** 2
            a = A[n][idx] - rate * (M[n][idx] / b1) / (np.sqrt(V[n][idx] / b2) + 1e-8)
            A[n][idx] = np.maximum(a, lower)
    return A, M, V, held


def adam(d, loss, rate, kind):
    N = 0
    while True:
        try:
            open(f"{d}/start.mode{N + 1}.txt").close()
            N += 1
        except OSError:
            break
    load = lambda name: [np.loadtxt(f"{d}/{name}.mode{n + 1}.txt", ndmin=2) for n in range(N)]
    A0, S = load("start"), np.loadtxt(f"{d}/samples.txt", ndmin=2)
    theirs = load("end") + load("m") + load("v")

    def dist(mine):
        return max(np.max(np.abs(a - b)) / max(np.max(np.abs(b)), 1e-300)
                   for a, b in zip(mine, theirs))
    A, M, V, h1 = adam_steps(A0, S, N, loss, rate, kind == "lazy")
    Ao, Mo, Vo, h2 = adam_steps(A0, S, N, loss, rate, kind != "lazy")
    held = h1 + h2
    here, other = dist(A + M + V), dist(Ao + Mo + Vo)
    print(f"{int(S[:, 0].max())} steps, {kind}: factors and moments {here:.1e} from NumPy's "
          f"(at most 1e-9); the {'dense' if kind == 'lazy' else 'lazy'} update's {other:.1e} "
          f"(above 1e-6); {held} (step, row) pairs held by the lazy update")
    return here <= 1e-9 and other > 1e-6


def same(ja, jb, tol):
    a = json.load(open(ja))["iterations"]
    b = json.load(open(jb))["iterations"]
    if len(a) != len(b):
        print(f"{len(a)} epochs against {len(b)}")
        return False
    worst = max((abs(x["loss"] - y["loss"]) / abs(x["loss"]) for x, y in zip(a, b)), default=0)
    fails = all(x["failed"] == y["failed"] for x, y in zip(a, b))
    print(f"{len(a)} epochs: the estimates at most {worst:.1e} apart (at most {tol}), "
          f"the same failed epochs: {fails}")
    return worst <= tol and fails


def main(argv):
    cmd = argv[1]
    if cmd == "planted":
        planted(argv[2], argv[3], argv[4], int(argv[5]))
        return 0
    if cmd == "fms":
        return 0 if fms(argv[2], argv[3], float(argv[4])) else 1
    if cmd == "exact":
        return 0 if exact(argv[2], argv[3], argv[4], argv[5],
                          float(argv[6]) if len(argv) > 6 else 0.25) else 1
    if cmd == "stderr":
        return 0 if stderr(argv[2], float(argv[3])) else 1
    if cmd == "same":
        return 0 if same(argv[2], argv[3], float(argv[4])) else 1
    if cmd == "adam":
        return 0 if adam(argv[2], argv[3], float(argv[4]), argv[5]) else 1
    if cmd == "pyttb":
        return 0 if pyttb_run(argv[2], argv[3], int(argv[4]), argv[5], int(argv[6]),
                              int(argv[7]), int(argv[8])) else 1
    raise SystemExit(__doc__)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
