#!/bin/sh
# amped-run on one GPU against the peers, in one job on one machine:
# rd100m (Reddit's shape, 68.8 M nonzeros, Zipf 1.2) at rank 32. Prints
# all-mode MTTKRP (tensor resident, streamed, and streamed from compressed
# chunks) and CP-ALS seconds per iteration, f64 and f32, the same for
# coo-mttkrp and torch-mttkrp, and the ratios (to BLCO's published H200
# figures only on an H200); and the MTTKRP's rate against its bytes floor
# (the copy streamed once, each factor read once, the output written
# once) and the 4.0 TB/s device link.
#
# Usage: bench/bench-gpu.sh                  (from the build directory)
# Env:   AMP_BENCH_DIR   where tensors are kept (default: bench/data)
#        AMP_BASELINES   the peers' folder (default: ../shared/baselines)
#        AMP_RANK (32), AMP_ROUNDS (20 MTTKRP rounds), AMP_ITERS (10)
#        AMP_TENSOR      rd100m (default) or cpu20m
#        AMP_PEERS       0 to skip coo-mttkrp and torch-mttkrp
#        AMP_CONSTRAINED_ONLY  1: only the constrained methods' section
set -eu
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh"
rank=${AMP_RANK:-32}
rounds=${AMP_ROUNDS:-20}
iters=${AMP_ITERS:-10}
name=${AMP_TENSOR:-rd100m}
peers=${AMP_PEERS:-1}
need_built "$prep" "$run"
need_python3
"$run" --list-devices >/dev/null 2>&1 || { echo "bench: no usable GPU (amped-run --list-devices)" >&2; exit 1; }

case $name in
rd100m) need_rd100m ;;
cpu20m) need_cpu20m ;;
*) echo "bench: unknown tensor $name" >&2; exit 1 ;;
esac
# Its values have 6 decimals: f64 keeps them, f32 rounds them (on purpose).
for v in f64 f32; do
    [ -f "$data/$name-$v.amp" ] || "$prep" -q --values "$v" -o "$data/$name-$v.amp" "$tns" 2>/dev/null
done

if [ "${AMP_CONSTRAINED_ONLY:-0}" != 1 ]; then
echo "## amped-run on one GPU: $name, rank $rank ($(date -u +%Y-%m-%d))"
echo
"$run" --list-devices | sed 's/^/    /'
echo

json() { python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print(eval(sys.argv[2]))" "$@"; }
# Per-iteration phases (ms) without the first iteration: run $1 of N
# iterations less run $2 of one, over N - 1.
phases() {
    python3 - "$1" "$2" <<'EOF'
import json, sys
n, one = (json.load(open(p)) for p in sys.argv[1:])
k = len(n['iterations']) - len(one['iterations'])
if k < 1:
    print('- (needs AMP_ITERS of 2 or more)')
else:
    print(', '.join('%s %.1f' % (p, (n['timings'][p] - one['timings'][p]) * 1e3 / k)
                    for p in ('mttkrp', 'gram', 'solve', 'normalize', 'fit')))
EOF
}

# MTTKRP, all modes, per round (mean of the rounds).
for p in f64 f32; do
    "$run" --gpus 1 -q --mttkrp-only --iters "$rounds" -r "$rank" --precision "$p" \
        --json "$data/gpu-mttkrp-$p.json" "$data/$name-$p.amp"
    eval "mttkrp_$p=\$(json \"\$data/gpu-mttkrp-$p.json\" \"'%.3f' % (d['mttkrp']['seconds'] / d['mttkrp']['rounds'] * 1e3)\")"
    "$run" --gpus 1 -q -r "$rank" --iters "$iters" --tol 0 --precision "$p" \
        --json "$data/gpu-als-$p.json" "$data/$name-$p.amp"
    eval "als_$p=\$(json \"\$data/gpu-als-$p.json\" \"'%.3f' % (sorted(i['seconds'] for i in d['iterations'])[len(d['iterations']) // 2] * 1e3)\")"
    eval "fit_$p=\$(json \"\$data/gpu-als-$p.json\" \"'%.6f' % d['final_fit']\")"
    # The phases of iterations 2 to $iters: the timings of this run less
    # those of a run of one iteration (the first pays the one-time set-up:
    # cuSOLVER's workspace, the first launch of each kernel), over
    # $iters - 1.
    "$run" --gpus 1 -q -r "$rank" --iters 1 --tol 0 --precision "$p" \
        --json "$data/gpu-als1-$p.json" "$data/$name-$p.amp"
    eval "phases_$p=\$(phases \"\$data/gpu-als-$p.json\" \"\$data/gpu-als1-$p.json\")"
    eval "upload_$p=\$(json \"\$data/gpu-als-$p.json\" \"'%.2f' % d['timings']['upload']\")"
done
gpu=$(json "$data/gpu-als-f64.json" "d.get('device', '')")

# Streamed from pinned host memory every round (--memory stream).
for p in f64 f32; do
    "$run" --gpus 1 -q --memory stream --mttkrp-only --iters 5 -r "$rank" --precision "$p" \
        --json "$data/gpu-stream-$p.json" "$data/$name-$p.amp"
    eval "stream_$p=\$(json \"\$data/gpu-stream-$p.json\" \"'%.3f' % (d['mttkrp']['seconds'] / d['mttkrp']['rounds'] * 1e3)\")"
    eval "wire_$p=\$(json \"\$data/gpu-stream-$p.json\" \"'%.1f GB/s (%.2f B/nnz)' % (d['tensor']['nnz'] * d['stream_bytes_per_nnz'] * d['tensor']['modes'] / (d['mttkrp']['seconds'] / d['mttkrp']['rounds']) / 1e9, d['stream_bytes_per_nnz'])\")"
    "$run" --gpus 1 -q --memory stream -r "$rank" --iters 5 --tol 0 --precision "$p" \
        --json "$data/gpu-als-stream-$p.json" "$data/$name-$p.amp"
    eval "sals_$p=\$(json \"\$data/gpu-als-stream-$p.json\" \"'%.3f' % (sorted(i['seconds'] for i in d['iterations'])[len(d['iterations']) // 2] * 1e3)\")"
done

# Streamed from the file's compressed chunks, decoded on the CPU threads
# every round (--memory compressed): for hosts that cannot hold the tensor.
for p in f64 f32; do
    "$run" --gpus 1 -q --memory compressed --mttkrp-only --iters 3 -r "$rank" --precision "$p" \
        --json "$data/gpu-z-$p.json" "$data/$name-$p.amp"
    eval "z_$p=\$(json \"\$data/gpu-z-$p.json\" \"'%.3f' % (d['mttkrp']['seconds'] / d['mttkrp']['rounds'] * 1e3)\")"
done

# The bytes floor per all-mode round, f64 and f32 factors.
floor=$(python3 - "$data/gpu-mttkrp-f64.json" "$data/gpu-mttkrp-f32.json" <<'EOF'
import json, sys
out = []
for path, fs in zip(sys.argv[1:], (8, 4)):
    d = json.load(open(path))
    t = d['tensor']
    vs = 4 if t['values'] == 'f32' else 8
    R = d['rank']
    rows = sum(t['compact_dims'])
    total = 0
    for m in range(t['modes']):
        total += t['nnz'] * (8 + vs) + (rows - t['compact_dims'][m]) * R * fs + t['compact_dims'][m] * R * fs
    sec = d['mttkrp']['seconds'] / d['mttkrp']['rounds']
    out.append('%.2f GB floor, %.0f GB/s, %.1f%% of 4.0 TB/s' % (total / 1e9, total / sec / 1e9, total / sec / 4e12 * 100))
print(' | '.join(out))
EOF
)

coo64=- coo32=- torch32=-
if [ "$peers" != 0 ]; then
    coo="$data/coo-mttkrp"
    if [ ! -x "$coo" ] && command -v nvcc >/dev/null 2>&1; then
        nvcc -O3 -arch=sm_90 -Xcompiler -fopenmp -o "$coo" "$baselines/coo-mttkrp.cu"
    fi
    if [ -x "$coo" ]; then
        coo32=$("$coo" "$tns" -r "$rank" -n 5 | sed -n 's/.*all_modes_ms=\([0-9.]*\).*/\1/p')
        coo64=$("$coo" "$tns" -r "$rank" -n 5 -d | sed -n 's/.*all_modes_ms=\([0-9.]*\).*/\1/p')
    fi
    if python3 -c 'import torch, pandas' 2>/dev/null; then
        torch32=$(python3 "$baselines/torch-mttkrp.py" "$tns" --rank "$rank" --reps 5 |
                  sed -n 's/.*all_modes_ms=\([0-9.]*\).*/\1/p')
    fi
fi

ratio() { python3 -c "import sys; a, b = sys.argv[1:]; print('%.1fx' % (float(a) / float(b)) if a not in ('', '-') and b not in ('', '-') else '-')" "$1" "$2"; }

echo "| measure | f64 | f32 |"
echo "|---|---|---|"
echo "| amped all-mode MTTKRP, resident (ms, mean of $rounds rounds) | $mttkrp_f64 | $mttkrp_f32 |"
echo "| amped CP-ALS iteration (ms, median of $iters) | $als_f64 | $als_f32 |"
echo "| amped CP-ALS per-iteration GPU phases, iterations 2 to $iters (ms) | $phases_f64 | $phases_f32 |"
echo "| fit after $iters iterations | $fit_f64 | $fit_f32 |"
echo "| amped all-mode MTTKRP, streamed (ms, mean of 5) | $stream_f64 | $stream_f32 |"
echo "| ... host-to-device rate while streaming (of 55 GB/s) | $wire_f64 | $wire_f32 |"
echo "| amped CP-ALS iteration, streamed (ms, median of 5) | $sals_f64 | $sals_f32 |"
echo "| amped all-mode MTTKRP, from compressed chunks (ms, mean of 3) | $z_f64 | $z_f32 |"
echo "| to the GPU, resident: read from the file and uploaded (s) | $upload_f64 | $upload_f32 |"
echo "| coo-mttkrp all modes (ms) | $coo64 | $coo32 |"
echo "| torch-mttkrp all modes (ms) | - | $torch32 |"
echo "| speedup over coo-mttkrp | $(ratio "$coo64" "$mttkrp_f64") | $(ratio "$coo32" "$mttkrp_f32") |"
echo "| speedup over torch-mttkrp | - | $(ratio "$torch32" "$mttkrp_f32") |"
# BLCO's figures are published ones, from its authors' run of rd100m on
# an H200, not measured here: a ratio to them means something only there.
blco=0
[ "$name" = rd100m ] && printf '%s\n' "$gpu" | grep -q 'H200' && blco=1
if [ "$blco" = 1 ]; then
    echo "| BLCO all modes 22 ms (published, H200; not measured here): ratio | $(ratio 22 "$mttkrp_f64") | - |"
    echo "| BLCO CP-ALS iteration 33.8 ms (published, H200; not measured here): ratio | $(ratio 33.8 "$als_f64") | - |"
    echo "| BLCO streaming all modes 66 ms (published, H200; not measured here): ratio | $(ratio 66 "$stream_f64") | - |"
fi
echo
echo "MTTKRP against its bytes floor (f64 | f32): $floor"
if [ "$blco" = 0 ]; then
    echo "No ratios to BLCO: its published figures are of rd100m on an H200; this run is of"
    echo "$name on ${gpu:-a GPU that did not name itself}."
fi

fi

# The constrained methods (issue 25) on one GPU, resident, f64: seconds
# per iteration against CP-ALS's, and the update phase (rows brought to
# the model's scale, AO-ADMM's factorization, the update kernel) against
# its bytes floor: M read, the factor read and written (and AO-ADMM's dual
# read and written) once per mode, at the device's own copy rate
# (AMP_GPU_BW bytes/s; default 3.35e12, an H100's; 4.8e12 for an H200).
echo
echo "Constrained methods, $name, rank $rank, f64, resident, $iters iterations, --constraint"
echo "nonneg (ALS: none): median ms per iteration, ratio to ALS, update ms per iteration,"
echo "its bytes floor (ms) and the multiple of it."
echo
echo "| method | ms/iter | ratio to ALS | update ms/iter | update floor ms | x floor | fit |"
echo "|---|---:|---:|---:|---:|---:|---:|"
c_json="$data/constrained.json"
c_als=
for m in als ao-admm mu hals; do
    set -- --method "$m"
    [ "$m" = als ] || set -- "$@" --constraint nonneg
    "$run" -q --gpus 1 -r "$rank" --iters "$iters" --tol 0 "$@" --json "$c_json" \
        "$data/$name-f64.amp"
    set -- $(python3 -c '
import json, statistics, sys
d = json.load(open(sys.argv[1])); t = d["tensor"]; R = d["rank"]
n = len(d["iterations"])
per_iter = 1e3 * statistics.median(i["seconds"] for i in d["iterations"])
upd = 1e3 * d["timings"]["solve" if d["method"] == "als" else "update"] / n
arrays = {"als": 2, "ao-admm": 5, "mu": 3, "hals": 3}[d["method"]]
floor = 1e3 * arrays * sum(t["compact_dims"]) * R * 8 / float(sys.argv[2])
print("%.2f %.2f %.2f %.1f %.6f" % (per_iter, upd, floor, upd / floor, d["final_fit"]))' \
        "$c_json" "${AMP_GPU_BW:-3.35e12}")
    [ -n "$c_als" ] || c_als=$1
    echo "| $m | $1 | $(python3 -c "print('%.2f' % ($1 / $c_als))") | $2 | $3 | $4 | $5 |"
done
