#!/bin/sh
# Reading speed of amped-prep on the cpu20m power-law tensor (541 MB of
# FROSTT text), against the figures in bench/RESULTS.md.
#
# Usage: bench/bench-read.sh [REPS]          (from the build directory)
# Env:   AMP_BENCH_DIR   where tensors are kept (default: bench/data)
#        AMP_BASELINES   the peers' folder (default: ../shared/baselines
#                        beside the source tree)
#        AMP_THREADS     thread counts to sweep (default: 1 2 4 ... nproc)
set -eu
reps=${1:-5}
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh"
need_built "$prep"

need_cpu20m
bytes=$(wc -c <"$tns")
sweep_threads

# median of the numbers on stdin
median() { sort -g | awk '{a[NR]=$1} END {print (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }

# One timed read: prints "read_s dedup_s wall_s" (amped-prep -v timings).
one_read() {   # file threads
    start=$(date +%s.%N)
    out=$(OMP_NUM_THREADS=$2 OMP_PROC_BIND=spread "$prep" -v "$1" 2>&1 >/dev/null)
    end=$(date +%s.%N)
    echo "$out" | awk -v w="$(awk -v a="$start" -v b="$end" 'BEGIN {print b - a}')" \
        '/read [0-9.]+ s/ {for (i=1;i<=NF;i++) { if ($i=="read") r=$(i+1); if ($i=="duplicates") d=$(i+1) }} END {print r, d, w}'
}

measure() {    # label file threads
    rm -f "$data/.times"
    cat "$2" >/dev/null   # warm the page cache: the figure is parse speed, not disk
    i=0
    while [ "$i" -lt "$reps" ]; do one_read "$2" "$3" >>"$data/.times"; i=$((i + 1)); done
    r=$(cut -d' ' -f1 "$data/.times" | median)
    d=$(cut -d' ' -f2 "$data/.times" | median)
    w=$(cut -d' ' -f3 "$data/.times" | median)
    awk -v l="$1" -v t="$3" -v r="$r" -v d="$d" -v w="$w" -v b="$bytes" 'BEGIN {
        printf "| %-18s | %3d | %7.3f | %7.3f | %7.3f | %8.1f | %9.1f |\n", l, t, r, d, w,
            b / r / 1e6, b / r / 1e6 / t }'
}

echo "# amped-prep read benchmark: $(basename "$tns"), $bytes bytes, median of $reps"
echo "# host: $(uname -n), $ncpu CPUs: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')"
echo "# parse: read + parse (+ validation); dedup: duplicate detection; MB/s from parse;"
echo "# wall: whole process, including the statistics report"
echo "| input              | thr | parse s | dedup s | wall s  | MB/s     | MB/s/core |"
echo "|--------------------|-----|---------|---------|---------|----------|-----------|"
for t in $threads; do measure "cpu20m.tns" "$tns" "$t"; done
trap 'rm -f "$data/.times"' EXIT
bin="$data/cpu20m.bin"
[ -f "$bin" ] || "$prep" -q "$tns" -o "$bin"
bytes=$(wc -c <"$bin")
measure "cpu20m.bin" "$bin" "$ncpu"
