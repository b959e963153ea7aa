#!/bin/sh
# The GPU MTTKRP under Nsight Compute: per mode, its time, DRAM bytes read
# and written, L2 read sectors and hit rate, and the share of the device's
# DRAM bandwidth it reaches (issue 28's before/after table). One resident
# round of every mode after a warm-up round, f64 and f32.
#
# Usage: bench/ncu-mttkrp.sh FILE.amp [RANK (32)]   (from the build directory)
# Env:   AMP_GPU_BW  the device's DRAM bytes/s (default: 3.35e12, H100 SXM;
#                    4.8e12 for an H200)
#        NCU         the ncu program (default: ncu)
set -eu
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh"
amp=${1:?usage: bench/ncu-mttkrp.sh FILE.amp [RANK]}
rank=${2:-32}
bw=${AMP_GPU_BW:-3.35e12}
ncu=${NCU:-ncu}
need_built "$run"
need_python3
command -v "$ncu" >/dev/null 2>&1 || { echo "bench: no $ncu (Nsight Compute)" >&2; exit 1; }
metrics=gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum
metrics=$metrics,lts__t_sectors_op_read.sum,lts__t_sector_op_read_hit_rate.pct
metrics=$metrics,sm__throughput.avg.pct_of_peak_sustained_elapsed
for p in f64 f32; do
    out="$data/ncu-mttkrp-$p.csv"
    # Two rounds: the first warms caches and loads the kernels; the
    # kernels of the second are the ones reported.
    "$ncu" --csv --print-units base --metrics "$metrics" -k regex:mttkrp --launch-skip 0 \
        "$run" --gpus 1 -q --mttkrp-only --iters 2 -r "$rank" --precision "$p" "$amp" \
        >"$out" 2>"$data/ncu-mttkrp-$p.err" || { cat "$data/ncu-mttkrp-$p.err" >&2; exit 1; }
    python3 - "$out" "$p" "$bw" <<'PY'
import csv, sys
path, prec, bw = sys.argv[1], sys.argv[2], float(sys.argv[3])
rows = [r for r in csv.reader(l for l in open(path) if l.startswith('"'))]
head, body = rows[0], rows[1:]
ix = {k: head.index(k) for k in ("ID", "Kernel Name", "Metric Name", "Metric Unit", "Metric Value")}
launches = {}
for r in body:
    k = int(r[ix["ID"]])
    text = r[ix["Metric Value"]].replace(",", "")
    try:
        v = float(text)
    except ValueError:
        sys.exit("ncu-mttkrp: launch %d, %s: value %r is not a number" % (
            k, r[ix["Metric Name"]], text))
    unit = r[ix["Metric Unit"]]
    # Nsight Compute has spelled units both ways ("Kbyte", "KB"; "nsecond", "ns").
    scales = {"byte": 1, "B": 1, "Kbyte": 1e3, "KB": 1e3, "Mbyte": 1e6, "MB": 1e6,
              "Gbyte": 1e9, "GB": 1e9, "nsecond": 1e-9, "ns": 1e-9, "usecond": 1e-6,
              "us": 1e-6, "msecond": 1e-3, "ms": 1e-3, "second": 1, "s": 1,
              "%": 1, "sector": 1, "": 1}
    if unit not in scales:
        sys.exit("ncu-mttkrp: launch %d, %s: unit %r not known here" % (
            k, r[ix["Metric Name"]], unit))
    scale = scales[unit]
    launches.setdefault(k, {"name": r[ix["Kernel Name"]]})[r[ix["Metric Name"]]] = v * scale
ids = sorted(launches)
# The MTTKRP launches of a mode, in order: the last round's are the second half.
mine = ids[len(ids) // 2:]
print("%s: %d MTTKRP launches profiled, the second round's %d" % (prec, len(ids), len(mine)))
print("| launch | kernel | ms | DRAM read GB | DRAM written GB | L2 read sectors (M) | L2 read hit % | DRAM GB/s | of peak | SM throughput % |")
print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|")
tot_t = tot_b = 0
for k in mine:
    m = launches[k]
    t = m.get("gpu__time_duration.sum", 0)
    rd, wr = m.get("dram__bytes_read.sum", 0), m.get("dram__bytes_write.sum", 0)
    tot_t += t; tot_b += rd + wr
    print("| %d | %s | %.3f | %.2f | %.2f | %.0f | %.1f | %.0f | %.0f%% | %.0f |" % (
        k, m["name"][:40], t * 1e3, rd / 1e9, wr / 1e9,
        m.get("lts__t_sectors_op_read.sum", 0) / 1e6, m.get("lts__t_sector_op_read_hit_rate.pct", 0),
        (rd + wr) / t / 1e9 if t else 0, 100 * (rd + wr) / t / bw if t else 0,
        m.get("sm__throughput.avg.pct_of_peak_sustained_elapsed", 0)))
print("all modes: %.3f ms, %.2f GB of DRAM traffic, %.0f GB/s (%.0f%% of %.2f TB/s)" % (
    tot_t * 1e3, tot_b / 1e9, tot_b / tot_t / 1e9 if tot_t else 0,
    100 * tot_b / tot_t / bw if tot_t else 0, bw / 1e12))
PY
done
