#!/usr/bin/env python3
"""GCP-Adam per epoch, pyttb's gcp_opt against amped-run (bench/bench-gcp.sh).

    gcp-pyttb.py AMPED_RUN TNS AMP LOSS RANK EPOCHS THREADS DIR

Both on the same tensor (pyttb's sptensor over the nonempty slices, the
cells amped models), the same loss, rank, sample sizes (amped's, from its
JSON: pyttb's defaults), 1000 Adam steps an epoch and EPOCHS epochs
(--max-fails high enough that both run every epoch); seconds per epoch
(pyttb: its time trace; amped: the JSON's per-epoch seconds), the first
epoch left out where there are several. Prints one Markdown row."""
import json
import logging
import statistics
import subprocess
import sys
import time

import numpy as np

run, tns, amp, loss, R, E, threads, d = sys.argv[1:9]
R, E = int(R), int(E)
js = f"{d}/gcp-amped.json"
t0 = time.perf_counter()
subprocess.run([run, "-q", "--gpus", "0", "-t", threads, "--method", "gcp", "--loss", loss,
                "-r", str(R), "--iters", str(E), "--max-fails", str(E), "--json", js, amp],
               check=True)
amped_wall = time.perf_counter() - t0
j = json.load(open(js))
a_ep = [i["seconds"] for i in j["iterations"]]

import pyttb as ttb
from pyttb.gcp.handles import Objectives
from pyttb.gcp.optimizers import Adam
from pyttb.gcp.samplers import GCPSampler, StratifiedCount
logging.disable(logging.CRITICAL)
d_ = np.loadtxt(tns, ndmin=2)
subs = d_[:, :-1].astype(np.int64) - 1
vals = d_[:, -1:]
keep = [np.unique(subs[:, m]) for m in range(subs.shape[1])]
subs = np.stack([np.searchsorted(keep[m], subs[:, m]) for m in range(subs.shape[1])], axis=1)
X = ttb.sptensor(subs, vals, tuple(len(k) for k in keep))
obj = {"gaussian": Objectives.GAUSSIAN, "poisson": Objectives.POISSON,
       "bernoulli-logit": Objectives.BERNOULLI_LOGIT}[loss]
gn, gz = j["samples_grad"]
fn, fz = j["samples_loss"]
np.random.seed(1)
sampler = GCPSampler(X, function_samples=StratifiedCount(fz, fn),
                     gradient_samples=StratifiedCount(gz, gn))
opt = Adam(epoch_iters=1000, max_iters=E, max_fails=E, printitn=0)
M, _, info = ttb.gcp_opt(X, R, obj, opt, sampler=sampler, printitn=0)
tt = info["time_trace"]
p_ep = list(np.diff(tt))
skip = 1 if len(a_ep) > 1 else 0
a = statistics.median(a_ep[skip:])
p = statistics.median(p_ep[skip:]) if len(p_ep) > skip else float("nan")
print(f"| {tns.split('/')[-1]} | {loss} | {R} | {gn}+{gz} a step, {fn}+{fz} fixed | {E} | "
      f"{p:.3f} | {a:.3f} | {p / a:.1f}x | {j['final_loss']:.6g} | {info['f_est_trace'][-1]:.6g} |")
