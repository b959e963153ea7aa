#!/usr/bin/env python3
"""CP-APR per outer iteration: amped-run's CPU backend against pyttb's
cp_apr (algorithm "mu") on the same tensor, rank and start (bench-apr.sh).

    apr-pyttb.py AMPED_RUN TNS AMP RANK ITERS THREADS WORKDIR

Both start from the same random factors (written as npy for amped-run
--init), run ITERS outer iterations with tol 0 and pyttb's shift rule
(--kappa-rule pyttb), so both compute the same iterates; prints the median
seconds per outer iteration of each, the ratio, and both final
log-likelihoods (their relative difference)."""
import json
import statistics
import subprocess
import sys
import time

import numpy as np
import pyttb as ttb


def main(argv):
    run, tns, amp, R, K, T, work = argv[1], argv[2], argv[3], int(argv[4]), int(argv[5]), argv[6], argv[7]
    d = np.loadtxt(tns, ndmin=2)
    subs = d[:, :-1].astype(np.int64) - 1
    shape = tuple(int(n) for n in subs.max(axis=0) + 1)
    X = ttb.sptensor(subs, d[:, -1:], shape)
    rng = np.random.default_rng(1)
    A = [rng.uniform(0.1, 1.0, (n, R)) for n in shape]
    for m, a in enumerate(A):
        np.save(f"{work}/apr-init.mode{m + 1}.npy", a)
    subprocess.run([run, amp, "-q", "--gpus", "0", "-t", T, "--method", "cp-apr", "-r", str(R),
                    "--iters", str(K), "--tol", "0", "--kappa-rule", "pyttb", "--init",
                    f"{work}/apr-init", "--json", f"{work}/apr.json"], check=True)
    j = json.load(open(f"{work}/apr.json"))
    ours = [it["seconds"] for it in j["iterations"]]
    t0 = time.time()
    _, _, out = ttb.cp_apr(X, R, init=ttb.ktensor([a.copy() for a in A]), maxiters=K,
                           stoptol=0, printitn=0)
    wall = time.time() - t0
    times = list(out["times"])
    theirs = [times[0]] + [b - a for a, b in zip(times, times[1:])]
    mo, mt = statistics.median(ours), statistics.median(theirs)
    rel = abs(j["final_loglik"] - out["obj"]) / abs(out["obj"])
    print(f"| {tns.split('/')[-1]} | {R} | {K} | {mt:.3f} | {mo:.4f} | {mt / mo:.0f}x | "
          f"{out['obj']:.10e} | {j['final_loglik']:.10e} | {rel:.1e} |")
    print(f"pyttb wall {wall:.1f} s for {K} outer iterations", file=sys.stderr)


if __name__ == "__main__":
    main(sys.argv)
