#!/bin/sh
# CP-ALS on the CPU backend, on cpu20m: seconds per iteration (median of
# the run's iterations), MTTKRP per round of all modes, and how close the
# MTTKRP gets to its bytes floor (the copy streamed once, every factor read
# once, the output written once) at the machine's triad bandwidth.
#
# Usage: bench/bench-cpd.sh                  (from the build directory)
# Env:   AMP_BENCH_DIR   where tensors are kept (default: bench/data)
#        AMP_BASELINES   the peers' folder (default: ../shared/baselines)
#        AMP_THREADS     thread counts (default: 1 2 4 ... nproc)
#        AMP_RANK        rank (default: 32), AMP_ITERS (default: 10)
#        AMP_REPEAT      runs per thread count (default: 2)
set -eu
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh"
membw="$build/bench/membw"
rank=${AMP_RANK:-32}
iters=${AMP_ITERS:-10}
repeat=${AMP_REPEAT:-2}
need_built "$prep" "$run" "$membw"
need_python3

need_cpu20m
sweep_threads
amp="$data/cpu20m.amp"
[ -f "$amp" ] || "$prep" -q -o "$amp" "$tns"
json="$data/cpd.json"

bw=$("$membw")
echo "## CP-ALS (CPU backend) on $(hostname), $ncpu CPUs, $(date -u +%Y-%m-%d)"
echo
echo "cpu20m, rank $rank, $iters iterations (--tol 0), f64 unless marked; triad bandwidth"
echo "$bw GB/s on all threads. Per run: median seconds per iteration; MTTKRP seconds per"
echo "round of 3 modes (mean of 5 rounds); floor = the MTTKRP's compulsory bytes at the"
echo "triad bandwidth; x floor = measured over floor."
echo
echo "| threads | precision | run | s/iter | MTTKRP s/round | x floor | load s |"
echo "|---:|---|---:|---:|---:|---:|---:|"
for t in $threads; do
    for p in f64 f32; do
        [ "$p" = f32 ] && [ "$t" != "$ncpu" ] && continue
        i=1
        while [ "$i" -le "$repeat" ]; do
            "$run" -q -t "$t" -r "$rank" --iters "$iters" --tol 0 --precision "$p" \
                --json "$json" "$amp"
            set -- $(python3 -c '
import json, statistics, sys
d = json.load(open(sys.argv[1]))
print("%.3f %.3f" % (statistics.median(i["seconds"] for i in d["iterations"]), d["timings"]["load"]))' "$json")
            per_iter=$1 load=$2
            "$run" -q -t "$t" -r "$rank" --mttkrp-only --iters 5 --precision "$p" --json "$json" "$amp"
            set -- $(python3 -c '
import json, sys
d = json.load(open(sys.argv[1])); t = d["tensor"]; R = d["rank"]
fs = 4 if d["precision"] == "f32" else 8
vs = 4 if t["values"] == "f32" else 8
floor_bytes = t["nnz"] * (8 + vs) + sum(t["compact_dims"]) * R * fs
per_round = d["mttkrp"]["seconds"] / d["mttkrp"]["rounds"]
floor = len(t["dims"]) * floor_bytes / (float(sys.argv[2]) * 1e9)
print("%.3f %.1f" % (per_round, per_round / floor))' "$json" "$bw")
            echo "| $t | $p | $i | $per_iter | $1 | $2 | $load |"
            i=$((i + 1))
        done
    done
done

# The constrained methods against CP-ALS on all threads: the same run with
# --method M --constraint nonneg. update s/iter is the update phase (the
# solve for ALS); its floor is one pass over M and the factor (and
# AO-ADMM's dual), read and written once per mode: the blocks stay in
# cache across AO-ADMM's inner iterations.
echo
echo "Constrained methods, $ncpu threads, f64, rank $rank, $iters iterations, --constraint"
echo "nonneg (ALS: none); ratio = s/iter over ALS's; update floor at the triad bandwidth."
echo
echo "| method | s/iter | ratio to ALS | update s/iter | update floor s | x floor |"
echo "|---|---:|---:|---:|---:|---:|"
als_iter=
for m in als ao-admm mu hals; do
    set -- --method "$m"
    [ "$m" = als ] || set -- "$@" --constraint nonneg
    "$run" -q -t "$ncpu" -r "$rank" --iters "$iters" --tol 0 "$@" --json "$json" "$amp"
    set -- $(python3 -c '
import json, statistics, sys
d = json.load(open(sys.argv[1])); t = d["tensor"]; R = d["rank"]
per_iter = statistics.median(i["seconds"] for i in d["iterations"])
phase = "solve" if d["method"] == "als" else "update"
upd = d["timings"][phase] / len(d["iterations"])
arrays = {"als": 2, "ao-admm": 5, "mu": 3, "hals": 3}[d["method"]]   # M, A (2 for ALS: M in, A out), U
floor = arrays * sum(t["compact_dims"]) * R * 8 / (float(sys.argv[2]) * 1e9)
print("%.3f %.3f %.4f %.1f" % (per_iter, upd, floor, upd / floor))' "$json" "$bw")
    [ -n "$als_iter" ] || als_iter=$1
    ratio=$(python3 -c "print('%.2f' % ($1 / $als_iter))")
    echo "| $m | $1 | $ratio | $2 | $3 | $4 |"
done
