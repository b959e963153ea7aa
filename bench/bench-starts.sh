#!/bin/sh
# Several models in one pass (amped-run --starts, --ranks; issue 44), on
# the CPU: AMP_STARTS (4) starts at rank AMP_RANK (8) fitted together
# against one run at their summed rank (32) and against the AMP_STARTS
# separate runs of rank 8; then --ranks AMP_RANKS (8,16,32) --starts 2
# against its six separate runs. AMP_ITERS (5) iterations each (--tol 0),
# AMP_THREADS (2) threads, f64. The tensor: cpu20m (bench/lib.sh), or
# AMP_TENSOR (an .amp file, e.g. from bench/amped-gen). Time an iteration:
# a run alone, the mean of its iterations' seconds; the batch, the sum of
# its iterations' seconds (each to the last model's fit; not the set-up,
# which on a GPU makes each model's handles and arrays) over its
# iterations. Run from the build directory.
#
# AMP_GPUS=1: the same comparisons on one GPU (--gpus 1, --memory
# AMP_MEMORY, default resident; --memory stream for the streamed case),
# on rd100m by default (bench/lib.sh makes it), AMP_ITERS 10 by default.
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh"
need_built "$prep" "$run"
need_python3
gpus=${AMP_GPUS:-0}
threads=${AMP_THREADS:-2} K=${AMP_STARTS:-4} R=${AMP_RANK:-8}
ranks=${AMP_RANKS:-8,16,32}
if [ "$gpus" = 0 ]; then iters=${AMP_ITERS:-5}; else iters=${AMP_ITERS:-10}; fi
if [ -n "${AMP_TENSOR:-}" ]; then
    amp=$AMP_TENSOR
    name=$(basename "$amp" .amp)
elif [ "$gpus" = 0 ]; then
    need_cpu20m
    amp="$data/cpu20m.amp"
    [ -f "$amp" ] || "$prep" -q -o "$amp" "$tns" || exit 1
    name=cpu20m
else
    need_rd100m
    amp="$data/rd100m.amp"
    [ -f "$amp" ] || "$prep" -q -o "$amp" "$tns" || exit 1
    name=rd100m
fi
common="-q -t $threads --iters $iters --tol 0 --gpus $gpus"
where="$threads threads"
if [ "$gpus" != 0 ]; then
    common="$common --memory ${AMP_MEMORY:-resident}"
    where="one GPU, --memory ${AMP_MEMORY:-resident}"
fi

# s/iteration and MTTKRP s/iteration of a report (a run alone or a batch)
per_iter() {
    python3 - "$1" <<'PYEOF'
import json, sys
j = json.load(open(sys.argv[1]))
if "batch" in j:
    n = max(m["iters"] for m in j["models"])
    print("%.4f %.4f" % (j["batch"]["iterate_seconds"] / n, j["batch"]["mttkrp_seconds"] / n))
else:
    it = j["iterations"]
    print("%.4f %.4f" % (sum(i["seconds"] for i in it) / len(it),
                         sum(i["phases"]["mttkrp"] for i in it) / len(it)))
PYEOF
}

echo "### $name, $where, $iters iterations, f64"
echo
echo "| run | s/iteration | MTTKRP s/iteration | batch / this |"
echo "|---|---|---|---|"
# shellcheck disable=SC2086
"$run" $common --starts "$K" -r "$R" --json "$data/starts-batch.json" "$amp" || exit 1
set -- $(per_iter "$data/starts-batch.json")
batch=$1
echo "| --starts $K -r $R (batched, $((K * R)) columns) | $1 | $2 | 1 |"
# shellcheck disable=SC2086
"$run" $common -r $((K * R)) --json "$data/starts-one.json" "$amp" || exit 1
set -- $(per_iter "$data/starts-one.json")
echo "| one run at rank $((K * R)) | $1 | $2 | $(awk -v a="$batch" -v b="$1" 'BEGIN { printf "%.2f", a / b }') |"
sum=0 msum=0
s=1
while [ "$s" -le "$K" ]; do
    # shellcheck disable=SC2086
    "$run" $common -r "$R" --seed "$s" --json "$data/starts-s$s.json" "$amp" || exit 1
    set -- $(per_iter "$data/starts-s$s.json")
    sum=$(awk -v a="$sum" -v b="$1" 'BEGIN { print a + b }')
    msum=$(awk -v a="$msum" -v b="$2" 'BEGIN { print a + b }')
    s=$((s + 1))
done
echo "| $K separate runs at rank $R (summed) | $sum | $msum | $(awk -v a="$batch" -v b="$sum" 'BEGIN { printf "%.2f", a / b }') |"

[ "${AMP_RANKS_SWEEP:-1}" = 0 ] && exit 0
# shellcheck disable=SC2086
"$run" $common --ranks "$ranks" --starts 2 --json "$data/starts-ranks.json" "$amp" || exit 1
set -- $(per_iter "$data/starts-ranks.json")
batch=$1
echo "| --ranks $ranks --starts 2 (batched) | $1 | $2 | 1 |"
sum=0 msum=0
for r in $(echo "$ranks" | tr , ' '); do
    for s in 1 2; do
        # shellcheck disable=SC2086
        "$run" $common -r "$r" --seed "$s" --json "$data/starts-r$r-s$s.json" "$amp" || exit 1
        set -- $(per_iter "$data/starts-r$r-s$s.json")
        sum=$(awk -v a="$sum" -v b="$1" 'BEGIN { print a + b }')
        msum=$(awk -v a="$msum" -v b="$2" 'BEGIN { print a + b }')
    done
done
echo "| its separate runs (summed) | $sum | $msum | $(awk -v a="$batch" -v b="$sum" 'BEGIN { printf "%.2f", a / b }') |"
