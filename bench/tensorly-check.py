#!/usr/bin/env python3
"""amped-run's CP-ALS against TensorLy's, from the same starting factors
(with --constrained, its non-negative MU, HALS and AO-ADMM against
TensorLy's).

The project's tests compare amped with its own textbook CP-ALS
(tests/cp_ref.h); that reference was written by the same hands, so a shared
misreading of the algorithm would pass.  This script checks once against an
independent implementation, TensorLy's parafac, on tensors small enough to
hold dense.

For each case it writes the tensor as FROSTT text, converts it with
amped-prep, draws starting factors with numpy, runs amped-run (CPU backend)
and TensorLy from those factors for the same number of iterations with no
stopping rule, and compares

  * the fit after every iteration, fit = 1 - ||X - model|| / ||X||:
    amped's JSON report against TensorLy's reported error and against the
    error of TensorLy's model computed here densely;
  * the model tensor after the last iteration (lambda included), normwise.

CP-ALS iterates do not depend on how each column's scale is split between
the factors and lambda (amped divides by the 2-norm on the first iteration
and the max-norm after; TensorLy, with normalize_factors=False, does not
normalize), so the models and fits agree up to rounding.

With --constrained it checks the non-negative methods instead (issue 25):
amped-run --method mu, hals and ao-admm (--constraint nonneg) against
TensorLy's non_negative_parafac (multiplicative updates),
non_negative_parafac_hals and constrained_parafac(non_negative=True)
(AO-ADMM), on aminoacid at ranks 3 and 5 and on a seeded random
non-negative rank-4 tensor with small non-negative noise, from the same
non-negative starting factors.  The algorithms differ in details (TensorLy's
HALS makes up to 5 sweeps per mode update where amped's makes one; its MU
clips numerator and denominator at machine epsilon where amped floors the
entries at 1e-12; its AO-ADMM runs up to 10 inner iterations, stops them at
a relative tolerance of 1e-6 and never normalizes, amped's runs 5 and moves
the scale through lambda), so the iterates agree only for MU and, with
--tensorly-hals-sweeps 1, for HALS.  Each runs until the fit changes by less
than --tol between iterations, or --iters of them; TensorLy's AO-ADMM runs
--iters (its tol_outer also stops it on a small constraint residual, long
before the fit settles, so it is given 0).  The script compares

  * the final fits, 1 - ||X - model|| / ||X||, both computed here densely
    from the factors each program returned (amped's also from its JSON
    final_fit); amped passes when its fit >= TensorLy's - --fit-margin;
  * the KKT residual of each mode's non-negative least-squares problem at
    the end, computed here from the dense tensor, for both programs'
    factors: with the other factors' columns scaled to unit 2-norm and the
    scale (and lambda) moved into mode d's factor B, M = X_(d) KR(others),
    V = the Hadamard product of the others' Gram matrices, G = B V - M and
    residual = max |min(B, G)| / max |M| (0 exactly at a KKT point: B >= 0,
    G >= 0, B .* G = 0), the largest over the modes.  amped's must be at
    most --kkt-tol for hals and ao-admm; MU's is reported only (it
    converges too slowly to reach a tight tolerance in --iters).

Needs python3 with numpy and tensorly.  Not part of `make check`: CI has
no TensorLy.  Exit status 0 only when every case is within the tolerances.
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile

try:
    import numpy as np
    import tensorly as tl
    from tensorly.cp_tensor import CPTensor
    from tensorly.decomposition import (parafac, non_negative_parafac,
                                        non_negative_parafac_hals, constrained_parafac)
    from tensorly.decomposition import _nn_cp
except ImportError as e:
    sys.exit("tensorly-check.py: needs numpy and tensorly (%s); "
             "e.g. python3 -m pip install numpy tensorly" % e)


def read_tns(path):
    """A FROSTT text file as a dense array, its size the largest index of
    each mode.  Repeated coordinates are summed, which is what amped-prep's
    default does with them."""
    data = np.loadtxt(path, comments="#", ndmin=2)
    idx = data[:, :-1].astype(np.int64) - 1
    dense = np.zeros(tuple(idx.max(axis=0) + 1))
    np.add.at(dense, tuple(idx.T), data[:, -1])
    return dense


def write_tns(path, dense):
    """Every entry, 1-based, with 17 significant digits so amped-prep reads
    back exactly the doubles that TensorLy sees."""
    with open(path, "w") as f:
        for pos in np.ndindex(*dense.shape):
            coords = " ".join(str(i + 1) for i in pos)
            f.write("%s %.17g\n" % (coords, dense[pos]))


def write_factors(prefix, factors):
    """PREFIX.mode1.mat ...: one row per index of the mode, R values
    separated by spaces, the layout amped-run's --init reads (and -o
    writes).  No PREFIX.lambda.mat, so amped starts with lambda = 1, as
    TensorLy does with all-ones weights."""
    for m, a in enumerate(factors):
        with open("%s.mode%d.mat" % (prefix, m + 1), "w") as f:
            for row in a:
                f.write(" ".join("%.17g" % v for v in row) + "\n")


def read_model(prefix, nmodes):
    """The factors and lambda that amped-run -o wrote."""
    factors = [np.loadtxt("%s.mode%d.mat" % (prefix, m + 1), ndmin=2)
               for m in range(nmodes)]
    lam = np.atleast_1d(np.loadtxt(prefix + ".lambda.mat"))
    return lam, factors


def run_amped(args, work, name, dense, rank, init, iters=None, tol=0, extra=(), tag="",
              whole_report=False):
    """amped-prep then amped-run; returns the per-iteration fits (or, with
    whole_report, the JSON report) and the final (lambda, factors).  iters
    (default --iters) and tol are passed on, extra are more options, tag
    goes into the file names."""
    tns = os.path.join(work, name + ".tns")
    amp = os.path.join(work, name + ".amp")
    if not os.path.exists(amp):
        write_tns(tns, dense)
        subprocess.run([args.prep, "-q", "-o", amp, tns], check=True)
    stem = os.path.join(work, "%s-r%d%s" % (name, rank, tag))
    write_factors(stem + ".init", init)
    report = stem + ".json"
    subprocess.run([args.run, amp, "--gpus", "0", "--rank", str(rank),
                    "--iters", str(args.iters if iters is None else iters),
                    "--tol", repr(tol) if tol else "0",
                    "--init", stem + ".init", "-o", stem + ".out",
                    "--json", report] + list(extra),
                   check=True, stdout=subprocess.DEVNULL)
    with open(report) as f:
        rep = json.load(f)
    fits = [it["fit"] for it in rep["iterations"]]
    if [it["iter"] for it in rep["iterations"]] != list(range(1, len(fits) + 1)):
        raise SystemExit("%s: amped's iterations are not numbered 1, 2, ..." % report)
    if whole_report:
        return rep, read_model(stem + ".out", dense.ndim)
    return np.array(fits), read_model(stem + ".out", dense.ndim)


def run_tensorly(dense, rank, init, iters):
    """TensorLy's CP-ALS from the same factors; returns its per-iteration
    fits (1 - its reported error), the fits of its iterates computed here
    from the dense model, and the final (weights, factors).

    parafac appends to its error list after each iteration's updates of
    every mode (from the last mode's MTTKRP, as amped's fit is), so its
    k-th error belongs with amped's iteration k.  The callback is also
    called once before the first iteration, with the starting model; that
    call is dropped so the callback's list lines up the same way."""
    norm_x = np.linalg.norm(dense)
    direct = []

    def record(cp, _err):
        # cp shares its factor list with parafac, which replaces entries in
        # place later; the dense model is computed now, so no copy needed.
        direct.append(1.0 - np.linalg.norm(dense - tl.cp_to_tensor(cp)) / norm_x)

    start = CPTensor((np.ones(rank), [a.copy() for a in init]))
    cp, errors = parafac(dense, rank=rank, n_iter_max=iters, init=start,
                         tol=0, return_errors=True, normalize_factors=False,
                         linesearch=False, orthogonalise=False, l2_reg=0,
                         callback=record)
    if len(direct) != iters + 1 or len(errors) != iters:
        raise SystemExit("TensorLy ran %d iterations, %d asked" % (len(errors), iters))
    return 1.0 - np.array(errors), np.array(direct[1:]), cp


def cases(args):
    """(name, dense tensor, ranks).  The random tensors have every entry
    nonzero (uniform in (0, 1]), so no slice is empty: amped drops empty
    slices and ignores their starting rows, which TensorLy would not."""
    rng = np.random.default_rng(args.seed)
    yield "aminoacid", read_tns(os.path.join(args.data, "aminoacid.tns")), (3, 5, 8)
    yield "dense3-40x30x20", 1.0 - rng.random((40, 30, 20)), (4,)
    yield "dense4-12x10x9x8", 1.0 - rng.random((12, 10, 9, 8)), (4,)


# ---- the constrained methods (--constrained) --------------------------------

# amped-run's method and its options (run_tensorly_nn has TensorLy's side).
METHODS = (
    ("mu", ["--method", "mu"]),
    ("hals", ["--method", "hals", "--constraint", "nonneg"]),
    ("ao-admm", ["--method", "ao-admm", "--constraint", "nonneg"]),
)


def run_tensorly_nn(method, dense, rank, init, iters, tol, hals_sweeps=None):
    """TensorLy's counterpart of amped's method from the same factors (all-ones
    weights), every option at its default but the ones named here.  MU and
    HALS stop when the relative error changes by less than tol between
    iterations, as amped stops on the fit; AO-ADMM runs iters iterations.
    Returns (its errors, one per iteration; the CPTensor)."""
    start = CPTensor((np.ones(rank), [a.copy() for a in init]))
    if method == "mu":
        cp, errors = non_negative_parafac(dense, rank=rank, n_iter_max=iters, init=start,
                                          tol=tol, return_errors=True,
                                          normalize_factors=False)
    elif method == "hals":
        # non_negative_parafac_hals calls hals_nnls(..., n_iter_max=5) by the
        # name it imported; hals_sweeps swaps in a wrapper with that many
        # sweeps for the call (a diagnostic: 1 is amped's HALS).
        saved = _nn_cp.hals_nnls
        if hals_sweeps is not None:
            _nn_cp.hals_nnls = lambda *a, **k: saved(*a, **dict(k, n_iter_max=hals_sweeps))
        try:
            cp, errors = non_negative_parafac_hals(dense, rank=rank, n_iter_max=iters,
                                                   init=start, tol=tol, return_errors=True,
                                                   normalize_factors=False)
        finally:
            _nn_cp.hals_nnls = saved
    else:
        # tol_outer=0 runs n_iter_max iterations: with tol_outer > 0 it also
        # stops once the sum over the modes of |A - A~| / |A| is below
        # tol_outer, which comes long before the fit settles (with 1e-9: after
        # 39 and 82 iterations, the error still falling by 2e-8 and 2.4e-5
        # per iteration, at seed 2026).
        cp, errors = constrained_parafac(dense, rank=rank, n_iter_max=iters, init=start,
                                         tol_outer=0, non_negative=True,
                                         return_errors=True)
    return np.array([float(e) for e in errors]), cp


def dense_fit(dense, weights, factors):
    return 1.0 - (np.linalg.norm(dense - tl.cp_to_tensor((weights, factors)))
                  / np.linalg.norm(dense))


def nnls_kkt(dense, weights, factors):
    """The KKT residual of the non-negative least-squares problem of each
    mode's factor, the others fixed, the largest over the modes (see the
    header): the others' columns at unit 2-norm, their scale and the weights
    in mode d's factor B; G = B V - M; max |min(B, G)| / max |M|."""
    n = len(factors)
    norms = [np.linalg.norm(a, axis=0) for a in factors]
    unit = [a / np.where(c > 0, c, 1) for a, c in zip(factors, norms)]
    worst = 0.0
    for d in range(n):
        scale = np.array(weights, dtype=float).copy()
        for m in range(n):
            if m != d:
                scale = scale * norms[m]
        b = factors[d] * scale
        # X_(d) with the other modes in order, the last varying fastest, and
        # their Khatri-Rao product in the same row order: plain numpy, not
        # TensorLy's unfolding.
        unfolded = np.moveaxis(dense, d, 0).reshape(dense.shape[d], -1)
        kr = np.ones((1, b.shape[1]))
        v = np.ones((b.shape[1], b.shape[1]))
        for m in range(n):
            if m != d:
                kr = (kr[:, None, :] * unit[m][None, :, :]).reshape(-1, b.shape[1])
                v = v * (unit[m].T @ unit[m])
        mt = unfolded @ kr
        g = b @ v - mt
        worst = max(worst, np.max(np.abs(np.minimum(b, g))) / np.max(np.abs(mt)))
    return worst


def constrained_cases(args):
    """(name, dense tensor, ranks): aminoacid, and a non-negative rank-4 tensor
    (factors uniform [0, 1)) plus non-negative noise uniform in [0, 1% of the
    mean entry), every entry positive so no slice is empty."""
    rng = np.random.default_rng(args.seed)
    yield "aminoacid", read_tns(os.path.join(args.data, "aminoacid.tns")), (3, 5)
    shape = (30, 25, 20)
    low = tl.cp_to_tensor((None, [rng.random((k, 4)) for k in shape]))
    yield "nn4-30x25x20", low + 0.01 * low.mean() * rng.random(shape), (4,)


def main_constrained(args, work):
    iters = 20000 if args.iters is None else args.iters
    print("numpy %s, tensorly %s, at most %d iterations, stop when the fit changes by "
          "less than %g, seed %d%s"
          % (np.__version__, tl.__version__, iters, args.tol, args.seed,
             "" if args.tensorly_hals_sweeps is None
             else ", TensorLy's HALS %d sweep(s)" % args.tensorly_hals_sweeps))
    # Columns: iterations each ran (marked * where it stopped at the limit
    # rather than at --tol); amped's JSON final fit; the dense fits of both
    # final models; amped's dense fit - TensorLy's; the largest KKT residual
    # over the modes of each; the largest |difference| of the fits after
    # the same iteration, over the iterations both ran (amped's JSON against
    # 1 - TensorLy's reported error: small only where the two run the same
    # iterates, MU and, with --tensorly-hals-sweeps 1, HALS).
    print("| case | rank | method | iters amped | iters TensorLy | fit amped (JSON) "
          "| fit amped | fit TensorLy | amped - TensorLy | KKT amped | KKT TensorLy "
          "| per iteration |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    failed = 0
    init_rng = np.random.default_rng(args.seed + 1)
    for name, dense, ranks in constrained_cases(args):
        for rank in ranks:
            # Non-negative, uniform [0, 1), every mode: these methods improve
            # the factors they start from, mode 1's included.
            init = [init_rng.random((k, rank)) for k in dense.shape]
            for method, opts in METHODS:
                rep, (lam, a_factors) = run_amped(args, work, name, dense, rank, init,
                                                  iters=iters, tol=args.tol, extra=opts,
                                                  tag="-" + method, whole_report=True)
                t_err, t_cp = run_tensorly_nn(method, dense, rank, init, iters, args.tol,
                                              args.tensorly_hals_sweeps)
                a_fits = np.array([it["fit"] for it in rep["iterations"]])
                common = min(len(a_fits), len(t_err))
                per_iter = np.max(np.abs(a_fits[:common] - (1 - t_err[:common])))
                a_iters = len(rep["iterations"])
                a_fit = dense_fit(dense, lam, a_factors)
                t_fit = dense_fit(dense, t_cp.weights, t_cp.factors)
                a_kkt = nnls_kkt(dense, lam, a_factors)
                t_kkt = nnls_kkt(dense, t_cp.weights, t_cp.factors)
                negative = min(np.min(a) for a in a_factors) < 0
                bad = a_fit < t_fit - args.fit_margin or negative \
                    or (method != "mu" and a_kkt > args.kkt_tol)
                failed += bad
                print("| %s | %d | %s | %d%s | %d%s | %.9f | %.9f | %.9f | %+.1e | %.1e | %.1e "
                      "| %.1e |%s%s"
                      % (name, rank, method, a_iters, "" if rep["converged"] else "*",
                         len(t_err), "*" if len(t_err) == iters else "", rep["final_fit"],
                         a_fit, t_fit, a_fit - t_fit, a_kkt, t_kkt, per_iter,
                         " negative entries" if negative else "", " FAIL" if bad else ""))
                sys.stdout.flush()
    print("%s (amped's fit at least TensorLy's - %g; amped's KKT residual at most %g for "
          "hals and ao-admm, mu's reported only)"
          % ("FAIL: %d case(s) out of tolerance" % failed if failed else "all within tolerance",
             args.fit_margin, args.kkt_tol))
    return failed


def main():
    ap = argparse.ArgumentParser(
        description="Compare amped-run's CP-ALS with TensorLy's parafac from the "
        "same start, per-iteration fits and final model; with --constrained, "
        "amped's mu, hals and ao-admm (non-negative) with TensorLy's "
        "non_negative_parafac, non_negative_parafac_hals and constrained_parafac, "
        "fits and NNLS KKT residuals at convergence.")
    ap.add_argument("--prep", default="./amped-prep", help="amped-prep to run (default %(default)s)")
    ap.add_argument("--run", default="./amped-run", help="amped-run to run (default %(default)s)")
    ap.add_argument("--data", default=os.environ.get("AMP_TEST_DATA", "../../shared/data"),
                    help="folder holding aminoacid.tns (default $AMP_TEST_DATA, else %(default)s)")
    ap.add_argument("--constrained", action="store_true",
                    help="check the non-negative methods instead of CP-ALS")
    ap.add_argument("--iters", type=int,
                    help="iterations (default 10); with --constrained, the most (default 20000)")
    ap.add_argument("--seed", type=int, default=2026, help="numpy seed of the random tensors and the starting factors "
                    "(default %(default)s)")
    ap.add_argument("--fit-tol", type=float, default=1e-10,
                    help="CP-ALS: largest |fit difference| allowed (default %(default)g)")
    ap.add_argument("--model-tol", type=float, default=1e-8,
                    help="CP-ALS: largest ||model_amped - model_tensorly|| / ||model_tensorly|| "
                    "allowed (default %(default)g)")
    ap.add_argument("--tol", type=float, default=1e-9,
                    help="--constrained: each stops when the fit changes by less between "
                    "iterations, but TensorLy's AO-ADMM, which runs --iters "
                    "(default %(default)g)")
    ap.add_argument("--fit-margin", type=float, default=1e-3,
                    help="--constrained: amped's fit may be at most this below "
                    "TensorLy's (default %(default)g)")
    ap.add_argument("--kkt-tol", type=float, default=1e-4,
                    help="--constrained: largest KKT residual allowed to amped's hals "
                    "and ao-admm (default %(default)g)")
    ap.add_argument("--tensorly-hals-sweeps", type=int, metavar="N",
                    help="--constrained: TensorLy's HALS makes N inner sweeps per mode "
                    "update (default: its own, 5; 1 is amped's HALS)")
    ap.add_argument("--keep", metavar="DIR", help="work in DIR and keep the files")
    args = ap.parse_args()

    tl.set_backend("numpy")
    work = args.keep or tempfile.mkdtemp(prefix="tensorly-check.")
    os.makedirs(work, exist_ok=True)
    if args.constrained:
        failed = main_constrained(args, work)
        if not args.keep:
            shutil.rmtree(work)
        return 1 if failed else 0
    if args.iters is None:
        args.iters = 10
    print("numpy %s, tensorly %s, %d iterations, seed %d"
          % (np.__version__, tl.__version__, args.iters, args.seed))
    # Columns: amped's fits against TensorLy's reported ones and against the
    # dense errors of TensorLy's iterates; TensorLy's reported against dense
    # (the precision of its ||X||^2 + ||M||^2 - 2<X, M> formula); amped's
    # against TensorLy's one iteration earlier, to show the alignment is
    # not a matter of tolerance; the final models.
    print("| case | rank | iters | fit, iter 1 | fit, last | amped - TensorLy "
          "| amped - dense | TensorLy - dense | shifted by one | model |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    failed = 0
    init_rng = np.random.default_rng(args.seed + 1)
    for name, dense, ranks in cases(args):
        for rank in ranks:
            # Uniform [0, 1) in every row of every mode, mode 1 included
            # (neither implementation reads it: the first solve is for it).
            init = [init_rng.random((n, rank)) for n in dense.shape]
            a_fits, (lam, a_factors) = run_amped(args, work, name, dense, rank, init)
            t_fits, d_fits, t_cp = run_tensorly(dense, rank, init, args.iters)
            if len(a_fits) != args.iters:
                raise SystemExit("%s rank %d: amped ran %d iterations" % (name, rank, len(a_fits)))
            fit_diff = np.max(np.abs(a_fits - t_fits))
            direct_diff = np.max(np.abs(a_fits - d_fits))
            own_diff = np.max(np.abs(t_fits - d_fits))
            shifted = np.max(np.abs(a_fits[1:] - t_fits[:-1]))
            t_model = tl.cp_to_tensor(t_cp)
            model_diff = (np.linalg.norm(tl.cp_to_tensor((lam, a_factors)) - t_model)
                          / np.linalg.norm(t_model))
            bad = fit_diff > args.fit_tol or direct_diff > args.fit_tol \
                or model_diff > args.model_tol
            failed += bad
            print("| %s | %d | %d | %.6f | %.12f | %.1e | %.1e | %.1e | %.1e | %.1e |%s"
                  % (name, rank, args.iters, a_fits[0], a_fits[-1], fit_diff,
                     direct_diff, own_diff, shifted, model_diff,
                     " FAIL" if bad else ""))
            sys.stdout.flush()
    print("%s (fits within %g, models within %g relative)"
          % ("FAIL: %d case(s) out of tolerance" % failed if failed else "all within tolerance",
             args.fit_tol, args.model_tol))
    if not args.keep:
        shutil.rmtree(work)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
