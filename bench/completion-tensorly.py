#!/usr/bin/env python3
"""CP completion on the CPU against TensorLy's masked parafac (issue 43).

    completion-tensorly.py AMPED_RUN TNS AMP RANK ITERS THREADS OUTDIR

TensorLy's parafac(mask=...) on TNS held densely (the stored entries the
mask's ones), ITERS iterations from a random start, tol 0, in a fresh
process of its own so that its peak memory (ru_maxrss) is its own; then
amped-run --observed nonzeros on AMP (the same tensor prepared), ITERS
iterations, on THREADS threads, its peak memory by /usr/bin/time. Prints one
table row: seconds per iteration of each (TensorLy's total over ITERS;
amped's mean of its iterations after the first), their ratio, each peak
RSS, and each final training RMSE (the two fit the stored entries by
different algorithms: TensorLy imputes the absent cells with the model
every iteration (EM) and solves one dense least squares per mode; amped
solves each row's normal equations over its own entries), so the RMSEs
are context, not a check."""
import json
import os
import resource
import subprocess
import sys
import time


def tensorly_child(tns, rank, iters, threads, out):
    os.environ["OMP_NUM_THREADS"] = str(threads)
    os.environ["OPENBLAS_NUM_THREADS"] = str(threads)
    import numpy as np
    import tensorly as tl
    from tensorly.decomposition import parafac
    d = np.loadtxt(tns, ndmin=2)
    subs = d[:, :-1].astype(np.int64) - 1
    vals = d[:, -1]
    shape = tuple(int(n) for n in subs.max(axis=0) + 1)
    X = np.zeros(shape)
    M = np.zeros(shape)
    X[tuple(subs.T)] = vals
    M[tuple(subs.T)] = 1.0
    t0 = time.perf_counter()
    cp = parafac(tl.tensor(X), rank, n_iter_max=iters, init="random", tol=0,
                 random_state=1, mask=tl.tensor(M))
    took = time.perf_counter() - t0
    model = tl.cp_to_tensor(cp)
    rmse = float(np.sqrt(np.mean((vals - model[tuple(subs.T)]) ** 2)))
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    json.dump({"seconds": took, "iters": iters, "peak": peak, "rmse": rmse,
               "shape": shape, "nnz": len(vals)}, open(out, "w"))


def main(argv):
    if argv[1] == "--child":
        tensorly_child(argv[2], int(argv[3]), int(argv[4]), int(argv[5]), argv[6])
        return 0
    run, tns, amp, rank, iters, threads, outdir = argv[1:8]
    tl_out = os.path.join(outdir, "completion-tensorly.json")
    subprocess.run([sys.executable, argv[0], "--child", tns, rank, iters, threads, tl_out],
                   check=True)
    t = json.load(open(tl_out))
    js = os.path.join(outdir, "completion-amped.json")
    rss = os.path.join(outdir, "completion-amped.rss")
    subprocess.run(["/usr/bin/time", "-f", "%M", "-o", rss, run, "-q", "--gpus", "0", "-t",
                    threads, "--observed", "nonzeros", "-r", rank, "--iters", iters, "--tol", "0",
                    "--json", js, amp], check=True)
    peak_a = int(open(rss).read().split()[-1]) * 1024
    a = json.load(open(js))
    its = a["iterations"][1:] or a["iterations"]
    amp_it = sum(i["seconds"] for i in its) / len(its)
    tl_it = t["seconds"] / t["iters"]
    shape = "x".join(str(n) for n in t["shape"])
    print(f"| {os.path.basename(tns)} ({shape}, {t['nnz']} stored, "
          f"{t['nnz'] / eval('*'.join(str(n) for n in t['shape'])):.2%}) | {rank} | {iters} | "
          f"{tl_it * 1e3:.2f} | {amp_it * 1e3:.3f} | {tl_it / amp_it:.0f}x | "
          f"{t['peak'] / 2**20:.0f} | {peak_a / 2**20:.0f} | {t['rmse']:.4e} | "
          f"{a['completion']['rmse_train']:.4e} |")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
