#!/usr/bin/env python3
"""Write the .amp files of the test corpus and their .expect sidecars.

Needs Python 3 and two modules from PyPI:

    pip install xxhash zstandard

The amp-*.amp files and their NAME.expect sidecars are committed, so the
tests never need Python; run this again only to change or add one:

    python3 tests/files/gen-amp.py [--prep PATH/TO/amped-prep]

(from anywhere; amped-prep defaults to $AMPED_PREP, else ../../amped-prep
from this folder, i.e. the built one in the source tree). The output is the
same bytes on every run with the same zstandard module and amped-prep build
(a different Zstandard version may compress to other, equally valid bytes).

It is a second, independent writer of the .amp format, written from the C
code of format/ (amped_format.h, format_internal.h, codec.c, writer.c):

    header (64 bytes):  magic 89 'AMP' CR LF 1A LF, u16 major, u16 minor,
        u32 flags, u64 file size, u64 directory offset, u64 directory size,
        u64 directory XXH3, u64 reserved, u64 XXH3 of the 56 bytes before it
    sections, from byte 64, each its raw bytes or one Zstandard frame
    directory: "AMPDIR\\0\\0", u32 entry size (64), u32 0, u64 count, then
        per section: u16 type, u16 flags, u32 mode, u32 shard, u32 seq,
        u64 offset, u64 stored size, u64 raw size, u64 XXH3 of the stored
        bytes, u64 count, u64 aux
    trailer (32 bytes): directory offset, size and XXH3, "AMPEND\\r\\n"

all little-endian, XXH3-64 with seed 0. Sections: META (1), MODE (2),
RELABEL (3), CHUNK (4); flags ZSTD 0x1, OPTIONAL 0x2. A CHUNK holds count
u64 words (the low 64 bits of the linearized index L = sum of index_m <<
shift_m) and then count f32 or f64 values; bits 64 and up of L are the
chunk's block key, stored once in its directory entry (aux).

Good files: two written here (3 modes; 4 modes with a 104-bit index and
nonzero block keys), a few variants a newer minor version could write, and
some made by amped-prep from the text and binary tensors of this corpus.
Bad files: each derived from amp-good-3mode.amp (one from good-basic.tns) by
one defect, with the message amped-run --verify must give; the sizes and
offsets in those messages are computed here from the layout.
"""
import argparse
import os
import shutil
import struct
import subprocess
import sys
import tempfile

try:
    import xxhash
    import zstandard
except ImportError:
    sys.exit("gen-amp.py needs the Python modules xxhash and zstandard: "
             "pip install xxhash zstandard")

HERE = os.path.dirname(os.path.abspath(__file__))

# ---- the format's constants -------------------------------------------------
MAGIC = b"\x89AMP\r\n\x1a\n"
DIR_MAGIC = b"AMPDIR\0\0"
TRAILER_MAGIC = b"AMPEND\r\n"
HEADER_SIZE, TRAILER_SIZE, DIR_HEADER_SIZE, ENTRY_SIZE = 64, 32, 24, 64
META, MODE, RELABEL, CHUNK, FIBER = 1, 2, 3, 4, 6
ZSTD, OPTIONAL = 0x1, 0x2
NO_INDEX = 0xFFFFFFFF
F32, F64 = 1, 2
BLCO64 = 1
U64 = (1 << 64) - 1

# Header field offsets.
H_MAJOR, H_MINOR, H_FLAGS, H_FILE_SIZE = 8, 10, 12, 16
H_DIR_OFFSET, H_DIR_SIZE, H_DIR_HASH, H_RESERVED, H_HASH = 24, 32, 40, 48, 56
# Field offsets inside a directory entry.
E_OFFSET, E_STORED, E_RAW, E_HASH = 16, 24, 32, 40

# Level 19: small frames; single-threaded, so the same bytes every run. The
# frame header records the content size, as the C writer's frames do.
_ZC = zstandard.ZstdCompressor(level=19, write_content_size=True, write_checksum=False)


def xxh3(b):
    return xxhash.xxh3_64_intdigest(bytes(b))


def zstd(raw):
    return _ZC.compress(bytes(raw))


def bits_for(v):
    return v.bit_length()


# ---- sections and the container ----------------------------------------------
class Section:
    """One section: its raw bytes, how it is stored, its directory fields.

    patch overrides directory fields after layout (for damaged files)."""

    def __init__(self, type, raw, mode=NO_INDEX, shard=NO_INDEX, seq=0, count=0, aux=0,
                 flags=0):
        self.type, self.mode, self.shard, self.seq = type, mode, shard, seq
        self.count, self.aux, self.flags = count, aux, flags
        self.patch = {}
        self.offset = None
        self.set_raw(raw)

    def set_raw(self, raw, stored=None):
        self.raw = bytes(raw)
        self.raw_size = len(self.raw)
        if stored is not None:
            self.stored = bytes(stored)
        else:
            self.stored = zstd(self.raw) if self.flags & ZSTD else self.raw

    def fields(self):
        f = dict(type=self.type, flags=self.flags, mode=self.mode, shard=self.shard,
                 seq=self.seq, offset=self.offset, stored_size=len(self.stored),
                 raw_size=self.raw_size, hash=xxh3(self.stored), count=self.count,
                 aux=self.aux)
        f.update(self.patch)
        return f

    def key(self):
        return (self.type, self.mode, self.shard, self.seq)


def encode_entry(f, entry_size=ENTRY_SIZE, extra=b""):
    e = struct.pack("<HHIIIQQQQQQ", f["type"], f["flags"], f["mode"], f["shard"], f["seq"],
                    f["offset"], f["stored_size"], f["raw_size"], f["hash"], f["count"],
                    f["aux"])
    assert len(e) == ENTRY_SIZE
    e += extra
    return e + b"\0" * (entry_size - len(e))


def encode_header(file_size, dir_offset, dir_size, dir_hash, major=1, minor=0, flags=0,
                  reserved=0):
    h = MAGIC + struct.pack("<HHIQQQQQ", major, minor, flags, file_size, dir_offset,
                            dir_size, dir_hash, reserved)
    return h + struct.pack("<Q", xxh3(h))


def rehash_header(data):
    """The header checksum recomputed over (possibly changed) fields."""
    d = bytearray(data)
    d[H_HASH:HEADER_SIZE] = struct.pack("<Q", xxh3(d[:H_HASH]))
    return bytes(d)


def set_u64(data, at, v):
    d = bytearray(data)
    d[at:at + 8] = struct.pack("<Q", v & U64)
    return bytes(d)


def set_u16(data, at, v):
    d = bytearray(data)
    d[at:at + 2] = struct.pack("<H", v)
    return bytes(d)


def flip(data, at, bit=0):
    d = bytearray(data)
    d[at] ^= 1 << bit
    return bytes(d)


class Built:
    """A laid-out file: its bytes and where everything went."""

    def __init__(self, data, secs, dir_secs, dir_offset, dir_size):
        self.data, self.secs, self.dir_secs = data, secs, dir_secs
        self.dir_offset, self.dir_size = dir_offset, dir_size
        self.size = len(data)

    def entry_at(self, sec):
        """Byte offset of sec's directory entry (64-byte entries)."""
        i = self.dir_secs.index(sec)
        return self.dir_offset + DIR_HEADER_SIZE + i * ENTRY_SIZE

    def index(self, sec):
        return self.dir_secs.index(sec)


def build(secs, dir_order=None, major=1, minor=0, flags=0, entry_size=ENTRY_SIZE,
          entry_extra=b"", tail=b""):
    """Sections in file order; dir_order: the same sections in directory order.
    tail: bytes after the last section (not listed), before the directory."""
    out = bytearray(HEADER_SIZE)
    for s in secs:
        s.offset = len(out)
        out += s.stored
    out += tail
    dir_secs = list(secs if dir_order is None else dir_order)
    d = DIR_MAGIC + struct.pack("<IIQ", entry_size, 0, len(dir_secs))
    d += b"".join(encode_entry(s.fields(), entry_size, entry_extra) for s in dir_secs)
    dir_offset, dir_hash = len(out), xxh3(d)
    out += d
    out += struct.pack("<QQQ", dir_offset, len(d), dir_hash) + TRAILER_MAGIC
    out[:HEADER_SIZE] = encode_header(len(out), dir_offset, len(d), dir_hash, major, minor,
                                      flags)
    return Built(bytes(out), secs, dir_secs, dir_offset, len(d))


def find(secs, type, mode=NO_INDEX, shard=NO_INDEX, seq=0):
    for s in secs:
        if s.key() == (type, mode, shard, seq):
            return s
    raise KeyError((type, mode, shard, seq))


def nsections(data):
    """Sections an .amp file lists (from its header and directory)."""
    dir_offset = struct.unpack_from("<Q", data, H_DIR_OFFSET)[0]
    return struct.unpack_from("<Q", data, dir_offset + 16)[0]


# ---- a tensor, its relabelling, shards, layouts and chunks -------------------
class Rng:
    """splitmix64: the same numbers in every Python."""

    def __init__(self, seed):
        self.s = seed & U64

    def next(self):
        self.s = (self.s + 0x9E3779B97F4A7C15) & U64
        z = self.s
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & U64
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & U64
        return z ^ (z >> 31)

    def below(self, n):
        return self.next() % n


def random_tensor(dims, nnz, seed, unused, value):
    """nnz distinct coordinates (0-based), avoiding the slices in unused
    (mode -> set of indices), so that some slices are empty; value(k)."""
    rng = Rng(seed)
    seen, coords = set(), []
    while len(coords) < nnz:
        c = tuple(rng.below(d) for d in dims)
        if c in seen or any(c[m] in unused.get(m, ()) for m in range(len(dims))):
            continue
        seen.add(c)
        coords.append(c)
    return [(c, value(k)) for k, c in enumerate(coords)]


def relabel(nz, mode):
    """new label -> original index: heaviest slice first, ties by index."""
    deg = {}
    for c, _ in nz:
        deg[c[mode]] = deg.get(c[mode], 0) + 1
    return sorted(deg, key=lambda i: (-deg[i], i))


class Layout:
    def __init__(self, mode, nmodes, shift, width, chunk_nnz, shards):
        self.mode, self.nmodes = mode, nmodes
        self.shift, self.width = list(shift), list(width)
        self.chunk_nnz = chunk_nnz
        self.shards = shards          # [begin, end, nnz, nchunks] per shard

    def linear(self, idx):
        L = 0
        for m in range(self.nmodes):
            if self.width[m]:
                assert idx[m] < (1 << self.width[m])
                L |= idx[m] << self.shift[m]
        return L & U64, L >> 64       # word, block key

    def raw(self):
        b = struct.pack("<IIIIQ", self.mode, BLCO64, len(self.shards), self.nmodes,
                        self.chunk_nnz)
        for m in range(self.nmodes):
            b += struct.pack("<BBH", self.shift[m], self.width[m], 0)
        for begin, end, nnz, nchunks in self.shards:
            b += struct.pack("<QQQII", begin, end, nnz, nchunks, 0)
        return b


def packed_layout(cdims, d):
    """Each field as narrow as its compact dimension allows, the output mode
    on top, the other modes below it, the last mode lowest."""
    n = len(cdims)
    width = [bits_for(c - 1) for c in cdims]
    shift, cursor = [0] * n, 0
    for i in [i for i in reversed(range(n)) if i != d] + [d]:
        shift[i] = cursor if width[i] else 0
        cursor += width[i]
    return shift, width


def encode_meta(nmodes, vt, nnz, norm_sq, dims, cdims, source_name="", writer="",
                params="", source_size=0, source_hash=0):
    b = struct.pack("<IIQdQQ", nmodes, vt, nnz, norm_sq, source_size, source_hash)
    b += struct.pack("<%dQ" % nmodes, *dims) + struct.pack("<%dQ" % nmodes, *cdims)
    for t in (source_name, writer, params):
        t = t.encode()
        b += struct.pack("<I", len(t)) + t
    return b


def chunk_raw(words, vals, vt):
    n = len(words)
    return struct.pack("<%dQ" % n, *words) + struct.pack(("<%df" if vt == F32 else "<%dd") % n,
                                                         *vals)


class Model:
    """A whole tensor file's content before it is laid out."""

    def __init__(self, dims, nz, vt, nshards, chunk_nnz, layout_of, flags_of, writer, params):
        n = len(dims)
        self.dims, self.nmodes, self.vt = dims, n, vt
        self.maps = [relabel(nz, m) for m in range(n)]
        self.cdims = [len(mp) for mp in self.maps]
        new_of = [{o: k for k, o in enumerate(mp)} for mp in self.maps]
        # Relabelled coordinates; values rounded to what is stored.
        rnd = (lambda v: struct.unpack("<f", struct.pack("<f", v))[0]) if vt == F32 else float
        self.nz = [(tuple(new_of[m][c[m]] for m in range(n)), rnd(v)) for c, v in nz]
        self.norm_sq = sum(v * v for _, v in self.nz)
        self.meta = Section(META, encode_meta(n, vt, len(nz), self.norm_sq, dims, self.cdims,
                                              writer=writer, params=params),
                            flags=flags_of(META, None))
        self.layouts, self.mode_secs, self.relabel_secs, self.chunks = [], [], [], []
        self.orders = []   # per mode, per shard: the coordinates in file order
        self.splits_by_key = 0
        for d in range(n):
            shift, width = layout_of(self.cdims, d)
            c, S = self.cdims[d], nshards[d]
            bounds = [c * s // S for s in range(S + 1)]
            shards, chunks = [], []
            self.orders.append([])
            for s in range(S):
                rows = [e for e in self.nz if bounds[s] <= e[0][d] < bounds[s + 1]]
                lay = Layout(d, n, shift, width, chunk_nnz, [])
                # Rows ascending; within a row, nonzeros of one block key together.
                rows.sort(key=lambda e: (e[0][d], lay.linear(e[0])[1], lay.linear(e[0])[0]))
                self.orders[d].append([e[0] for e in rows])
                seq, cur = 0, []
                for e in rows + [None]:
                    key = lay.linear(e[0])[1] if e is not None else None
                    if cur and (e is None or len(cur) == chunk_nnz or key != cur[0][1]):
                        if e is not None and len(cur) < chunk_nnz and e[0][d] == cur[-1][2]:
                            self.splits_by_key += 1
                        words = [w for w, _, _, _ in cur]
                        vals = [v for _, _, _, v in cur]
                        chunks.append(Section(CHUNK, chunk_raw(words, vals, vt), mode=d,
                                              shard=s, seq=seq, count=len(cur), aux=cur[0][1],
                                              flags=flags_of(CHUNK, d)))
                        seq, cur = seq + 1, []
                    if e is not None:
                        w, k = lay.linear(e[0])
                        cur.append((w, k, e[0][d], e[1]))
                shards.append([bounds[s], bounds[s + 1], len(rows), seq])
            lay = Layout(d, n, shift, width, chunk_nnz, shards)
            self.layouts.append(lay)
            self.mode_secs.append(Section(MODE, lay.raw(), mode=d, flags=flags_of(MODE, d)))
            self.relabel_secs.append(Section(RELABEL, struct.pack("<%dQ" % c, *self.maps[d]),
                                             mode=d, count=c, flags=flags_of(RELABEL, d)))
            self.chunks.append(chunks)

    def file_order(self):
        """META, then per mode its layout, relabelling and chunks (as amped-prep)."""
        out = [self.meta]
        for d in range(self.nmodes):
            out += [self.mode_secs[d], self.relabel_secs[d]] + self.chunks[d]
        return out


# The 3-mode tensor: 8 x 6 x 7, 30 nonzeros, f32 values; slice 3 of mode 1
# and slice 5 of mode 3 are empty, so compaction drops them (compact 7 x 6 x 6
# or fewer). Shards 3, 2, 3; chunks of at most 4 nonzeros. META and MODE are
# stored as they are, RELABEL compressed, mode 1 and 3 chunks compressed,
# mode 2 chunks stored uncompressed.
def model_3mode():
    nz = random_tensor([8, 6, 7], 30, 1, {0: {3}, 2: {5}},
                       lambda k: (k % 7 - 3) * 0.75 + (0.5 if k % 7 == 3 else 0.0))

    def flags_of(type, d):
        if type == RELABEL or (type == CHUNK and d != 1):
            return ZSTD
        return 0

    return Model([8, 6, 7], nz, F32, [3, 2, 3], 4, packed_layout, flags_of,
                 "gen-amp.py (tests/files)", "shards=3,2,3\nchunk-nnz=4\n")


# The 4-mode tensor: 5 x 9 x 4 x 30, 24 nonzeros, f64 values. Each field is
# 20 bits wide, wider than the compact dimensions need (allowed: a field
# must only be wide enough), at bits 0, 22, 62 and 84 (output mode on top):
# a 104-bit index whose bits 64 and up are the block key, so the key holds
# the output row and the top bits of the mode at bit 62, and a row's
# nonzeros fall into several chunks where that mode's index crosses a
# multiple of 4. Everything compressed but the mode 1 and 3 chunks; the
# directory lists the sections in reverse file order.
def layout_4mode(cdims, d):
    n = len(cdims)
    shift, width = [0] * n, [20] * n
    for i, s in zip([i for i in reversed(range(n)) if i != d] + [d], [0, 22, 62, 84]):
        shift[i] = s
    return shift, width


def model_4mode():
    nz = random_tensor([5, 9, 4, 30], 24, 4, {},
                       lambda k: (k + 1) * 0.1 * (-1 if k % 3 == 0 else 1))

    def flags_of(type, d):
        return 0 if type == CHUNK and d in (0, 2) else ZSTD

    return Model([5, 9, 4, 30], nz, F64, [2, 2, 2, 2], 3, layout_4mode, flags_of,
                 "gen-amp.py (tests/files)", "fields=20 bits at 0,22,62,84\nchunk-nnz=3\n")


# ---- writing the corpus ----------------------------------------------------
written = []


def put(name, data, status, text):
    """name and its sidecar: exit status, the text stdout (0) or stderr
    (otherwise) must hold, and the options: amped-run --verify FILE."""
    assert name.startswith("amp-good-" if status == 0 else "amp-bad-") and name.endswith(".amp")
    assert len(data) <= 8192, name
    with open(os.path.join(HERE, name), "wb") as f:
        f.write(data)
    with open(os.path.join(HERE, name + ".expect"), "w") as f:
        f.write("%d\n%s\n--verify\n" % (status, text))
    written.append(name)


def put_good(name, data):
    put(name, data, 0, "OK: header, directory and all %d sections verified" % nsections(data))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--prep", default=os.environ.get("AMPED_PREP",
                                                     os.path.join(HERE, "..", "..",
                                                                  "amped-prep")),
                    help="amped-prep to write the good-prep files with "
                         "(default: $AMPED_PREP, else ../../amped-prep from here)")
    args = ap.parse_args()
    if not (os.path.isfile(args.prep) and os.access(args.prep, os.X_OK)):
        sys.exit("gen-amp.py: no amped-prep at %s (build it, or give --prep PATH)" % args.prep)

    for old in os.listdir(HERE):
        if old.startswith("amp-") and (old.endswith(".amp") or old.endswith(".amp.expect")):
            os.remove(os.path.join(HERE, old))

    # ---- good: written here --------------------------------------------------
    m3 = model_3mode()
    assert any(c.flags & ZSTD for c in m3.chunks[0]) and not m3.chunks[1][0].flags & ZSTD
    assert all(lay.shards[0][3] >= 3 for lay in m3.layouts), "shards of several chunks"
    base = build(m3.file_order())
    put_good("amp-good-3mode.amp", base.data)

    m4 = model_4mode()
    assert all(lay.shift[lay.mode] + lay.width[lay.mode] == 104 for lay in m4.layouts)
    assert m4.splits_by_key > 0, "some chunk must end where the block key changes"
    assert any(c.aux != 0 for cs in m4.chunks for c in cs)
    order4 = [m4.meta] + m4.mode_secs + m4.relabel_secs + sum(m4.chunks, [])
    four = build(order4, dir_order=list(reversed(order4)))
    put_good("amp-good-4mode-key.amp", four.data)

    # What a later minor version (1.1) may add: an optional section of a type
    # this reader does not know (skipped), here between META and the rest ...
    m = model_3mode()
    note = Section(200, b"a section of format 1.1 that format 1.0 readers skip\n" * 4,
                   flags=OPTIONAL | ZSTD)
    secs = m.file_order()
    put_good("amp-good-optional-section.amp", build(secs[:1] + [note] + secs[1:], minor=1).data)
    # ... and longer directory entries (72 bytes: readers read the 64 they know).
    put_good("amp-good-entry-72.amp",
             build(model_3mode().file_order(), minor=1, entry_size=72,
                   entry_extra=struct.pack("<Q", 0x0123456789ABCDEF)).data)

    # ---- good: written by amped-prep -------------------------------------------
    tmp = tempfile.mkdtemp(prefix="gen-amp.")
    try:
        for name, src, opts in [
                ("amp-good-prep-basic.amp", "good-basic.tns", ["--shards", "2", "--chunk-nnz", "2"]),
                ("amp-good-prep-2mode-f64-stored.amp", "good-2mode.tns",
                 ["--shards", "2", "--values", "f64", "--level", "0"]),
                ("amp-good-prep-hypersparse.amp", "good-huge-index.tns", ["--shards", "2"]),
                ("amp-good-prep-narrow.amp", "good-narrow.bin",
                 ["--shards", "3", "--chunk-nnz", "1", "--level", "19"]),
                ("amp-good-prep-dup.amp", "good-duplicates.tns", ["--chunk-nnz", "3"])]:
            out = os.path.join(tmp, name)
            run = subprocess.run([args.prep, "-q", "-t", "1"] + opts +
                                 ["-o", out, os.path.join(HERE, src)],
                                 stderr=subprocess.PIPE, universal_newlines=True)
            if run.returncode != 0:
                sys.exit("gen-amp.py: %s failed:\n%s" % (args.prep, run.stderr))
            with open(out, "rb") as f:
                put_good(name, f.read())
    finally:
        shutil.rmtree(tmp)

    # ---- bad: the wrong file, damaged in transit --------------------------------
    data, size = base.data, base.size

    def bad(name, data, text):
        put(name, data, 1, "%s: %s" % (name, text))

    bad("amp-bad-empty.amp", b"", "empty file (0 bytes), not an .amp file")
    bad("amp-bad-magic.amp", b"\x89PNG\r\n\x1a\n" + data[8:],
        "not an .amp file (wrong magic bytes)")
    with open(os.path.join(HERE, "good-basic.tns"), "rb") as f:
        bad("amp-bad-tns-text.amp", f.read(),
            "not an .amp file: it starts with text (a .tns tensor?")
    bad("amp-bad-crlf-to-lf.amp", data.replace(b"\r\n", b"\n"),
        "not a valid .amp file: its CR LF was turned into LF (copied in text mode?)")
    bad("amp-bad-lf-to-crlf.amp", data.replace(b"\n", b"\r\n"),
        "not a valid .amp file: its LF was turned into CR LF (copied in text mode?)")
    bad("amp-bad-7bit.amp", bytes(b & 0x7F for b in data),
        "not a valid .amp file: the high bit of its bytes was stripped")

    # ---- bad: truncated at each boundary ------------------------------------------
    c0 = find(base.secs, CHUNK, 0, 0, 0)

    def cut(name, n):
        assert 0 < n < size
        if n < HEADER_SIZE:
            text = "truncated: %d bytes, shorter than the 64-byte header" % n
        else:
            text = "truncated: %d of %d bytes are there; %s" % (
                n, size, "the directory and trailer are missing" if n <= base.dir_offset
                else "the directory is cut short and the trailer is missing"
                if n < size - TRAILER_SIZE else "the trailer is missing")
        bad(name, data[:n], text)

    cut("amp-bad-trunc-in-header.amp", 40)
    cut("amp-bad-trunc-after-header.amp", HEADER_SIZE)
    cut("amp-bad-trunc-in-chunk.amp", c0.offset + len(c0.stored) // 2)
    cut("amp-bad-trunc-after-chunk.amp", c0.offset + len(c0.stored))
    cut("amp-bad-trunc-before-dir.amp", base.dir_offset)
    cut("amp-bad-trunc-in-dir.amp", base.dir_offset + DIR_HEADER_SIZE + 3 * ENTRY_SIZE + 20)
    cut("amp-bad-trunc-before-trailer.amp", size - TRAILER_SIZE)
    cut("amp-bad-trunc-in-trailer.amp", size - 8)
    bad("amp-bad-trailing-bytes.amp", data + b"\0" * 16,
        "16 bytes follow the end of the file (header says %d bytes)" % size)

    # ---- bad: header --------------------------------------------------------------
    bad("amp-bad-version-2.0.amp", rehash_header(set_u16(set_u16(data, H_MAJOR, 2), H_MINOR, 0)),
        "format version 2.0; this amped reads versions 1.0 to 1.x (the file is newer: "
        "upgrade amped)")
    # A bit flip in the major version reads as a newer version: the version
    # is checked before the checksum, as a later major version may lay out
    # its header differently.
    bad("amp-bad-version-bitflip.amp", flip(data, H_MAJOR, 1),
        "format version 3.0; this amped reads versions 1.0 to 1.x")
    bad("amp-bad-header-bitflip.amp", flip(data, H_DIR_OFFSET + 1, 3),
        "header checksum mismatch (stored")
    flagged = bytearray(data)
    flagged[H_FLAGS] = 1
    bad("amp-bad-header-flags.amp", rehash_header(flagged),
        "header: flags 0x1 name features this amped does not know")
    past = size + 4096
    bad("amp-bad-dir-past-end.amp", rehash_header(set_u64(data, H_DIR_OFFSET, past)),
        "header: directory at byte %d, %d bytes long, does not end where the %d-byte file's "
        "trailer starts" % (past, base.dir_size, size))
    # The directory placed inside the trailer, its size the negative distance
    # to the trailer (mod 2^64), the trailer agreeing: all checksums valid.
    inside = size - 10
    wrap = (size - TRAILER_SIZE - inside) & U64
    d = set_u64(set_u64(data, H_DIR_OFFSET, inside), H_DIR_SIZE, wrap)
    d = set_u64(set_u64(d, size - TRAILER_SIZE, inside), size - TRAILER_SIZE + 8, wrap)
    bad("amp-bad-dir-wrap.amp", rehash_header(d),
        "header: directory at byte %d, %d bytes long, does not end where the %d-byte file's "
        "trailer starts" % (inside, wrap, size))

    # ---- bad: trailer and directory -----------------------------------------------
    bad("amp-bad-trailer.amp", flip(data, size - 2, 0),
        "trailer is damaged or disagrees with the header")
    e0 = base.entry_at(c0)
    bad("amp-bad-dir-bitflip.amp", flip(data, e0 + E_OFFSET, 2),
        "directory checksum mismatch (stored")
    bad("amp-bad-chunk-hash-bitflip.amp", flip(data, e0 + E_HASH + 5, 6),
        "directory checksum mismatch (stored")
    m = model_3mode()
    dm = build(m.file_order())
    d = bytearray(dm.data)
    d[dm.dir_offset + 7] = 1                       # "AMPDIR\0\1"
    dh = xxh3(d[dm.dir_offset:dm.dir_offset + dm.dir_size])
    d = set_u64(set_u64(d, H_DIR_HASH, dh), dm.size - TRAILER_SIZE + 16, dh)
    bad("amp-bad-dir-magic.amp", rehash_header(d),
        "directory: bad magic, entry size 64 or entry count %d for %d bytes"
        % (len(dm.dir_secs), dm.dir_size))

    # ---- bad: directory entries, all checksums valid ----------------------------------
    m = model_3mode()
    req = Section(200, b"a section that a reader must understand\n" * 2)
    secs = m.file_order()
    b = build(secs[:1] + [req] + secs[1:])
    bad("amp-bad-required-section.amp", b.data,
        "directory entry 1: required section type 200 is unknown to this reader (format 1.1); "
        "the file needs a newer amped")

    m = model_3mode()
    b = build(m.file_order())
    a0 = find(b.secs, CHUNK, 0, 0, 0)
    a1 = find(b.secs, CHUNK, 0, 0, 1)
    assert a0.flags & ZSTD and a1.offset == a0.offset + len(a0.stored)
    a0.patch["stored_size"] = len(a0.stored) + 8
    b = build(m.file_order())
    bad("amp-bad-overlap.amp", b.data,
        "directory: mode 1 shard 0 chunk 1 overlaps mode 1 shard 0 chunk 0")

    m = model_3mode()
    m.meta.patch["offset"] = 16
    b = build(m.file_order())
    bad("amp-bad-outside.amp", b.data,
        "directory entry 0 (metadata section (META)): bytes [16, +%d) lie outside the data "
        "area [64, %d)" % (len(m.meta.stored), b.dir_offset))

    # A chunk listed twice: its bytes written again after the last section.
    m = model_3mode()
    dup = find(m.chunks[0], CHUNK, 0, 1, 0)
    again = Section(CHUNK, dup.raw, mode=0, shard=1, seq=0, count=dup.count, aux=dup.aux,
                    flags=dup.flags)
    b = build(m.file_order() + [again])
    bad("amp-bad-dup-chunk.amp", b.data, "directory lists mode 1 shard 1 chunk 0 twice")

    m = model_3mode()
    gone = m.chunks[2][-1]
    b = build(m.file_order(), dir_order=[s for s in m.file_order() if s is not gone])
    bad("amp-bad-missing-chunk.amp", b.data,
        "directory: mode 3 shard %d chunk %d is missing" % (gone.shard, gone.seq))

    m = model_3mode()
    b = build([s for s in m.file_order() if s is not m.relabel_secs[1]])
    bad("amp-bad-no-relabel.amp", b.data,
        "directory has no relabelling section (RELABEL) for mode 2")

    # A relabelling 7 bytes longer than its entries (stored uncompressed).
    m = model_3mode()
    r = m.relabel_secs[0]
    r.flags = 0
    r.set_raw(r.raw + b"\0" * 7)
    b = build(m.file_order())
    bad("amp-bad-relabel-size.amp", b.data,
        "mode 1 relabelling (RELABEL): %d bytes for %d entries" % (len(r.raw), r.count))

    # An optional section whose directory entry claims 2^64-1 raw bytes.
    m = model_3mode()
    note = Section(200, b"an optional section with an impossible raw size\n" * 40,
                   flags=OPTIONAL | ZSTD)
    note.raw_size = U64
    secs = m.file_order()
    b = build(secs[:1] + [note] + secs[1:], minor=1)
    # --verify reads every section, so it must find that the frame holds far
    # fewer bytes (any message naming the section will do).
    bad("amp-bad-optional-raw-size.amp", b.data, "directory entry")

    # ---- bad: layouts (MODE), all checksums valid ------------------------------------
    m = model_3mode()
    lay = m.layouts[1]
    c = m.cdims[1]
    lay.shards[-1][1] -= 1
    m.mode_secs[1].set_raw(lay.raw())
    bad("amp-bad-shards-short.amp", build(m.file_order()).data,
        "mode 2 layout (MODE): shards cover %d of %d rows and 30 of 30 nonzeros" % (c - 1, c))

    m = model_3mode()
    lay = m.layouts[2]
    s1 = lay.shards[1]
    s1[0] += 1
    m.mode_secs[2].set_raw(lay.raw())
    bad("amp-bad-shard-gap.amp", build(m.file_order()).data,
        "mode 3 layout (MODE): shard 1 rows [%d, %d) do not continue from %d within %d rows"
        % (s1[0], s1[1], s1[0] - 1, m.cdims[2]))

    # ---- bad: chunk and relabelling content (found by --verify) -------------------------
    target = find(base.secs, CHUNK, 0, 0, 2)
    assert target.flags & ZSTD
    bad("amp-bad-chunk-bitflip.amp", flip(data, target.offset + len(target.stored) // 2, 4),
        "mode 1 shard 0 chunk 2: checksum mismatch (stored")

    # The same in sections stored as they are (level 0): their checksum is
    # all that guards them, with no Zstandard frame check behind it.
    target = find(base.secs, CHUNK, 1, 0, 1)
    assert not target.flags & ZSTD
    bad("amp-bad-stored-chunk-bitflip.amp",
        flip(data, target.offset + len(target.stored) // 2, 4),
        "mode 2 shard 0 chunk 1: checksum mismatch (stored")
    target = find(base.secs, MODE, 1)
    assert not target.flags & ZSTD
    bad("amp-bad-stored-mode-bitflip.amp",
        flip(data, target.offset + len(target.stored) // 2, 2),
        "mode 2 layout (MODE): checksum mismatch (stored")

    # Index out of range: mode 2's field of nonzero 1 set to a value that fits
    # the field but is beyond the compact dimension.
    m = model_3mode()
    lay = m.layouts[0]
    s = find(m.chunks[0], CHUNK, 0, 0, 1)
    assert s.flags & ZSTD
    words = list(struct.unpack_from("<%dQ" % s.count, s.raw))
    big = (1 << lay.width[1]) - 1
    assert big >= m.cdims[1], "mode 2's compact dimension must not be a power of two"
    words[1] = (words[1] & ~(big << lay.shift[1])) | (big << lay.shift[1])
    s.set_raw(struct.pack("<%dQ" % s.count, *words) + s.raw[8 * s.count:])
    bad("amp-bad-chunk-index.amp", build(m.file_order()).data,
        "mode 1 shard 0 chunk 1: nonzero 1 has mode 2 index %d, beyond %d" % (big, m.cdims[1]))

    # Bits above the 3-mode index in a word.
    m = model_3mode()
    lay = m.layouts[0]
    top = max(lay.shift[i] + lay.width[i] for i in range(3))
    s = find(m.chunks[0], CHUNK, 0, 1, 0)
    words = list(struct.unpack_from("<%dQ" % s.count, s.raw))
    words[0] |= 1 << 40
    s.set_raw(struct.pack("<%dQ" % s.count, *words) + s.raw[8 * s.count:])
    bad("amp-bad-chunk-highbits.amp", build(m.file_order()).data,
        "mode 1 shard 1 chunk 0: nonzero 0 sets bits outside the index fields")

    # Rows out of order inside a chunk: its first two nonzeros swapped where
    # their rows differ.
    m = model_3mode()
    lay = m.layouts[2]
    for s in m.chunks[2]:
        words = list(struct.unpack_from("<%dQ" % s.count, s.raw))
        rows = [(w >> lay.shift[2]) & ((1 << lay.width[2]) - 1) for w in words]
        k = next((k for k in range(1, s.count) if rows[k] != rows[k - 1]), None)
        if k is not None:
            break
    vals = list(struct.unpack_from("<%df" % s.count, s.raw, 8 * s.count))
    words[k - 1], words[k] = words[k], words[k - 1]
    vals[k - 1], vals[k] = vals[k], vals[k - 1]
    s.set_raw(chunk_raw(words, vals, F32))
    sh = lay.shards[s.shard]
    bad("amp-bad-chunk-order.amp", build(m.file_order()).data,
        "mode 3 shard %d chunk %d: nonzero %d has output row %d, out of order or outside the "
        "shard's rows [%d, %d)" % (s.shard, s.seq, k, rows[k - 1], sh[0], sh[1]))

    # Two chunks of a shard with their contents swapped: each in order, but
    # the second starts before the first one's last row.
    m = model_3mode()
    lay = m.layouts[0]

    def rows_of(sec):
        ws = struct.unpack_from("<%dQ" % sec.count, sec.raw)
        return [(w >> lay.shift[0]) & ((1 << lay.width[0]) - 1) for w in ws]

    x, y = next((x, y) for x, y in zip(m.chunks[0], m.chunks[0][1:])
                if x.shard == y.shard and x.count == y.count and rows_of(y)[-1] > rows_of(x)[0])
    rx, ry = rows_of(x), rows_of(y)
    xr, yr = x.raw, y.raw
    x.set_raw(yr)
    y.set_raw(xr)
    bad("amp-bad-chunk-across.amp", build(m.file_order()).data,
        "mode 1 shard %d chunk %d starts at row %d, before the previous chunk's last row %d"
        % (y.shard, y.seq, rx[0], ry[-1]))

    # Not a finite value.
    m = model_3mode()
    s = find(m.chunks[1], CHUNK, 1, 1, 0)
    s.set_raw(s.raw[:8 * s.count + 4] + struct.pack("<f", float("nan")) + s.raw[8 * s.count + 8:])
    bad("amp-bad-chunk-nan.amp", build(m.file_order()).data,
        "mode 2 shard 1 chunk 0: nonzero 1 has a value that is not a finite number")

    # Stored bytes that are no Zstandard frame, with their right checksum.
    m = model_3mode()
    s = find(m.chunks[2], CHUNK, 2, 1, 0)
    assert s.flags & ZSTD
    s.set_raw(s.raw, stored=bytes(len(s.stored)))
    bad("amp-bad-chunk-zstd.amp", build(m.file_order()).data,
        "mode 3 shard 1 chunk 0: cannot be decompressed (")

    # A valid frame of one nonzero fewer than the directory says.
    m = model_3mode()
    s = find(m.chunks[2], CHUNK, 2, 0, 0)
    assert s.flags & ZSTD and s.count >= 2
    raw, n = s.raw, s.count
    short = raw[:8 * (n - 1)] + raw[8 * n:8 * n + 4 * (n - 1)]
    s.set_raw(raw, stored=zstd(short))
    bad("amp-bad-chunk-short.amp", build(m.file_order()).data,
        "mode 3 shard 0 chunk 0: decompresses to %d bytes, the directory says %d"
        % (len(short), len(raw)))

    # Relabellings: not one-to-one, and beyond the dimension.
    m = model_3mode()
    r = m.relabel_secs[1]
    mp = list(m.maps[1])
    mp[-1] = mp[0]
    r.set_raw(struct.pack("<%dQ" % len(mp), *mp))
    bad("amp-bad-relabel-dup.amp", build(m.file_order()).data,
        "mode 2 relabelling (RELABEL): original index %d appears twice" % mp[0])

    m = model_3mode()
    r = m.relabel_secs[2]
    mp = list(m.maps[2])
    mp[1] = m.dims[2]
    r.set_raw(struct.pack("<%dQ" % len(mp), *mp))
    bad("amp-bad-relabel-range.amp", build(m.file_order()).data,
        "mode 3 relabelling (RELABEL): entry 1 is %d, beyond the dimension %d"
        % (m.dims[2], m.dims[2]))


    # ---- bad: every field the spec requires zero or within a range (issue 40) --------
    # One field wrong in each file, every checksum valid, so that the field's
    # own check is what refuses it. Header and directory first.
    d = set_u64(data, H_RESERVED, 1 << 56)     # the top byte: all 8 bytes are checked
    bad("amp-bad-header-reserved.amp", rehash_header(d), "header: reserved field is not zero")

    def dir_patched(at, value, width=4):
        """base's directory with value at byte at of it, its hash everywhere."""
        m = model_3mode()
        b = build(m.file_order())
        d = bytearray(b.data)
        o = b.dir_offset + at
        d[o:o + width] = value.to_bytes(width, "little")
        dh = xxh3(d[b.dir_offset:b.dir_offset + b.dir_size])
        d = set_u64(set_u64(d, H_DIR_HASH, dh), b.size - TRAILER_SIZE + 16, dh)
        return b, rehash_header(d)

    b, d = dir_patched(12, 1 << 24)
    bad("amp-bad-dir-reserved.amp", d, "directory: bad magic, entry size 64 or entry count "
        "%d for %d bytes" % (len(b.dir_secs), b.dir_size))
    # Entries of 68 bytes (not a multiple of 8), the directory sized for them.
    m = model_3mode()
    b = build(m.file_order(), minor=1, entry_size=68)
    bad("amp-bad-entry-size-68.amp", b.data, "directory: bad magic, entry size 68 or entry "
        "count %d for %d bytes" % (len(b.dir_secs), b.dir_size))

    # Directory entries: flag bits, and each field the section's type fixes.
    def entry_case(name, pick, field, value, text):
        """text: what follows "directory entry I " (I the entry's number)."""
        m = model_3mode()
        sec = pick(m)
        if field == "flags":
            sec.flags = value
            sec.set_raw(sec.raw)
        else:
            sec.patch[field] = value
        b = build(m.file_order())
        bad(name, b.data, "directory entry %d %s" % (b.index(sec), text))

    entry_case("amp-bad-entry-flags.amp", lambda m: m.meta, "flags", 0x10,
               "(metadata section (META)): flags 0x10 name features this "
               "amped does not know")
    entry_case("amp-bad-planar-meta.amp", lambda m: m.meta, "flags", 0x4,
               "(metadata section (META)): byte planes on a section that is "
               "not a compressed chunk")
    unused = "mode, shard, seq, count and aux must be unused"
    for field, value in (("mode", 0), ("shard", 0), ("seq", 1), ("count", 1), ("aux", 1)):
        entry_case("amp-bad-meta-%s.amp" % field, lambda m: m.meta, field, value,
                   "(metadata section (META)): " + unused)
    place = "mode, shard, seq, count or aux out of place"
    entry_case("amp-bad-mode-entry-mode.amp", lambda m: m.mode_secs[1], "mode", 3,
               "(layout section (MODE)): mode 4, and the tensor has 3 modes")
    for field, value in (("shard", 0), ("seq", 1), ("count", 1), ("aux", 1)):
        entry_case("amp-bad-mode-entry-%s.amp" % field, lambda m: m.mode_secs[1], field, value,
                   "(mode 2 layout (MODE)): " + place)
    for field, value in (("shard", 0), ("seq", 1), ("aux", 1)):
        entry_case("amp-bad-relabel-entry-%s.amp" % field, lambda m: m.relabel_secs[2], field,
                   value, "(mode 3 relabelling (RELABEL)): " + place)
    for value in (0, 5):
        m = model_3mode()
        m.chunks[1][0].patch["count"] = value
        bad("amp-bad-chunk-count-%d.amp" % value, build(m.file_order()).data,
            "mode 2 shard 0 chunk 0: %d nonzeros (allowed: 1 to 4)" % value)

    # META's fields, each out of its range.
    def meta_case(name, text, **kw):
        m = model_3mode()
        f = dict(nmodes=3, vt=F32, nnz=30, norm_sq=m.norm_sq, dims=m.dims, cdims=m.cdims,
                 writer="gen-amp.py (tests/files)", params="shards=3,2,3\nchunk-nnz=4\n")
        f.update(kw)
        m.meta.set_raw(encode_meta(f["nmodes"], f["vt"], f["nnz"], f["norm_sq"], f["dims"],
                                   f["cdims"], writer=f["writer"], params=f["params"]))
        bad(name, build(m.file_order()).data, "metadata section (META): " + text)

    meta_case("amp-bad-meta-value-type.amp", "value type 3 is neither 1 (f32) nor 2 (f64)", vt=3)
    meta_case("amp-bad-meta-value-type-0.amp", "value type 0 is neither 1 (f32) nor 2 (f64)",
              vt=0)
    meta_case("amp-bad-meta-nnz-0.amp", "no nonzeros", nnz=0)
    meta_case("amp-bad-meta-norm-negative.amp", "squared norm -1 is not a finite non-negative "
              "number", norm_sq=-1.0)
    meta_case("amp-bad-meta-norm-nan.amp", "squared norm nan is not a finite non-negative "
              "number", norm_sq=float("nan"))
    m = model_3mode()
    meta_case("amp-bad-meta-dim-0.amp", "mode 2 dimension 0 out of range",
              dims=[m.dims[0], 0, m.dims[2]])
    meta_case("amp-bad-meta-dim-huge.amp", "mode 1 dimension %d out of range" % (1 << 63 | 1),
              dims=[1 << 63 | 1, m.dims[1], m.dims[2]])
    meta_case("amp-bad-meta-compact-0.amp", "mode 3 has 0 nonempty slices, not between 1 and "
              "min(dimension %d, nonzeros 30)" % m.dims[2], cdims=[m.cdims[0], m.cdims[1], 0])
    meta_case("amp-bad-meta-compact-dims.amp", "mode 1 has %d nonempty slices, not between 1 "
              "and min(dimension %d, nonzeros 30)" % (m.dims[0] + 1, m.dims[0]),
              cdims=[m.dims[0] + 1, m.cdims[1], m.cdims[2]])
    # More slices than nonzeros (the dimension allows them).
    meta_case("amp-bad-meta-compact-nnz.amp", "mode 1 has 31 nonempty slices, not between 1 "
              "and min(dimension 40, nonzeros 30)", dims=[40, m.dims[1], m.dims[2]],
              cdims=[31, m.cdims[1], m.cdims[2]])

    # MODE's fields, each out of its range (mode 2's layout).
    def mode_case(name, text, edit):
        m = model_3mode()
        raw = bytearray(m.layouts[1].raw())
        edit(raw)
        m.mode_secs[1].set_raw(bytes(raw))
        bad(name, build(m.file_order()).data, text)

    def put32(at, v):
        return lambda raw: raw.__setitem__(slice(at, at + 4), struct.pack("<I", v))

    def put64(at, v):
        return lambda raw: raw.__setitem__(slice(at, at + 8), struct.pack("<Q", v))

    sec2 = "mode 2 layout (MODE): "
    S2 = len(m.layouts[1].shards)
    mode_case("amp-bad-mode-mode.amp", "the mode 2 layout section describes", put32(0, 2))
    mode_case("amp-bad-mode-encoding.amp", sec2 + "chunk encoding 2 is unknown to this reader",
              put32(4, 2))
    mode_case("amp-bad-mode-nmodes.amp", sec2 + "says 4 modes, the metadata 3", put32(12, 4))
    mode_case("amp-bad-mode-nshards-0.amp", sec2 + "0 shards (allowed: 1 to 1048576)",
              put32(8, 0))
    mode_case("amp-bad-mode-chunk-nnz-0.amp", sec2 + "chunk size 0 nonzeros (allowed: 1 to "
              "268435456)", put64(16, 0))
    mode_case("amp-bad-mode-chunk-nnz-over.amp", sec2 + "chunk size 268435457 nonzeros "
              "(allowed: 1 to 268435456)", put64(16, (1 << 28) + 1))
    # The reserved u16 of mode 3's field: its high byte alone.
    mode_case("amp-bad-mode-field-reserved.amp", sec2 + "reserved bytes of field 3 are not zero",
              lambda raw: raw.__setitem__(24 + 4 * 2 + 3, 1))
    # The reserved u32 of the last shard: its top byte alone.
    mode_case("amp-bad-mode-shard-reserved.amp", sec2 + "reserved bytes of shard %d are not "
              "zero" % (S2 - 1), lambda raw: raw.__setitem__(24 + 12 + 32 * (S2 - 1) + 31, 1))
    # A field wider than 64 bits, and one past bit 128.
    mode_case("amp-bad-mode-field-width.amp", sec2 + "mode 1 field at bit",
              lambda raw: raw.__setitem__(24 + 1, 65))
    mode_case("amp-bad-mode-field-shift.amp", sec2 + "mode 1 field at bit 127",
              lambda raw: raw.__setitem__(24, 127))

    # ---- fibers (format 1.1): FIBER sections ------------------------------------
    def fiber_counts(m, d, mid):
        """Per shard, the runs of one row and one index of mode mid."""
        out = []
        for rows in m.orders[d]:
            n, prev = 0, None
            for c in rows:
                n += (c[d], c[mid]) != prev
                prev = (c[d], c[mid])
            out.append(n)
        return out

    def fiber_secs(m):
        """Each mode's FIBER, the middle mode of fewest runs (ties: lower)."""
        out = []
        for d in range(m.nmodes):
            mid = min((sum(fiber_counts(m, d, k)), k) for k in range(m.nmodes) if k != d)[1]
            cnt = fiber_counts(m, d, mid)
            out.append(Section(FIBER, struct.pack("<%dQ" % len(cnt), *cnt), mode=d,
                               count=len(cnt), aux=mid, flags=OPTIONAL | ZSTD))
        return out

    def with_fibers(m, fibs):
        """META, then per mode its layout, FIBER, relabelling and chunks (as amped-prep)."""
        out = [m.meta]
        for d in range(m.nmodes):
            out += [m.mode_secs[d]] + fibs[d] + [m.relabel_secs[d]] + m.chunks[d]
        return out

    m = model_3mode()
    fibs = [[f] for f in fiber_secs(m)]
    put_good("amp-good-fiber.amp", build(with_fibers(m, fibs), minor=1).data)
    # The middle mode of mode 1's copy its own: refused at open.
    m = model_3mode()
    fibs = [[f] for f in fiber_secs(m)]
    fibs[0][0].aux = 0
    bad("amp-bad-fiber-middle.amp", build(with_fibers(m, fibs), minor=1).data,
        "mode 1 fiber counts (FIBER): middle mode 1 is not another mode of the 3")
    # Two FIBER sections for mode 3: refused at open.
    m = model_3mode()
    fibs = [[f] for f in fiber_secs(m)]
    fibs[2].append(fiber_secs(m)[2])
    bad("amp-bad-fiber-twice.amp", build(with_fibers(m, fibs), minor=1).data,
        "directory lists the mode 3 fiber counts (FIBER) twice")
    # Mode 2's shard 0 with more fibers than nonzeros: found when read (--verify).
    m = model_3mode()
    fibs = [[f] for f in fiber_secs(m)]
    f = fibs[1][0]
    cnt = list(struct.unpack("<%dQ" % f.count, f.raw))
    sh0 = m.layouts[1].shards[0]
    cnt[0] = sh0[2] + 1
    f.set_raw(struct.pack("<%dQ" % f.count, *cnt))
    bad("amp-bad-fiber-count.amp", build(with_fibers(m, fibs), minor=1).data,
        "mode 2 fiber counts (FIBER): shard 0 has %d fibers, outside its %d rows to %d nonzeros"
        % (cnt[0], sh0[1] - sh0[0], sh0[2]))

    print("gen-amp.py: wrote %d files and their .expect sidecars in %s" % (len(written), HERE))


if __name__ == "__main__":
    main()
