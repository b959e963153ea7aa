#!/usr/bin/env python3
"""Write the FROSTT binary files of the test corpus and their .expect sidecars.

The .bin files and their NAME.expect sidecars are committed, so the tests
never need Python; run this again (python3 tests/files/gen-bin.py, from
anywhere) only to change or add one.
It writes from the format's description, not from amped's code:

    u32 version (1), u32 index width (4 or 8), u32 value width (4 or 8),
    u64 modes, u64 nonzeros, the dimensions (index width each),
    the values (value width each), then one index array per mode;
    all little-endian, indices 1-based.

Byte offsets in the expected messages are computed here from that layout.
"""
import os
import struct

HERE = os.path.dirname(os.path.abspath(__file__))


def layout(nmodes, nnz, iw, vw):
    """Offsets of the dimensions, the values and each mode's indices."""
    dims_off = 28
    vals_off = dims_off + nmodes * iw
    ind_off = [vals_off + nnz * vw + m * nnz * iw for m in range(nmodes)]
    return dims_off, vals_off, ind_off


def encode(dims, inds, vals, iw=8, vw=8, version=1, nmodes=None, nnz=None):
    """inds: one list of 1-based indices per mode."""
    nmodes = len(dims) if nmodes is None else nmodes
    nnz = len(vals) if nnz is None else nnz
    ic = "<I" if iw == 4 else "<Q"
    vc = "<f" if vw == 4 else "<d"
    b = struct.pack("<IIIQQ", version, iw, vw, nmodes, nnz)
    b += b"".join(struct.pack(ic, d) for d in dims)
    b += b"".join(struct.pack(vc, v) for v in vals)
    for col in inds:
        b += b"".join(struct.pack(ic, x) for x in col)
    return b


def put(name, data, status, text, options=None):
    with open(os.path.join(HERE, name), "wb") as f:
        f.write(data)
    lines = [str(status), text] + ([options] if options else [])
    with open(os.path.join(HERE, name + ".expect"), "w") as f:
        f.write("\n".join(lines) + "\n")


# The tensor of good-basic.tns: 3 modes, 3 x 3 x 3, 5 nonzeros.
BASIC_DIMS = [3, 3, 3]
BASIC_INDS = [[1, 1, 2, 3, 2], [1, 2, 1, 3, 2], [1, 3, 2, 1, 2]]
BASIC_VALS = [1.0, 2.5, -1.25, 4.0, 0.5]
basic = encode(BASIC_DIMS, BASIC_INDS, BASIC_VALS)
_, vals_off, ind_off = layout(3, 5, 8, 8)

# ---- good ----------------------------------------------------------------
put("good-basic.bin", basic, 0, "nonzeros:   5")
put("good-narrow.bin",
    encode([4, 5, 6, 7], [[1, 2, 3, 4], [5, 4, 3, 2], [1, 6, 1, 6], [7, 1, 7, 1]],
           [0.5, -1.25, 3.0, 0.125], iw=4, vw=4),
    0, "values:     min -1.25, max 3,")
put("good-wide.bin",
    encode([2**63 - 1, 3], [[2**63 - 1, 1, 4294967296], [1, 2, 3]], [1.0, 2.0, 3.0], iw=8, vw=4),
    0, "dims:       9223372036854775807 x 3")
put("good-2mode.bin",
    encode([4, 2], [[1, 2, 3, 4], [2, 1, 2, 1]], [1.0, 2.0, 3.0, 4.0], iw=4, vw=8),
    0, "modes:      2")
put("good-0based.bin",
    encode([3, 3, 3], [[x - 1 for x in col] for col in BASIC_INDS], BASIC_VALS),
    0, "0-based)", "--index-base 0")
put("good-duplicates.bin",
    encode([2, 2], [[1, 2, 1], [1, 2, 1]], [1.0, 2.0, 3.0]),
    0, "duplicates: 1")

# ---- bad: header -----------------------------------------------------------
put("bad-version.bin", encode(BASIC_DIMS, BASIC_INDS, BASIC_VALS, version=2), 1,
    "bad-version.bin: byte 0: FROSTT binary version 2; amped reads version 1")
put("bad-index-width.bin", basic[:4] + struct.pack("<I", 2) + basic[8:], 1,
    "bad-index-width.bin: byte 4: index width 2 bytes; expected 4 or 8")
put("bad-value-width.bin", basic[:8] + struct.pack("<I", 16) + basic[12:], 1,
    "bad-value-width.bin: byte 8: value width 16 bytes; expected 4 or 8")
put("bad-one-mode.bin", encode([3], [[1, 2, 3]], [1.0, 2.0, 3.0]), 1,
    "bad-one-mode.bin: byte 12: 1 modes; amped reads 2 to 32")
put("bad-too-many-modes.bin", encode([2] * 33, [[1] for _ in range(33)], [1.0]), 1,
    "bad-too-many-modes.bin: byte 12: 33 modes; amped reads 2 to 32")
put("bad-zero-nnz.bin", encode(BASIC_DIMS, [[], [], []], []), 1,
    "bad-zero-nnz.bin: byte 20: the header says 0 nonzeros")
put("bad-nnz-huge.bin", encode(BASIC_DIMS, BASIC_INDS, BASIC_VALS, nnz=2**62), 1,
    "bad-nnz-huge.bin: byte 20: nonzero count 4611686018427387904 is impossibly large")
put("bad-dim-zero.bin", encode([3, 0, 3], BASIC_INDS, BASIC_VALS), 1,
    "bad-dim-zero.bin: byte 36: dimension 0 of mode 2 is out of range")

# ---- bad: size -------------------------------------------------------------
put("bad-short-header.bin", basic[:16], 1,
    "bad-short-header.bin: truncated at byte 16 while reading the header")
put("bad-truncated.bin", basic[:-3], 1,
    "bad-truncated.bin: the header (3 modes, 5 nonzeros, 8-byte indices, 8-byte values) "
    "needs %d bytes but the file has %d (truncated)" % (len(basic), len(basic) - 3))
put("bad-trailing.bin", basic + b"\0\0\0\0\0", 1,
    "bad-trailing.bin: the header (3 modes, 5 nonzeros, 8-byte indices, 8-byte values) "
    "needs %d bytes but the file has %d (trailing bytes)" % (len(basic), len(basic) + 5))

# ---- bad: contents ---------------------------------------------------------
inds = [col[:] for col in BASIC_INDS]
inds[1][2] = 0                       # nonzero 3, mode 2
put("bad-index-zero.bin", encode(BASIC_DIMS, inds, BASIC_VALS), 1,
    "bad-index-zero.bin: byte %d: index 0 of nonzero 3 in mode 2 is outside 1..3"
    % (ind_off[1] + 2 * 8))
inds = [col[:] for col in BASIC_INDS]
inds[2][4] = 4                       # nonzero 5, mode 3
put("bad-index-over-dim.bin", encode(BASIC_DIMS, inds, BASIC_VALS), 1,
    "bad-index-over-dim.bin: byte %d: index 4 of nonzero 5 in mode 3 is outside 1..3"
    % (ind_off[2] + 4 * 8))
vals = BASIC_VALS[:]
vals[1] = float("nan")
put("bad-nan.bin", encode(BASIC_DIMS, BASIC_INDS, vals), 1,
    "bad-nan.bin: byte %d: value of nonzero 2 is not finite" % (vals_off + 8))
_, vals_off4, _ = layout(3, 5, 4, 4)
vals = BASIC_VALS[:]
vals[3] = float("-inf")
put("bad-inf-float.bin", encode(BASIC_DIMS, BASIC_INDS, vals, iw=4, vw=4), 1,
    "bad-inf-float.bin: byte %d: value of nonzero 4 is not finite" % (vals_off4 + 3 * 4))
put("bad-dims-option.bin", basic, 1,
    "bad-dims-option.bin: byte %d: index 3 of nonzero 4 in mode 1 is outside 1..2"
    % (ind_off[0] + 3 * 8), "--dims 2,3,3")
