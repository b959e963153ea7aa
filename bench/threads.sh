#!/bin/sh
# amped-run's CPU backend at each thread count and OpenMP wait policy, on
# an idle machine and on one whose CPUs are partly taken by busy loops (a
# shared host): seconds per iteration (median of the run's iterations),
# to choose the default thread count and wait policy (issue 40).
#
# Rows: the default (no -t: amped-run's own choice, which sets
# OMP_WAIT_POLICY=passive when the environment leaves it unset), then
# -t 1, -t nproc/2 and -t nproc with OMP_WAIT_POLICY=active (OpenMP's
# spinning), =passive, and spin10k: a bounded spin (GOMP_SPINCOUNT=10000,
# libgomp's spin before it sleeps, about some microseconds), the choice
# between the two should passive cost on a dedicated host. Columns: idle, and with AMP_LOAD busy loops
# (default: half the CPUs; at least 1).
#
# Usage: bench/threads.sh                   (from the build directory)
# Needs only amped-prep, amped-run and bench/amped-gen of the build tree.
# Env:   AMP_BENCH_DIR  where the tensor is kept (default: bench/data)
#        AMP_NNZ        nonzeros of the generated tensor (default: 4000000;
#                       0: the bundled data/sample.tns.zst instead)
#        AMP_RANK (16), AMP_ITERS (10), AMP_LOAD (nproc/2)
set -eu
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh"
gen="$build/bench/amped-gen"
rank=${AMP_RANK:-16}
iters=${AMP_ITERS:-10}
nnz=${AMP_NNZ:-4000000}
ncpu=$(nproc)
load=${AMP_LOAD:-$((ncpu / 2))}
[ "$load" -ge 1 ] || load=1
need_built "$prep" "$run" "$gen"
need_python3

if [ "$nnz" = 0 ]; then
    name=sample
    amp="$data/sample.amp"
    [ -f "$amp" ] || "$prep" -q -o "$amp" "$src/data/sample.tns.zst"
else
    name="gen$nnz"
    amp="$data/$name.amp"
    if [ ! -f "$amp" ]; then
        "$gen" -o "$data/$name.tns" --nnz "$nnz" --dims 200000,100000,50000
        "$prep" -q -o "$amp" "$data/$name.tns"
    fi
fi
json="$data/threads.json"

# secs POLICY ARGS...: median seconds per iteration of one run; POLICY
# "-" leaves OMP_WAIT_POLICY as amped-run finds it (unset).
secs() {
    pol=$1
    shift
    if [ "$pol" = - ]; then
        env -u OMP_WAIT_POLICY -u GOMP_SPINCOUNT "$run" -q --gpus 0 -r "$rank" --iters "$iters" \
            --tol 0 "$@" --json "$json" "$amp"
    elif [ "$pol" = spin10k ]; then
        env -u OMP_WAIT_POLICY GOMP_SPINCOUNT=10000 "$run" -q --gpus 0 -r "$rank" \
            --iters "$iters" --tol 0 "$@" --json "$json" "$amp"
    else
        env -u GOMP_SPINCOUNT OMP_WAIT_POLICY="$pol" "$run" -q --gpus 0 -r "$rank" \
            --iters "$iters" --tol 0 "$@" --json "$json" "$amp"
    fi
    python3 -c '
import json, statistics, sys
r = json.load(open(sys.argv[1]))
print("%.4f" % statistics.median(i["seconds"] for i in r["iterations"]))' "$json"
}

busy_pids=
start_load() {
    i=0
    while [ "$i" -lt "$load" ]; do
        sh -c 'while :; do :; done' &
        busy_pids="$busy_pids $!"
        i=$((i + 1))
    done
}
stop_load() {
    for p in $busy_pids; do kill "$p" 2>/dev/null || true; done
    for p in $busy_pids; do wait "$p" 2>/dev/null || true; done
    busy_pids=
}
trap stop_load EXIT INT TERM

half=$((ncpu / 2))
[ "$half" -ge 1 ] || half=1
rows="- default"
for t in $(printf '%s\n' 1 $half $ncpu | sort -nu); do
    rows="$rows|active -t$t|passive -t$t|spin10k -t$t"
done

echo "## Threads and wait policy on $(hostname), $ncpu CPUs, $(date -u +%Y-%m-%d)"
echo
echo "$name ($amp), rank $rank, $iters iterations (--tol 0), --gpus 0: median seconds"
echo "per iteration. loaded: $load busy loop(s) (sh) on the $ncpu CPUs during the run."
echo "default: no -t and OMP_WAIT_POLICY unset (amped-run's choice; -q hides its"
echo "thread count, see 'backend:' in a run without -q)."
echo
echo "Load average before: $(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null || echo unknown)."
echo
echo "| OMP_WAIT_POLICY | -t | idle s/iter | loaded s/iter |"
echo "|---|---:|---:|---:|"
IFS='|'
for row in $rows; do
    IFS=' '
    # shellcheck disable=SC2086
    set -- $row
    pol=$1 t=$2
    if [ "$t" = default ]; then
        idle=$(secs "$pol")
        start_load
        busy=$(secs "$pol")
        stop_load
        echo "| (unset) | default | $idle | $busy |"
    else
        n=${t#-t}
        idle=$(secs "$pol" -t "$n")
        start_load
        busy=$(secs "$pol" -t "$n")
        stop_load
        echo "| $pol | $n | $idle | $busy |"
    fi
    IFS='|'
done
