#!/bin/sh
# GCP (generalized CP by stochastic gradients and Adam, issue 43).
#
# CPU: amped-run against pyttb's gcp_opt (Adam) per epoch of 1000 steps on
# splatt-med (counts 1 to 5, ../shared/data), loss AMP_LOSS (poisson), rank
# AMP_RANK (16), AMP_EPOCHS (3) epochs, the same sample sizes (pyttb's
# defaults, which amped takes too), on AMP_THREADS threads (2). Run from
# the build directory; python from AMP_PYTHON (python3), with pyttb.
#
# One GPU (skipped unless amped-run --list-devices finds one): rank
# AMP_GPU_RANK (32) bernoulli-logit on rd100m's pattern, every stored
# entry 1 (rd100m-counts, each distinct coordinate once, its value set to
# 1), AMP_GPU_EPOCHS (2) epochs of 1000 Adam steps of 50,000 nonzeros and
# 50,000 zeros each (issue 43's 100,000 samples a step), with dense Adam
# and with lazy Adam (--adam lazy); the target is an epoch in at most 1 s.
# The bytes floor of a step is printed beside each (run/cuda/gcp.cu's
# header): the samples' gathers and atomics (8 N R bytes each a sample)
# and dense Adam's 64 R bytes for every row, lazy Adam's for the rows the
# step touches (at most min(samples, rows) a mode; printed as that bound).
# Lazy Adam also with --memory stream: the samples drawn on the host (on
# every core) and sent, 8 N + 8 bytes each, while the GPU takes the step
# before; the host's draws then set the pace.
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh"
need_built "$prep" "$run"
py=${AMP_PYTHON:-python3}
shared=${AMP_TEST_DATA:-$src/../shared/data}
loss=${AMP_LOSS:-poisson} rank=${AMP_RANK:-16} epochs=${AMP_EPOCHS:-3} threads=${AMP_THREADS:-2}
if "$py" -c 'import pyttb' 2>/dev/null; then
    echo "| tensor | loss | rank | samples | epochs | pyttb s/epoch | amped s/epoch | ratio | amped final estimate | pyttb final estimate |"
    echo "|---|---|---|---|---|---|---|---|---|---|"
    for t in splatt-med; do
        tns=$shared/$t.tns
        [ -f "$tns" ] || continue
        "$prep" -q -f -o "$data/$t.amp" "$tns" || exit 1
        "$py" "$here/gcp-pyttb.py" "$run" "$tns" "$data/$t.amp" "$loss" "$rank" "$epochs" \
            "$threads" "$data" || exit 1
    done
else
    echo "bench-gcp: no pyttb in $py (AMP_PYTHON): the comparison with pyttb is skipped"
fi

if "$run" --list-devices >/dev/null 2>&1 && [ "${AMP_GCP_GPU:-1}" != 0 ]; then
    need_rd100m_counts
    ones="$data/rd100m-ones.bin"
    if [ ! -f "$ones" ]; then
        cp "$tns" "$ones.tmp" || exit 1
        # FROSTT binary v1: the values follow the header (28 bytes) and the
        # dimensions; each distinct coordinate's count becomes 1.
        "$py" - "$ones.tmp" <<'PY' || exit 1
import sys
import numpy as np
h = np.fromfile(sys.argv[1], dtype="<u4", count=3)
iw, vw = int(h[1]), int(h[2])
modes, nnz = np.fromfile(sys.argv[1], dtype="<u8", count=2, offset=12)
at = 28 + int(modes) * iw
v = np.memmap(sys.argv[1], dtype="<f8" if vw == 8 else "<f4", mode="r+", offset=at,
              shape=(int(nnz),))
v[:] = 1
v.flush()
PY
        mv "$ones.tmp" "$ones" || exit 1
    fi
    amp="$data/rd100m-ones.amp"
    [ -f "$amp" ] || "$prep" -q -o "$amp" "$ones" || exit 1
    R=${AMP_GPU_RANK:-32}
    E=${AMP_GPU_EPOCHS:-2}
    for how in dense:resident lazy:resident lazy:stream; do
        adam=${how%:*} mem=${how#*:}
        "$run" "$amp" -q --gpus 1 --memory "$mem" -r "$R" --method gcp --loss bernoulli-logit \
            --iters "$E" --max-fails "$E" --epoch-iters 1000 --samples-grad 50000,50000 \
            --samples-loss 100000,100000 --adam "$adam" --json "$data/gcp-gpu-$adam-$mem.json" ||
            exit 1
        "$py" - "$data/gcp-gpu-$adam-$mem.json" "$R" <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))
R = int(sys.argv[2])
dims = j["tensor"]["compact_dims"]
rows = sum(dims)
N = j["tensor"]["modes"]
s = sum(j["samples_grad"])
lazy = j["adam"] == "lazy"
touched = sum(min(s, d) for d in dims) if lazy else rows
adam = (64 * R + (12 if lazy else 0)) * touched
gather = s * 16 * N * R
ep = [i["seconds"] for i in j["iterations"]]
print(f"rd100m ones (bernoulli-logit), rank {R}, one GPU ({j.get('device', '?')}), "
      f"{j['adam']} Adam, {j.get('memory', '?')}: s an epoch of 1000 steps: " + ", ".join(f"{x:.3f}" for x in ep)
      + " (target 1 s)")
print(f"  per step: Adam {adam / 1e9:.3f} GB (64 R B x {touched} rows"
      f"{', at most: the touched rows' if lazy else ''}), samples "
      f"{gather / 1e9:.3f} GB ({s} x 16 N R B); an epoch's floor "
      f"{1000 * (adam + gather) / 3.35e12:.3f} s at 3.35 TB/s (H100)")
print(f"  final loss (estimate) {j['final_loss']:.6e} after {len(ep)} epochs")
PY
    done
else
    echo "bench-gcp: no CUDA device (amped-run --list-devices fails): the GPU part is skipped"
fi
