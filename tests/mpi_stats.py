#!/usr/bin/env python3
"""The per-process statistics of amped-run under mpirun, counted again.

    mpi_stats.py FILE.amp FILE.tns REPORT.json STDOUT NPROCS

FILE.amp must be stored uncompressed (amped-prep --level 0). From the file
itself, read as man/amped.5 describes it (header, directory, META, each
mode's MODE and RELABEL sections), this takes each mode's shards (their
row ranges); from FILE.tns (1-based, duplicates summed as amped-prep's
default does) it counts each shard's nonzeros itself; it deals the
shards to the processes as amped-run's partition does (largest shard
first, ties to the lower shard number, each to the process with the fewest
nonzeros so far, ties to the lower process); and it compares, for every
process and mode, the shards, nonzeros and rows of the JSON report's
"processes" rows and of the table amped-run prints ("processes: N; ...",
then one line per process with its shards and nonzeros per mode), and
that each mode's counts add up to the tensor's nonzeros and nonempty
slices; and the report's tensor nonzeros, dimensions (the largest index)
and nonempty slices as counted. Prints one line per difference and exits 1 if there is any.
"""
import json
import struct
import sys


def u32(b, at):
    return struct.unpack_from("<I", b, at)[0]


def u64(b, at):
    return struct.unpack_from("<Q", b, at)[0]


def read_amp(path):
    data = open(path, "rb").read()
    if data[:4] != b"\x89AMP"[:4] and data[1:4] != b"AMP":
        raise SystemExit("%s: not an .amp file" % path)
    dir_offset = u64(data, 24)
    entry_size = u32(data, dir_offset + 8)
    count = u64(data, dir_offset + 16)
    secs = []
    for i in range(count):
        e = dir_offset + 24 + i * entry_size
        typ, flags = struct.unpack_from("<HH", data, e)
        mode, shard, seq = struct.unpack_from("<III", data, e + 4)
        offset, stored, raw = struct.unpack_from("<QQQ", data, e + 16)
        if flags & 1:
            raise SystemExit("%s: section %d is compressed; prepare with --level 0" % (path, i))
        secs.append((typ, mode, data[offset:offset + stored]))
    meta = [s for s in secs if s[0] == 1][0][2]
    nmodes = u32(meta, 0)
    nnz = u64(meta, 8)
    cdims = [u64(meta, 40 + 8 * nmodes + 8 * i) for i in range(nmodes)]
    shards, relabel = {}, {}
    for typ, mode, p in secs:
        if typ == 2:
            ns = u32(p, 8)
            at = 24 + 4 * nmodes
            shards[mode] = [(u64(p, at + 32 * s), u64(p, at + 32 * s + 8), u64(p, at + 32 * s + 16))
                            for s in range(ns)]
        elif typ == 3:
            relabel[mode] = list(struct.unpack_from("<%dQ" % (len(p) // 8), p, 0))
    return nmodes, nnz, cdims, shards, relabel


def main():
    amp, tns, report, stdout, nprocs = sys.argv[1:6]
    nprocs = int(nprocs)
    nmodes, nnz, cdims, shards, relabel = read_amp(amp)
    coords = set()
    for line in open(tns):
        f = line.split()
        if not f or f[0].startswith("#"):
            continue
        coords.add(tuple(int(x) - 1 for x in f[:nmodes]))
    bad = []
    if len(coords) != nnz:
        bad.append("the .tns has %d distinct coordinates, META says %d" % (len(coords), nnz))
    want = [[{"shards": 0, "nnz": 0, "rows": 0} for _ in range(nmodes)] for _ in range(nprocs)]
    for m in range(nmodes):
        new = {orig: k for k, orig in enumerate(relabel[m])}
        distinct = sorted({c[m] for c in coords})
        if len(distinct) != cdims[m]:
            bad.append("mode %d: %d nonempty slices in the .tns, META says %d"
                       % (m + 1, len(distinct), cdims[m]))
        counted = [0] * len(shards[m])
        for c in coords:
            row = new[c[m]]
            for s, (b, e, _) in enumerate(shards[m]):
                if b <= row < e:
                    counted[s] += 1
                    break
        for s, (b, e, n) in enumerate(shards[m]):
            if counted[s] != n:
                bad.append("mode %d shard %d: %d nonzeros in the .tns, the file says %d"
                           % (m + 1, s, counted[s], n))
        load = [0] * nprocs
        for s in sorted(range(len(shards[m])), key=lambda s: (-counted[s], s)):
            p = min(range(nprocs), key=lambda p: (load[p], p))
            load[p] += counted[s]
            want[p][m]["shards"] += 1
            want[p][m]["nnz"] += counted[s]
            want[p][m]["rows"] += shards[m][s][1] - shards[m][s][0]
    doc = json.load(open(report))
    tensor = doc.get("tensor", {})
    dims = [max(c[m] for c in coords) + 1 for m in range(nmodes)]
    distinct = [len({c[m] for c in coords}) for m in range(nmodes)]
    for key, exp in (("nnz", len(coords)), ("dims", dims), ("compact_dims", distinct)):
        if tensor.get(key) != exp:
            bad.append("the report's tensor %s is %s, counted %s" % (key, tensor.get(key), exp))
    rows = doc.get("processes", [])
    if len(rows) != nprocs:
        bad.append("the report has %d rows of processes, not %d" % (len(rows), nprocs))
    for p, row in enumerate(rows[:nprocs]):
        if row.get("process") != p:
            bad.append("row %d of the report is process %s" % (p, row.get("process")))
        for key in ("shards", "nnz", "rows"):
            got = row.get(key)
            exp = [want[p][m][key] for m in range(nmodes)]
            if got != exp:
                bad.append("process %d: %s per mode %s in the report, counted %s"
                           % (p, key, got, exp))
    for key, total in (("nnz", [nnz] * nmodes), ("rows", cdims)):
        sums = [sum(r.get(key, [0] * nmodes)[m] for r in rows) for m in range(nmodes)]
        if sums != total:
            bad.append("the processes' %s add up to %s per mode, not %s" % (key, sums, total))
    # The printed table: "processes: N; per process: ..." then N lines
    # "P HOST SHARDS NNZ seconds...", per mode comma-separated.
    lines = open(stdout).read().splitlines()
    head = [i for i, l in enumerate(lines) if l.startswith("processes: %d;" % nprocs)]
    if len(head) != 1:
        bad.append("stdout has %d 'processes: %d;' lines, not 1" % (len(head), nprocs))
    else:
        for p in range(nprocs):
            f = lines[head[0] + 1 + p].split()
            exp_s = ",".join(str(want[p][m]["shards"]) for m in range(nmodes))
            exp_n = ",".join(str(want[p][m]["nnz"]) for m in range(nmodes))
            if len(f) < 4 or f[0] != str(p) or f[2] != exp_s or f[3] != exp_n:
                bad.append("stdout's line of process %d: %r, counted shards %s and nonzeros %s"
                           % (p, " ".join(f), exp_s, exp_n))
    for b in bad:
        print(b)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
