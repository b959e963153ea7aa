#!/usr/bin/env python3
"""CP-APR per outer iteration: amped-run's CPU backend against pyttb's
cp_apr (algorithm "mu") on the same tensor, rank and start (bench-apr.sh).

    apr-pyttb.py AMPED_RUN TNS AMP RANK ITERS THREADS WORKDIR

Both start from the same random factors (written as npy for amped-run
--init), run ITERS outer iterations with tol 0 and pyttb's shift rule
(--kappa-rule pyttb), so both compute the same iterates; prints the median
seconds per outer iteration of each, the ratio, and both final
log-likelihoods (their relative difference). Beside the wall clock, CPU
seconds an outer iteration (all threads'), which a shared machine's load
disturbs far less: amped's from the runs of ITERS and of 1 outer iteration
(their difference over ITERS - 1, so without the load and the start),
pyttb's likewise from its process time."""
import json
import resource
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
    def amped(k):
        c0 = resource.getrusage(resource.RUSAGE_CHILDREN)
        subprocess.run([run, amp, "-q", "--gpus", "0", "-t", T, "--method", "cp-apr", "-r",
                        str(R), "--iters", str(k), "--tol", "0", "--kappa-rule", "pyttb",
                        "--init", f"{work}/apr-init", "--json", f"{work}/apr.json"], check=True)
        c1 = resource.getrusage(resource.RUSAGE_CHILDREN)
        return c1.ru_utime + c1.ru_stime - c0.ru_utime - c0.ru_stime

    def pyttb(k):
        c0 = time.process_time()
        _, _, res = ttb.cp_apr(X, R, init=ttb.ktensor([a.copy() for a in A]), maxiters=k,
                               stoptol=0, printitn=0)
        return time.process_time() - c0, res

    ours_cpu = (amped(K) - amped(1)) / (K - 1)
    amped(K)
    j = json.load(open(f"{work}/apr.json"))
    ours = [it["seconds"] for it in j["iterations"]]
    c1, _ = pyttb(1)
    t0 = time.time()
    cK, out = pyttb(K)
    wall = time.time() - t0
    theirs_cpu = (cK - c1) / (K - 1)
    times = list(out["times"])
    theirs = [times[0]] + [b - a for a, b in zip(times, times[1:])]
    mo, mt = statistics.median(ours), statistics.median(theirs)
    rel = abs(j["final_loglik"] - out["obj"]) / abs(out["obj"])
    print(f"| {tns.split('/')[-1]} | {R} | {K} | {mt:.3f} | {mo:.4f} | {mt / mo:.0f}x | "
          f"{theirs_cpu:.3f} | {ours_cpu:.4f} | {theirs_cpu / ours_cpu:.0f}x | "
          f"{out['obj']:.10e} | {j['final_loglik']:.10e} | {rel:.1e} |")
    print(f"pyttb wall {wall:.1f} s for {K} outer iterations", file=sys.stderr)


if __name__ == "__main__":
    main(sys.argv)
