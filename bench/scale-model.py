#!/usr/bin/env python3
"""A model of amped-run's CP-ALS iteration on P GPUs, one host or several
(issue 26, "Plan for scale"): seconds an iteration, speed-up and
efficiency for P = 1 to 64 on hosts of 4 and 8 GPUs, for rd100m and the
billion-scale Amazon-shaped tensor, and the model's predictions for the
2-GPU runs that were measured, beside the measurements.

Standard library only.  Run it from anywhere:

    python3 bench/scale-model.py                 # the tables of bench/RESULTS.md
    python3 bench/scale-model.py --net-gbs 25    # another link (GB/s a NIC)
    python3 bench/scale-model.py --nic host      # one NIC a host, not one a GPU

What an iteration is (run/cuda/als_gpu.cu, resident, default options, from
the second iteration on; the first rescales and connects NCCL's peers and is
left out of every measured figure used here).  Per mode d, on every GPU:

  factor   V = Hadamard of the other Grams, potrf (and potri): R x R work
  mttkrp   the GPU's nonzeros of mode d (its shards: it owns their rows)
  solve    A_d = M P over the rows it owns (the fused pass)
  send     its rows to every other GPU (grouped ncclSend/ncclRecv: an
           all-gather of unequal parts), on a stream and communicator of
           their own, as soon as they are solved
  stats    column sums, 2 all-reduces (2R and R values), lambda
  gram     G_d over its rows, 1 all-reduce of R x R
  wait     the next mode's MTTKRP waits for all of mode d's rows

So the transfer of mode d overlaps stats, gram and the next mode's factor
step, and nothing else: the next MTTKRP reads every row and waits for it
(--overlap, which starts the MTTKRP on the nonzeros needing only local
rows, lost on 2 H200s and is not the default; its NCCL kernels and the
MTTKRP contend for the SMs).  A mode costs

  mttkrp + solve + max(transfer, stats + gram + factor + 3 all-reduces)

and an iteration the sum over modes plus the fit (read on the host).

The transfer: each GPU receives the rows it does not own, (P - 1) / P of
each factor, rows x R x 8 bytes in f64 (f32 runs send the f32 shadow: half).
amped sends them point to point, so a GPU receives from each remote GPU
directly: with one NIC a GPU its network bytes are (P - G) / P of the
factor, over its own NIC, while the G - 1 local peers' rows come over
NVLink at the same time; the slower of the two sets the time.  --allgather
hier shows what a hierarchical all-gather would give instead (each remote
row crossing the network once per host, then NVLink), and --allgather
needed what sending each GPU only the rows its nonzeros touch would (their
count estimated from the tensor's power law): neither is what amped does.

The MTTKRP: measured seconds a nonzero a mode on one GPU, times the
slowest GPU's nonzeros.  The shards never split a slice (owner computes),
so the GPU holding the heaviest slice of a mode holds at least that
slice: the dealing (largest shard first to the least loaded GPU, 64
shards a mode by default) is replayed here on shards of the measured
sizes (the heaviest slice alone in one shard, the rest equal), and never
better than the 2-GPU imbalance measured.
"""
import argparse
import functools
import math

# ---- measured inputs ---------------------------------------------------------
# Each with where it was measured: bench/RESULTS.md section and date.  H200
# figures (nvidia-h200 / nvidia-h200-x2); rank 32, f64, resident.

R = 32
BYTES = 8              # f64 rows; f32 runs send their f32 shadows (4)

# NVLink, per GPU, what NCCL's send/recv gave for the 0.40 GB of a 3.1 M-row
# mode between 2 H200 (NV18): 320-350 GB/s ("amped-run on several GPUs",
# session 11, 2026-11-23; 300-330 at 3cc0b04 the same day).
NVLINK_GBS = 335.0

# A small all-reduce within a host: the nccl column of modes 2 and 3 (3
# all-reduces, no wait for rows) was 0.037-0.079 ms a mode at 3cc0b04
# ("amped-run on several GPUs", 2026-11-23): 12-26 us each.
ALLREDUCE_HOST_S = 15e-6
# Between hosts: not measured (no machine of several hosts).  Assumed: NCCL's
# tree on InfiniBand, 8-byte to 8 KB all-reduces on 2 to 16 nodes.
ALLREDUCE_NET_S = 40e-6

# A 400 Gb/s link is 50 GB/s; NCCL over InfiniBand with GPUDirect RDMA
# reaches about 90% of it for large messages.  Assumed, not measured here.
NET_GBS = 0.9 * 400 / 8

# R x R work a mode (Hadamard, potrf, potri, small kernels): the solve
# phase on splatt-med, where row passes cost nothing, 0.47 ms an iteration
# for 3 modes ("the one-GPU bench at 700e13c", session 9, 2026-11-23).
FACTOR_S = 0.47e-3 / 3
# Normalize (column totals, lambda) 0.04 ms an iteration (session 10,
# 2026-11-23); fit 0.03 ms (session 11 phases, 2026-11-23).
NORMALIZE_S = 0.04e-3
FIT_S = 0.03e-3
# Of the row passes, the Gram's share: Nsight Compute on a 3.1 M-row mode,
# fused solve 0.685-0.691 ms, Gram 0.428-0.432 ms (session 10, 2026-11-23).
GRAM_SHARE = 0.430 / (0.430 + 0.688)


@functools.lru_cache(maxsize=None)
def law_rows(dim, s, draws):
    """Expected nonempty slices of a mode of amped-gen's (and powerlaw-gen's)
    law: rank r with probability F(r + 2) - F(r + 1), F the CDF of x^-s on
    [1, dim + 1).  rd100m's three modes come out within 0.02% of the file's
    (3,147,545 x 176,962 x 3,135,529 against 3,147,015 x 176,961 x
    3,135,213)."""
    a = (dim + 1) ** (1 - s) - 1

    def F(x):
        return (x ** (1 - s) - 1) / a

    total, r = 0.0, 0
    while r < dim:
        if r < 20000:          # the heavy head, exactly
            p = F(r + 2) - F(r + 1)
            total += -math.expm1(draws * math.log1p(-p))
            r += 1
        else:                  # the tail in blocks of 0.1%
            b = min(dim, int(r * 1.001) + 1)
            p = (F(b + 1) - F(r + 1)) / (b - r)
            total += (b - r) * -math.expm1(-draws * p)
            r = b
    return total


def law_heaviest(dim, s):
    """The heaviest slice's share of the draws (an upper bound on its share
    of the nonzeros: repeats are summed)."""
    a = (dim + 1) ** (1 - s) - 1
    return (2 ** (1 - s) - 1) / a


TENSORS = {
    # rd100m: 68,819,627 nonzeros, nonempty 3,147,015 x 176,961 x 3,135,213
    # ("amped-run on one GPU", 2026-11-22).
    "rd100m": dict(
        dims=(8211298, 176962, 8116559), nnz=68819627, rows=(3147015, 176961, 3135213),
        # one H200, session 11 job 3, 2026-11-23 (12.805 at cf9acce the same
        # day; 12.74 at 15c06c4, 2026-11-26): the iteration, median of 2-10
        t1=12.761e-3,
        # all-mode MTTKRP, resident f64, one H200 ("the one-GPU bench at
        # 700e13c", 2026-11-23); the 2-GPU ALS's MTTKRP phase was 5.25 ms
        # (session 11), half of it
        mttkrp1=10.525e-3,
        # the heaviest slice of each mode: the largest of 64 shards is
        # 4.37/5.23/4.37 times the mean, that slice alone ("amped-prep to
        # .amp", 2026-11-22)
        heaviest=(4.37 / 64, 5.23 / 64, 4.37 / 64),
        # the largest GPU's nonzeros over the mean on 2 GPUs ("amped-run on
        # several GPUs", 3cc0b04, 2026-11-23)
        imbalance=1.013,
        # powerlaw-gen rd100m 130000000 1.2 (../shared/baselines/README.md)
        law=(1.2, 130e6),
        source="1 GPU 12.761 ms (RESULTS session 11, 2026-11-23), MTTKRP 10.525 ms"),
    # The billion-scale tensor: amped-gen --nnz 1750000000 --dims
    # 4821207,1774269,1805187 --exponent 0.8: 1,748,025,921 nonzeros; rows
    # nearly all nonempty (law_rows: every one to the unit) ("billion
    # scale", 3cc0b04, 2026-11-23).
    "billion": dict(
        dims=(4821207, 1774269, 1805187), nnz=1748025921, rows=(4821207, 1774269, 1805187),
        # 1 GPU resident 0.532 s an iteration, its MTTKRP 0.522 s (median of
        # 2-5, "billion scale", 3cc0b04, 2026-11-23)
        t1=0.532, mttkrp1=0.522,
        # from the law: no slice holds a 64th of the draws
        heaviest=tuple(law_heaviest(d, 0.8) for d in (4821207, 1774269, 1805187)),
        # not measured at this size: rd100m's
        imbalance=1.013,
        law=(0.8, 1.75e9),
        source="1 GPU 0.532 s, MTTKRP 0.522 s (RESULTS billion scale, 3cc0b04, 2026-11-23)"),
}


def deal(shares, shards, gpus):
    """The largest GPU's share over the mean after dealing a mode's shards
    largest first to the least loaded GPU: the heaviest slice alone in one
    shard, the rest of the nonzeros in equal shards."""
    if gpus == 1:
        return 1.0
    big = shares
    rest = (1 - big) / (shards - 1)
    load = [0.0] * gpus
    for size in [big] + [rest] * (shards - 1):
        i = load.index(min(load))
        load[i] += size
    return max(load) * gpus


class Net:
    def __init__(self, per_host, nvlink_gbs, net_gbs, nic, allgather, overlap, bytes_):
        self.G, self.nvl, self.net = per_host, nvlink_gbs * 1e9, net_gbs * 1e9
        self.nic, self.allgather, self.overlap, self.bytes = nic, allgather, overlap, bytes_

    def allreduce(self, P):
        if P == 1:
            return 0.0
        return ALLREDUCE_HOST_S if P <= self.G else ALLREDUCE_NET_S

    def needed(self, rows, P, dim, law, N):
        """The rows of a mode that one GPU's nonzeros read."""
        if self.allgather != "needed":
            return rows
        # those its nonzeros of the other N - 1 modes' copies touch, taken
        # as (N - 1) / P of the draws of the tensor's law
        s, draws = law
        return min(rows, law_rows(dim, s, (N - 1) * draws / P))

    def transfer(self, rows, P):
        """Seconds for one GPU to receive those of rows it does not own."""
        if P == 1:
            return 0.0
        row = R * self.bytes
        local = min(P, self.G)          # GPUs of its host, itself included
        remote = P - local
        t_local = rows * row * (local - 1) / P / self.nvl
        if remote == 0:
            return t_local
        # what one GPU's share of the network carries, and at what rate
        nic_rate = self.net if self.nic == "gpu" else self.net / local
        if self.allgather != "hier":    # amped: every remote row to every GPU
            t_remote = rows * row * remote / P / nic_rate
            return max(t_local, t_remote)
        # hierarchical: each remote row once per host, spread over its GPUs
        t_remote = rows * row * remote / P / local / nic_rate
        t_local = rows * row * (P - 1) / P / self.nvl
        return max(t_local, t_remote)


def iteration(t, P, net, mttkrp1=None, t1=None):
    """Seconds an iteration on P GPUs, and its parts."""
    mttkrp1 = t["mttkrp1"] if mttkrp1 is None else mttkrp1
    t1 = t["t1"] if t1 is None else t1
    rows, N = t["rows"], len(t["rows"])
    per_nnz = mttkrp1 / (N * t["nnz"])
    fixed = N * FACTOR_S + NORMALIZE_S + FIT_S
    per_row = (t1 - mttkrp1 - fixed) / sum(rows)
    out = dict(mttkrp=0.0, rows=0.0, transfer=0.0, exposed=0.0, gb=0.0, total=FIT_S)
    for d in range(N):
        imb = max(deal(t["heaviest"][d], 64, P), t["imbalance"] if P > 1 else 1.0)
        mttkrp = per_nnz * t["nnz"] * imb / P
        solve = per_row * (1 - GRAM_SHARE) * rows[d] / P
        window = (per_row * GRAM_SHARE * rows[d] / P + FACTOR_S + NORMALIZE_S / N
                  + 3 * net.allreduce(P))
        got = net.needed(rows[d], P, t["dims"][d], t.get("law"), N)
        x = net.transfer(got, P)
        out["gb"] += got * R * net.bytes * (P - 1) / P / 1e9
        step = max(x, window) if net.overlap else x + window
        out["mttkrp"] += mttkrp
        out["rows"] += solve + window
        out["transfer"] += x
        out["exposed"] += step - window
        out["total"] += mttkrp + solve + step
    return out


PS = (1, 2, 4, 8, 16, 32, 64)


def table(name, args):
    t = TENSORS[name]
    print(f"\n### {name}: {t['nnz']:,} nonzeros, rows "
          + " x ".join(f"{r:,}" for r in t["rows"]) + f", rank {R}\n")
    print("Calibrated on: " + t["source"] + ".\n")
    hdr = "| P | hosts | MTTKRP ms | rows, R x R ms | rows in, GB | transfer ms | not hidden ms | ms/iter | speed-up | efficiency |"
    for G in args.hosts:
        net = Net(G, args.nvlink_gbs, args.net_gbs, args.nic, args.allgather,
                  not args.no_overlap, args.bytes)
        print(f"Hosts of {G} GPUs:\n")
        print(hdr)
        print("|" + "---:|" * 10)
        base = iteration(t, 1, net)["total"]
        for P in PS:
            it = iteration(t, P, net)
            print(f"| {P} | {math.ceil(P / G)} | {it['mttkrp'] * 1e3:.2f} | {it['rows'] * 1e3:.2f} "
                  f"| {it['gb']:.2f} | {it['transfer'] * 1e3:.2f} | {it['exposed'] * 1e3:.2f} "
                  f"| {it['total'] * 1e3:.2f} | {base / it['total']:.2f} "
                  f"| {base / it['total'] / P:.2f} |")
        print()


def checks(args):
    """The model against the runs that were measured (2 GPUs of one host)."""
    nvl = Net(8, args.nvlink_gbs, args.net_gbs, "gpu", "p2p", True, BYTES)
    late = Net(8, args.nvlink_gbs, args.net_gbs, "gpu", "p2p", False, BYTES)
    rd, bn = TENSORS["rd100m"], TENSORS["billion"]
    print("\n### Checks against the measured 2-GPU runs\n")
    print("| run | measured | model | model over measured |")
    print("|---|---:|---:|---:|")

    def row(label, measured, model, unit="ms", scale=1e3):
        print(f"| {label} | {measured * scale:.3f} {unit} | {model * scale:.3f} {unit} "
              f"| {model / measured:.3f} |")

    it = iteration(rd, 2, nvl)
    row("rd100m, 2 H200, rows sent as solved (session 11 job 3, 2026-11-23)", 8.490e-3,
        it["total"])
    print(f"| ... over 1 GPU | 0.665 (0.667-0.668 on 2026-11-26) | "
          f"{it['total'] / rd['t1']:.3f} | |")
    row("... MTTKRP phase", 5.25e-3, it["mttkrp"])
    row("... waits for rows (modes 1 and 2: 0.66-0.68 + 0.81-0.82)", 1.49e-3, it["exposed"])
    # 3cc0b04: rows sent after the Gram, 1 GPU 14.974 ms, --mttkrp-only 10.99
    it = iteration(rd, 2, late, mttkrp1=10.99e-3, t1=14.974e-3)
    row("rd100m, 2 H200, rows sent after the Gram (3cc0b04, 2026-11-23)", 10.436e-3,
        it["total"])
    print(f"| ... over 1 GPU | 0.697 | {it['total'] / 14.974e-3:.3f} | |")
    row("... the exchange (1.33 + 0.10 + 1.14 ms)", 2.57e-3, it["transfer"])
    it = iteration(bn, 2, late)
    row("billion, 2 H200, rows sent after the Gram (3cc0b04, 2026-11-23)", 0.265, it["total"],
        "s", 1)
    print(f"| ... over 1 GPU | 0.498 | {it['total'] / bn['t1']:.3f} | |")
    row("... the exchange", 4.1e-3, it["transfer"])
    it = iteration(bn, 2, nvl)
    print(f"| billion, rows sent as solved (today's code), speed-up | 1.96-1.99x "
          f"(AO-ADMM, MU, HALS, 15c06c4, 2026-11-26) | {bn['t1'] / it['total']:.2f}x | |")

    # tests/mpi_gpu.sh on 2 H200, 2026-11-26 (/work/.device/5/mpi_gpu.log): an
    # rd100m-like tensor of 20 M draws (amped-gen, exponent 1.2): 6,359,219 +
    # 6,200,228 nonzeros a mode; rows from the law.
    dims = (8211298, 176962, 8116559)
    small = dict(dims=dims, nnz=6359219 + 6200228, rows=tuple(round(law_rows(d, 1.2, 20e6)) for d in dims),
                 heaviest=(0.0, 0.0, 0.0), imbalance=6359219 / ((6359219 + 6200228) / 2))
    # calibrated as rd100m a nonzero and a row (no 1-GPU run of it)
    small["mttkrp1"] = rd["mttkrp1"] / rd["nnz"] * small["nnz"]
    fixed = 3 * FACTOR_S + NORMALIZE_S + FIT_S
    per_row = (rd["t1"] - rd["mttkrp1"] - fixed) / sum(rd["rows"])
    small["t1"] = small["mttkrp1"] + fixed + per_row * sum(small["rows"])
    it = iteration(small, 2, nvl)
    row("rd100m-like 20 M draws, 2 H200 NVLink, 1 process x 2 and 2 x 1 (2026-11-26)",
        0.0025, it["total"])
    gb = sum(small["rows"]) * R * BYTES / 2 / 1e9
    # the exchange column of the 2-process network run: 1.082 and 1.086 s over
    # its 10 iterations (the first, which connects NCCL's peers, included)
    loop_gbs = gb / (1.084 / 10)
    sock = Net(1, args.nvlink_gbs, loop_gbs, "gpu", "p2p", True, BYTES)
    it = iteration(small, 2, sock)
    row(f"... NCCL's network transport, 2 processes, at {loop_gbs:.2f} GB/s "
        f"({gb:.3f} GB in a GPU an iteration)", 0.1026, it["total"])
    row("... the same, 1 process x 2 GPUs", 0.1177, it["total"])
    print()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tensor", choices=sorted(TENSORS), action="append",
                    help="only this tensor (repeatable; default both)")
    ap.add_argument("--hosts", type=int, nargs="+", default=[4, 8],
                    help="GPUs a host (default 4 8)")
    ap.add_argument("--nvlink-gbs", type=float, default=NVLINK_GBS,
                    help=f"GB/s a GPU receives over NVLink (default {NVLINK_GBS:g}, measured)")
    ap.add_argument("--net-gbs", type=float, default=NET_GBS,
                    help=f"GB/s a NIC (default {NET_GBS:g}: 90%% of 400 Gb/s, assumed)")
    ap.add_argument("--nic", choices=("gpu", "host"), default="gpu",
                    help="one NIC a GPU (default, as DGX/HGX hosts) or one a host")
    ap.add_argument("--allgather", choices=("p2p", "hier", "needed"), default="p2p",
                    help="p2p: amped's send/recv of every row (default); hier: a "
                    "hierarchical all-gather; needed: only the rows a GPU's nonzeros "
                    "touch (estimated from the tensor's law): neither is amped's")
    ap.add_argument("--no-overlap", action="store_true",
                    help="rows sent after the Gram (amped before session 11)")
    ap.add_argument("--f32", dest="bytes", action="store_const", const=4, default=BYTES,
                    help="f32 rows on the wire (the MTTKRP times stay f64's)")
    ap.add_argument("--no-checks", action="store_true", help="only the tables")
    args = ap.parse_args()
    print(f"## Predicted CP-ALS iteration, rank {R}, resident, "
          f"{'f64' if args.bytes == 8 else 'f32'} rows, NVLink {args.nvlink_gbs:g} GB/s a GPU, "
          f"network {args.net_gbs:g} GB/s a {'GPU' if args.nic == 'gpu' else 'host'}, "
          f"all-gather {args.allgather}, rows sent "
          f"{'after the Gram' if args.no_overlap else 'as solved'}")
    for name in args.tensor or ["rd100m", "billion"]:
        table(name, args)
    if not args.no_checks:
        checks(args)


if __name__ == "__main__":
    main()
