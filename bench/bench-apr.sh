#!/bin/sh
# Poisson CP (CP-APR) on the CPU backend against pyttb's cp_apr (issue 42):
# seconds per outer iteration on the count tensors of ../shared/data at
# rank AMP_RANK (16), AMP_ITERS (5) outer iterations from the same start,
# pyttb's shift rule so that both compute the same iterates, on AMP_THREADS
# threads (2), by the wall clock and in CPU seconds (all threads'); the
# same log-likelihood is printed beside. Run from the
# build directory; python from AMP_PYTHON (python3), with pyttb.
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh"
need_built "$prep" "$run"
py=${AMP_PYTHON:-python3}
shared=${AMP_TEST_DATA:-$src/../shared/data}
rank=${AMP_RANK:-16} iters=${AMP_ITERS:-5} threads=${AMP_THREADS:-2}
if "$py" -c 'import pyttb' 2>/dev/null; then
    echo "| tensor | rank | outer iterations | pyttb s/iter | amped s/iter | ratio | pyttb CPU s/iter | amped CPU s/iter | CPU ratio | pyttb loglik | amped loglik | rel. diff |"
    echo "|---|---|---|---|---|---|---|---|---|---|---|---|"
    for t in splatt-med; do   # counts 1 to 5, no empty slice (pyttb keeps those rows)
        tns=$shared/$t.tns
        [ -f "$tns" ] || continue
        "$prep" -q -f -o "$data/$t.amp" "$tns" || exit 1
        "$py" "$here/apr-pyttb.py" "$run" "$tns" "$data/$t.amp" "$rank" "$iters" "$threads" "$data" || exit 1
    done
else
    echo "bench-apr: no pyttb in $py (AMP_PYTHON): the comparison with pyttb is skipped"
fi

# ---- one GPU: an inner iteration against the MTTKRP ----------------------
# On rd100m-counts (AMP_TENSOR: rd100m's samples counted, see lib.sh),
# rank AMP_GPU_RANK (32), f64: each mode's MTTKRP (--mttkrp-only,
# resident) against CP-APR's Phi passes (model values and Phi; the update
# and the KKT check are the update phase), per inner iteration and mode; a
# whole outer iteration of 10 inner iterations a mode; and streamed against
# resident. AMP_TENSOR=rd100m (reals in (0, 1)) runs with
# --allow-noninteger, the same work per nonzero.
if "$run" --list-devices >/dev/null 2>&1 && [ "${AMP_APR_GPU:-1}" != 0 ]; then
    t=${AMP_TENSOR:-rd100m-counts}
    case $t in rd100m-counts) need_rd100m_counts ;; rd100m) need_rd100m ;; cpu20m) need_cpu20m ;; esac
    amp="$data/$t.amp"
    [ -f "$amp" ] || "$prep" -q -o "$amp" "$tns" || exit 1
    R=${AMP_GPU_RANK:-32}
    "$run" "$amp" -q --gpus 1 -r "$R" --mttkrp-only --iters 5 --json "$data/apr-mttkrp.json" || exit 1
    for mem in resident stream; do
        "$run" "$amp" -q --gpus 1 --memory $mem -r "$R" --method cp-apr --allow-noninteger \
            --iters 3 --tol 0 --json "$data/apr-$mem.json" || exit 1
    done
    "$py" - "$data" "$t" "$R" <<'PY'
import json, statistics, sys
d, t, R = sys.argv[1], sys.argv[2], sys.argv[3]
m = json.load(open(f"{d}/apr-mttkrp.json"))
per_mode = [s / m["mttkrp"]["rounds"] for s in m["mttkrp"]["mode_seconds"]]
mtt = sum(per_mode) / len(per_mode)
print(f"\n{t}, rank {R}, f64, one GPU ({m.get('device', '?')}): MTTKRP {mtt * 1e3:.2f} ms a mode (mean of "
      + ", ".join(f"{x * 1e3:.2f}" for x in per_mode) + ")")
out = {}
for mem in ("resident", "stream"):
    j = json.load(open(f"{d}/apr-{mem}.json"))
    its = j["iterations"][1:]   # the first pays the start
    inner = sum(i["inner"] for i in its)
    phi = sum(i["phases"]["mttkrp"] for i in its) / inner
    upd = sum(i["phases"]["update"] for i in its) / inner
    outer = statistics.median(i["seconds"] for i in its)
    out[mem] = (phi, upd, outer)
    print(f"{mem:9s}: Phi pass {phi * 1e3:.2f} ms, update and KKT {upd * 1e3:.2f} ms an inner iteration "
          f"({(phi + upd) / mtt:.2f}x the MTTKRP); outer iteration of 10 inner a mode {outer * 1e3:.1f} ms")
r, s = out["resident"], out["stream"]
print(f"streamed over resident, per inner iteration: {(s[0] + s[1]) / (r[0] + r[1]):.3f}x")
# The bytes an inner iteration must move, mean over the modes: the mode's
# copy once (8-byte word and the value per nonzero), every factor once (the
# mode's own for the model values), Phi written, and the update's pass over
# B and Phi (read both, write B).
T, Rn = m["tensor"], int(R)
vs = 4 if T["values"] == "f32" else 8
cd = T["compact_dims"]
floor = sum(T["nnz"] * (8 + vs) + sum(cd) * Rn * 8 + 4 * c * Rn * 8 for c in cd) / len(cd)
per = r[0] + r[1]
print(f"bytes floor of an inner iteration (mean over modes) {floor / 1e9:.3f} GB: resident reaches "
      f"{floor / per / 1e9:.0f} GB/s, {floor / per / 4.0e12 * 100:.1f}% of 4.0 TB/s (the baselines' measured "
      f"device-to-device rate)")
PY
fi
