#!/bin/sh
# CP completion (amped-run --observed nonzeros, issue 43). Run from the
# build directory; python from AMP_PYTHON (python3).
#
# 1. The CPU, AMP_THREADS (2) threads, cpu20m (bench/lib.sh: the baselines'
#    power-law generator) at rank AMP_RANK (16): seconds per iteration of
#    completion against CP-ALS (--observed all) on the same tensor, AMP_ITERS
#    (5) iterations, the first left out of the mean (it pays the start).
# 2. Against TensorLy's masked parafac on the largest tensor of
#    ../shared/data it can hold densely (alog, 200 x 100 x 200: 32 MB a
#    dense array; splatt-med would take 5.6 TB), rank AMP_RANK, AMP_ITERS
#    iterations, the same thread count: seconds per iteration and peak
#    memory side by side (completion-tensorly.py).
# 3. One GPU, only where `amped-run --list-devices` finds one: rd100m at
#    rank 32 and 16, f64, resident: a completion iteration against a CP-ALS
#    iteration (targets: at most 3x at rank 32, 2x at rank 16), with the
#    floors of the per-row systems (below).
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh"
need_built "$prep" "$run"
py=${AMP_PYTHON:-python3}
shared=${AMP_TEST_DATA:-$src/../shared/data}
rank=${AMP_RANK:-16} iters=${AMP_ITERS:-5} threads=${AMP_THREADS:-2}

# Mean seconds of the iterations after the first, and the MTTKRP phase's
# (completion: the fused pass that builds and solves the rows' systems).
per_iter() {
    "$py" -c 'import json, sys
j = json.load(open(sys.argv[1]))
its = j["iterations"][1:] or j["iterations"]
n = len(its)
print("%.4f %.4f" % (sum(i["seconds"] for i in its) / n, sum(i["phases"]["mttkrp"] for i in its) / n))' "$1"
}

# ---- 1. the CPU: completion against CP-ALS on cpu20m ---------------------
if [ "${AMP_CMP_CPU:-1}" != 0 ]; then
    need_cpu20m
    amp="$data/cpu20m.amp"
    [ -f "$amp" ] || "$prep" -q -o "$amp" "$tns" || exit 1
    echo "cpu20m, rank $rank, $threads threads, $iters iterations (mean of 2..$iters):"
    # The process's CPU seconds beside the wall clock: on a shared machine
    # the wall clock also counts the time other work held the cores.
    echo "| run | s/iteration | pass (MTTKRP phase) s | process user CPU s | peak RSS MiB |"
    echo "|---|---|---|---|---|"
    for how in als completion; do
        extra=
        [ "$how" = completion ] && extra="--observed nonzeros --l2 1e-3"
        # shellcheck disable=SC2086
        /usr/bin/time -f "%M %U" -o "$data/cmp-$how.rss" "$run" -q --gpus 0 -t "$threads" \
            -r "$rank" --iters "$iters" --tol 0 $extra --json "$data/cmp-$how.json" "$amp" ||
            exit 1
        set -- $(per_iter "$data/cmp-$how.json") $(tail -n 1 "$data/cmp-$how.rss")
        eval "s_$how=$1"
        echo "| $how | $1 | $2 | $4 | $(($3 / 1024)) |"
    done
    # shellcheck disable=SC2154
    awk -v a="$s_als" -v c="$s_completion" 'BEGIN { printf "completion / CP-ALS: %.2fx\n\n", c / a }'
fi

# ---- 2. against TensorLy's masked parafac -------------------------------
if "$py" -c 'import tensorly' 2>/dev/null; then
    t=alog
    "$prep" -q -f -o "$data/$t.amp" "$shared/$t.tns" || exit 1
    echo "| tensor | rank | iterations | TensorLy ms/iter | amped ms/iter | ratio | TensorLy peak MiB | amped peak MiB | TensorLy train RMSE | amped train RMSE |"
    echo "|---|---|---|---|---|---|---|---|---|---|"
    "$py" "$here/completion-tensorly.py" "$run" "$shared/$t.tns" "$data/$t.amp" "$rank" \
        "$iters" "$threads" "$data" || exit 1
    echo
else
    echo "bench-completion: no TensorLy in $py (AMP_PYTHON): its comparison is skipped"
fi

# ---- 3. one GPU: a completion iteration against a CP-ALS iteration -------
# Floors per iteration (N modes, nnz nonzeros, rows_n rows of mode n):
#   bytes: CP-ALS's MTTKRP bytes per mode, nnz (8 + 8) + the other modes'
#     factors once + the mode's rows once (8 R each): the per-row systems
#     live in a warp's shared memory and are never written out, so they
#     add nothing here but the relabelling with --holdout (8 N a nonzero);
#   FLOPs: per mode nnz ((N - 2) R + R (R + 1)) for k and the R (R + 1) / 2
#     accumulation (a multiply and an add an entry) and x k, plus
#     rows_n (R^3 / 3 + 2 R^2) for the factorizations and solves.
#   At rank 32 the accumulation is 1056 FLOPs a nonzero against the
#   MTTKRP's 64: an iteration is bound by f64 arithmetic, not by bytes.
if "$run" --list-devices >/dev/null 2>&1 && [ "${AMP_CMP_GPU:-1}" != 0 ]; then
    need_rd100m
    amp="$data/rd100m.amp"
    [ -f "$amp" ] || "$prep" -q -o "$amp" "$tns" || exit 1
    for R in 32 16; do
        "$run" "$amp" -q --gpus 1 --memory resident -r "$R" --iters 4 --tol 0 \
            --json "$data/gcmp-als-$R.json" || exit 1
        "$run" "$amp" -q --gpus 1 --memory resident -r "$R" --iters 4 --tol 0 \
            --observed nonzeros --l2 1e-3 --json "$data/gcmp-cmp-$R.json" || exit 1
        "$py" - "$data" "$R" <<'PY'
import json, sys
d, R = sys.argv[1], int(sys.argv[2])
def mean(f):
    j = json.load(open(f))
    its = j["iterations"][1:]
    return j, sum(i["seconds"] for i in its) / len(its), sum(i["phases"]["mttkrp"] for i in its) / len(its)
ja, sa, pa = mean(f"{d}/gcmp-als-{R}.json")
jc, sc, pc = mean(f"{d}/gcmp-cmp-{R}.json")
t = jc["tensor"]
N, nnz, rows = t["modes"], t["nnz"], t["compact_dims"]
bytes_floor = sum(nnz * 16 + sum(rows[m] for m in range(N) if m != n) * R * 8 + rows[n] * R * 8
                  for n in range(N))
flops = sum(nnz * ((N - 2) * R + R * (R + 1)) + rows[n] * (R ** 3 / 3 + 2 * R * R) for n in range(N))
target = 3 if R == 32 else 2
print(f"rd100m, rank {R}, f64, one GPU ({jc.get('device', '?')}): CP-ALS {sa * 1e3:.2f} ms an "
      f"iteration (MTTKRP {pa * 1e3:.2f}), completion {sc * 1e3:.2f} ms (pass {pc * 1e3:.2f}): "
      f"{sc / sa:.2f}x (target at most {target}x: {'met' if sc / sa <= target else 'NOT met'})")
print(f"  floors an iteration: {bytes_floor / 1e9:.2f} GB ({bytes_floor / sc / 1e9:.0f} GB/s "
      f"achieved against it), {flops / 1e9:.1f} GFLOP f64 ({flops / sc / 1e12:.2f} TFLOP/s)")
PY
    done
else
    echo "bench-completion: no CUDA device (amped-run --list-devices): the GPU part is skipped"
fi
