#!/bin/sh
# amped-run on one GPU against the peers, in one job on one machine:
# rd100m (Reddit's shape, 68.8 M nonzeros, Zipf 1.2) at rank 32. Prints
# all-mode MTTKRP (tensor resident, streamed, and streamed from compressed
# chunks) and CP-ALS seconds per iteration, f64 and f32, the same for
# coo-mttkrp and torch-mttkrp, and the ratios (to BLCO's published H200
# figures only on an H200); and the MTTKRP's rate against its bytes floor
# (the copy streamed once, each factor read once, the output written
# once) and the 4.0 TB/s device link; then the constrained methods, and
# CP-ALS with the tensor as two copies remapped each mode (--memory
# remap) against every copy resident and streamed, with the device bytes
# of each.
#
# Usage: bench/bench-gpu.sh                  (from the build directory)
# Env:   AMP_BENCH_DIR   where tensors are kept (default: bench/data)
#        AMP_BASELINES   the peers' folder (default: ../shared/baselines)
#        AMP_RANK (32), AMP_ROUNDS (20 MTTKRP rounds), AMP_ITERS (10)
#        AMP_TENSOR      rd100m (default) or cpu20m
#        AMP_PEERS       0 to skip coo-mttkrp and torch-mttkrp
#        AMP_CONSTRAINED_ONLY  1: only the constrained methods' section
#        AMP_REMAP_ONLY  1: only the section of two copies remapped
#        AMP_REMAP_5MODE  1: that section also on a 5-mode tensor of 200 M
#                        nonzeros (amped-gen; 9.6 GB of FROSTT binary and
#                        the .amp with REMAP sections on disk) under a
#                        --device-memory that holds two copies, not five;
#                        only: that 5-mode table alone (no $AMP_TENSOR)
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

five=${AMP_REMAP_5MODE:-0}
[ "$five" = only ] && export AMP_REMAP_ONLY=1
if [ "$five" != only ]; then
case $name in
rd100m) need_rd100m ;;
cpu20m) need_cpu20m ;;
*) echo "bench: unknown tensor $name" >&2; exit 1 ;;
esac
# Its values have 6 decimals: f64 keeps them, f32 rounds them (on purpose).
for v in f64 f32; do
    [ -f "$data/$name-$v.amp" ] || "$prep" -q --values "$v" -o "$data/$name-$v.amp" "$tns" 2>/dev/null
done
fi

json() { python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print(eval(sys.argv[2]))" "$@"; }

if [ "${AMP_CONSTRAINED_ONLY:-0}" != 1 ] && [ "${AMP_REMAP_ONLY:-0}" != 1 ]; then
echo "## amped-run on one GPU: $name, rank $rank ($(date -u +%Y-%m-%d))"
echo
"$run" --list-devices | sed 's/^/    /'
echo

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

if [ "${AMP_REMAP_ONLY:-0}" != 1 ]; then
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
fi

# ---- two copies remapped (issue 30) -----------------------------------------
# CP-ALS per iteration (median of $iters) with the tensor held as two mode
# copies remapped each mode (--memory remap), against every copy resident
# and streamed, f64 and f32 factors on the f64 and f32 files; the tensor's
# device bytes each way as the run reports them (JSON gpus[0].tensor_bytes:
# the copies, or two and every mode's positions, and the block tables; the
# ring when streamed); the remap kernels' GPU time per remap, on their own
# stream behind each mode's update; and the positions computed at load
# against read from REMAP sections (a copy of the f64 file prepared with
# --remap-streams). Issue 30 asks for a remap iteration at most 1.15x the
# resident one and half the streamed one. Its 2/3 of the device bytes is
# not what this mode can give with every mode's positions resident:
# run/core/remap.c's header works out 44 against 48 bytes a nonzero at 3
# modes in f64 (36 against 36 in f32), 52 against 80 at 5.
remap_row() {
    python3 - "$@" <<'EOF'
import json, statistics, sys
tag, path, base = sys.argv[1], sys.argv[2], sys.argv[3]
d = json.load(open(path)); b = json.load(open(base))
g, gb = d['gpus'][0], b['gpus'][0]
ms = 1e3 * statistics.median(i['seconds'] for i in d['iterations'])
ms0 = 1e3 * statistics.median(i['seconds'] for i in b['iterations'])
r = g.get('remap')
each = '%.2f' % (1e3 * r['kernel_seconds'] / r['kernels']) if r and r['kernels'] else '-'
how = g['memory'] if not r else 'remap, %d fused, %d kernels' % (r.get('fused', 0), r['kernels'])
print('| %s | %s | %.2f | %.2f | %.3f | %.2f | %s | %.6f |' % (
    tag, how, ms, ms / ms0, g['tensor_bytes'] / 1e9,
    g['tensor_bytes'] / gb['tensor_bytes'], each, d['final_fit']))
EOF
}

if [ "${AMP_CONSTRAINED_ONLY:-0}" != 1 ]; then
if [ "$five" != only ]; then
echo
echo "Two copies remapped (--memory remap), $name, rank $rank, $iters iterations: median ms per"
echo "CP-ALS iteration and its ratio to every copy resident, the tensor's device bytes (GB) and"
echo "their ratio to resident, the remap kernel's GPU time per remap."
echo
echo "| precision | memory | ms/iter | x resident | tensor on the GPU (GB) | x resident | ms a remap | fit |"
echo "|---|---|---:|---:|---:|---:|---:|---:|"
for p in f64 f32; do
    for mem in resident remap stream; do
        "$run" --gpus 1 -q --memory "$mem" -r "$rank" --iters "$iters" --tol 0 --precision "$p" \
            --json "$data/gpu-mem-$mem-$p.json" "$data/$name-$p.amp"
    done
    # The remap kernel against the MTTKRP writing the next copy itself
    # (the default where it can: f64 values).
    "$run" --gpus 1 -q --memory remap --remap-kernel -r "$rank" --iters "$iters" --tol 0 \
        --precision "$p" --json "$data/gpu-mem-remapk-$p.json" "$data/$name-$p.amp"
    for mem in resident remap remapk stream; do
        remap_row "$p" "$data/gpu-mem-$mem-$p.json" "$data/gpu-mem-resident-$p.json"
    done
done
[ -f "$data/$name-f64-remap.amp" ] ||
    "$prep" -q --values f64 --remap-streams -o "$data/$name-f64-remap.amp" "$tns" 2>/dev/null
"$run" --gpus 1 -q --memory remap -r "$rank" --iters 1 --tol 0 \
    --json "$data/gpu-remap-read.json" "$data/$name-f64-remap.amp"
positions="'%.2f s (%d modes from the file)' % (d['gpus'][0]['remap']['positions_seconds'], d['gpus'][0]['remap']['positions_from_file'])"
echo
echo "Remap positions at load, f64: computed $(json "$data/gpu-mem-remap-f64.json" "$positions"),"
echo "read from REMAP sections $(json "$data/gpu-remap-read.json" "$positions"); the .amp file"
echo "$(du -h "$data/$name-f64.amp" | cut -f1) without them, $(du -h "$data/$name-f64-remap.amp" | cut -f1) with."
fi

if [ "$five" != 0 ]; then
    # 5 modes, 200 M draws: every copy resident needs 80 bytes a nonzero,
    # two remapped 52; --device-memory halfway between the two plans.
    # The names carry the shape and the sections: files of an earlier
    # shape or without REMAP sections must not be taken for these.
    t5="$data/gen5-77b.bin"
    a5="$data/gen5-77b-f64-remap.amp"
    # Dims of 77 index bits: wider ones (91 bits at 4M x 2M x 1M x 200K x
    # 5K) cut the copies into BLCO blocks of a few nonzeros each, and the
    # file into millions of chunks (bench/RESULTS.md, "Files of millions
    # of BLCO blocks"), which this section is not about.
    [ -f "$t5" ] || "$build/bench/amped-gen" -o "$t5" --nnz 200000000 \
        --dims 500000,200000,50000,10000,1000 --seed 5
    # With REMAP sections: auto remaps only a file that holds the positions.
    [ -f "$a5" ] || "$prep" -q --values f64 --remap-streams -o "$a5" "$t5"
    "$run" --gpus 1 -q --memory resident -r "$rank" --iters "$iters" --tol 0 \
        --json "$data/gpu-5m-resident.json" "$a5"
    cap=$(json "$data/gpu-5m-resident.json" \
        "int(d['gpus'][0]['plan']['resident'] + d['gpus'][0]['plan']['remap']) // 2")
    for mem in auto stream; do
        "$run" --gpus 1 -q --memory "$mem" --device-memory "$cap" -r "$rank" --iters "$iters" \
            --tol 0 --json "$data/gpu-5m-$mem.json" "$a5"
    done
    chose=$(json "$data/gpu-5m-auto.json" "d['gpus'][0]['memory']")
    [ "$chose" = remap ] || { echo "bench: auto chose $chose in $cap bytes, not remap" >&2; exit 1; }
    echo
    echo "5 modes ($(json "$data/gpu-5m-resident.json" "d['tensor']['nnz']") nonzeros, f64), --device-memory $cap"
    echo "(every copy resident does not fit, two remapped do): auto's choice against streaming, and"
    echo "every copy resident on the whole GPU for reference."
    echo
    echo "| run | memory | ms/iter | x resident | tensor on the GPU (GB) | x resident | ms a remap | fit |"
    echo "|---|---|---:|---:|---:|---:|---:|---:|"
    for mem in resident auto stream; do
        remap_row "$mem" "$data/gpu-5m-$mem.json" "$data/gpu-5m-resident.json"
    done
fi
fi
