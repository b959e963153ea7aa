#!/bin/sh
# amped-run on one GPU and on two, in one job on one machine: rd100m
# (Reddit's shape, 68.8 M nonzeros, Zipf 1.2) at rank 32. Prints the median
# CP-ALS iteration for each configuration (resident and streamed, f64 and
# f32, owner-computes shards, the equal-nnz ablation, rows sent behind the
# next MTTKRP, rows sent by copy engines, whole and in 2 parts) and its
# ratio to one GPU, plus the per-GPU breakdown of the 2-GPU resident f64
# runs by NCCL and by copies in 2 parts.
#
# Usage: bench/bench-multi.sh            (from the build directory)
# Env:   AMP_BENCH_DIR   where tensors are kept (default: bench/data)
#        AMP_BASELINES   powerlaw-gen's folder (default: ../shared/baselines)
#        AMP_RANK (32), AMP_ITERS (10), AMP_GPUS (2)
set -eu
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh"
rank=${AMP_RANK:-32}
iters=${AMP_ITERS:-10}
gpus=${AMP_GPUS:-2}
need_python3
have=$("$run" --list-devices 2>/dev/null | grep -c '^GPU ' || true)
[ "$have" -ge "$gpus" ] || { echo "bench: needs $gpus GPUs, found $have" >&2; exit 1; }

if [ ! -f "$data/rd100m-f64.amp" ] || [ ! -f "$data/rd100m-f32.amp" ]; then
    need_rd100m
    for v in f64 f32; do
        [ -f "$data/rd100m-$v.amp" ] || "$prep" -q --values "$v" -o "$data/rd100m-$v.amp" "$tns"
    done
fi

echo "## amped-run on 1 and $gpus GPUs: rd100m, rank $rank, $iters iterations ($(date -u +%Y-%m-%d))"
echo
"$run" --list-devices | sed 's/^/    /'
command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi topo -m 2>/dev/null | sed -n '1,4p' | sed 's/^/    /'
echo

median() {
    python3 - "$1" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
s = sorted(i["seconds"] for i in d["iterations"][1:])
print("%.3f %.10f" % (s[len(s) // 2] * 1e3, d["final_fit"]))
PY
}

# one configuration: name, precision, then amped-run options
one() {
    name=$1 p=$2
    shift 2
    "$run" -q -r "$rank" --iters "$iters" --tol 0 --precision "$p" --json "$data/multi-$name.json" \
        "$@" "$data/rd100m-$p.amp"
    set -- $(median "$data/multi-$name.json")
    eval "ms_$name=$1 fit_$name=$2"
}

one r1_f64 f64 --gpus 1
one r2_f64 f64 --gpus "$gpus" --exchange nccl
one r2o_f64 f64 --gpus "$gpus" --exchange nccl --overlap
one r2e_f64 f64 --gpus "$gpus" --exchange nccl --partition equal-nnz
one r2c_f64 f64 --gpus "$gpus" --exchange copy --send-parts 1
one r2cp_f64 f64 --gpus "$gpus" --exchange copy --send-parts 2
one r1_f32 f32 --gpus 1
one r2_f32 f32 --gpus "$gpus" --exchange nccl
one r2cp_f32 f32 --gpus "$gpus" --exchange copy --send-parts 2
one s1_f64 f64 --gpus 1 --memory stream
one s2_f64 f64 --gpus "$gpus" --memory stream --exchange nccl
one s2o_f64 f64 --gpus "$gpus" --memory stream --exchange nccl --overlap
one s2c_f64 f64 --gpus "$gpus" --memory stream --exchange copy
one s1_f32 f32 --gpus 1 --memory stream
one s2_f32 f32 --gpus "$gpus" --memory stream --exchange nccl

row() {   # label, this config, the 1-GPU config it is compared with
    eval "a=\$ms_$2 b=\$ms_$3 f=\$fit_$2"
    printf "| %s | %s | %s | %s |\n" "$1" "$a" "$(python3 -c "print('%.3f' % ($a / $b))")" "$f"
}
peer_note=" with peer access"
first=$(echo "${CUDA_VISIBLE_DEVICES:-0,1,2,3,4,5,6,7}" | cut -d, -f1-"$gpus")
CUDA_VISIBLE_DEVICES=$first "$run" --list-devices | grep -q '^peer access: between every pair' ||
    peer_note=" needs peer access, which these GPUs lack"
echo "| configuration | ms per iteration (median) | over 1 GPU | fit after $iters |"
echo "|---|---|---|---|"
row "1 GPU, resident, f64" r1_f64 r1_f64
row "$gpus GPUs, resident, f64, --exchange nccl" r2_f64 r1_f64
row "$gpus GPUs, resident, f64, --exchange nccl --overlap" r2o_f64 r1_f64
row "$gpus GPUs, resident, f64, --exchange nccl --partition equal-nnz" r2e_f64 r1_f64
row "$gpus GPUs, resident, f64, --exchange copy --send-parts 1" r2c_f64 r1_f64
row "$gpus GPUs, resident, f64, --exchange copy --send-parts 2 (the default$peer_note)" r2cp_f64 r1_f64
row "1 GPU, resident, f32" r1_f32 r1_f32
row "$gpus GPUs, resident, f32, --exchange nccl" r2_f32 r1_f32
row "$gpus GPUs, resident, f32, --exchange copy --send-parts 2 (the default$peer_note)" r2cp_f32 r1_f32
row "1 GPU, streamed, f64" s1_f64 s1_f64
row "$gpus GPUs, streamed, f64, --exchange nccl" s2_f64 s1_f64
row "$gpus GPUs, streamed, f64, --exchange nccl --overlap" s2o_f64 s1_f64
row "$gpus GPUs, streamed, f64, --exchange copy (the default$peer_note)" s2c_f64 s1_f64
row "1 GPU, streamed, f32" s1_f32 s1_f32
row "$gpus GPUs, streamed, f32, --exchange nccl" s2_f32 s1_f32
echo
echo "Owner-computes shards over equal-nnz ($gpus GPUs, resident, f64): $(python3 -c "print('%.2fx' % ($ms_r2e_f64 / $ms_r2_f64))") faster"
echo
for cf in r2_f64 r2cp_f64; do
echo "Per GPU, $gpus GPUs resident f64, rows by $(sed -n 's/.*"row_exchange": "\([a-z]*\)".*/\1/p' "$data/multi-$cf.json") (ms per iteration, all $iters iterations' mean):"
python3 - "$data/multi-$cf.json" "$iters" <<'PY'
import json, sys
d = json.load(open(sys.argv[1])); n = float(sys.argv[2])
print("| mode | gpu | nonzeros | mttkrp | busy | nccl | exchange | idle |")
print("|---|---|---|---|---|---|---|---|")
for m in range(d["tensor"]["modes"]):
    for g in d["gpus"]:
        print("| %d | %d | %d | %.3f | %.3f | %.3f | %.3f | %.3f |" % (m + 1, g["device"], g["nnz"][m],
              g["mttkrp"][m] / n * 1e3, g["busy"][m] / n * 1e3, g["comm"][m] / n * 1e3,
              g["exchange"][m] / n * 1e3, g["idle"][m] / n * 1e3))
print()
print("imbalance (largest GPU's nonzeros over the mean) per mode:", ", ".join("%.3f" % x for x in d["imbalance"]))
PY
echo
done
