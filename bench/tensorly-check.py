#!/usr/bin/env python3
"""amped-run's CP-ALS against TensorLy's, from the same starting factors.

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
    from tensorly.decomposition import parafac
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


def run_amped(args, work, name, dense, rank, init):
    """amped-prep then amped-run; returns the per-iteration fits and the
    final (lambda, factors)."""
    tns = os.path.join(work, name + ".tns")
    amp = os.path.join(work, name + ".amp")
    if not os.path.exists(amp):
        write_tns(tns, dense)
        subprocess.run([args.prep, "-q", "-o", amp, tns], check=True)
    stem = os.path.join(work, "%s-r%d" % (name, rank))
    write_factors(stem + ".init", init)
    report = stem + ".json"
    subprocess.run([args.run, amp, "--gpus", "0", "--rank", str(rank),
                    "--iters", str(args.iters), "--tol", "0",
                    "--init", stem + ".init", "-o", stem + ".out",
                    "--json", report],
                   check=True, stdout=subprocess.DEVNULL)
    with open(report) as f:
        rep = json.load(f)
    fits = [it["fit"] for it in rep["iterations"]]
    if [it["iter"] for it in rep["iterations"]] != list(range(1, len(fits) + 1)):
        raise SystemExit("%s: amped's iterations are not numbered 1, 2, ..." % report)
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


def main():
    ap = argparse.ArgumentParser(
        description="Compare amped-run's CP-ALS with TensorLy's parafac from the "
        "same start, per-iteration fits and final model.")
    ap.add_argument("--prep", default="./amped-prep", help="amped-prep to run (default %(default)s)")
    ap.add_argument("--run", default="./amped-run", help="amped-run to run (default %(default)s)")
    ap.add_argument("--data", default=os.environ.get("AMP_TEST_DATA", "../../shared/data"),
                    help="folder holding aminoacid.tns (default $AMP_TEST_DATA, else %(default)s)")
    ap.add_argument("--iters", type=int, default=10, help="iterations (default %(default)s)")
    ap.add_argument("--seed", type=int, default=2026, help="numpy seed (default %(default)s)")
    ap.add_argument("--fit-tol", type=float, default=1e-10,
                    help="largest |fit difference| allowed (default %(default)g)")
    ap.add_argument("--model-tol", type=float, default=1e-8,
                    help="largest ||model_amped - model_tensorly|| / ||model_tensorly|| "
                    "allowed (default %(default)g)")
    ap.add_argument("--keep", metavar="DIR", help="work in DIR and keep the files")
    args = ap.parse_args()

    tl.set_backend("numpy")
    work = args.keep or tempfile.mkdtemp(prefix="tensorly-check.")
    os.makedirs(work, exist_ok=True)
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
