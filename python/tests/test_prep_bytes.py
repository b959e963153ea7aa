"""Tensor.from_coo + save writes the .amp bytes amped-prep writes from the
same nonzeros read from a ../shared/data tensor: 0- and 1-based input,
int32, int64 and uint64 index arrays, nnz x N and N x nnz, with the
provenance (name, size, XXH3-64) amped-prep records; and amped.load of the
.tns, saved, the same (issue 41)."""
import filecmp
import functools
import os
import shutil
import tempfile
import unittest

import numpy as np

from support import (TempDirCase, amped, data_file, info_source_hash, need, prep, program,
                     read_tns, xxh3_64)

TENSORS = ("alog.tns", "jf17k-5mode.tns")


@functools.lru_cache(maxsize=None)
def reference(name: str, base: int):
    """(tns path, amped-prep's .amp, indices, values, provenance) for the
    data tensor name with indices made base-based: 1 is the file as it is,
    0 a copy with every index less one."""
    src = data_file(name)
    d = tempfile.mkdtemp(prefix="amped-pyref-")
    import atexit
    atexit.register(shutil.rmtree, d, True)
    idx, vals = read_tns(src)
    if base == 0:
        tns = os.path.join(d, name.replace(".tns", "-0.tns"))
        idx = idx - 1
        with open(src) as fin, open(tns, "w") as fout:
            for line in fin:
                f = line.split()
                fout.write(" ".join([str(int(x) - 1) for x in f[:-1]] + [f[-1]]) + "\n")
    else:
        tns = src
    amp = os.path.join(d, os.path.basename(tns) + ".amp")
    prep(tns, amp, f"--index-base={base}")
    h = xxh3_64(tns)
    hi = info_source_hash(amp)
    if h is None:
        h = hi
    elif hi is not None:
        assert h == hi, f"libxxhash's XXH3 {h:016x}, amped-run --info's {hi:016x}"
    return tns, amp, idx, vals, (os.path.basename(tns), os.stat(tns).st_size, h)


class TestSameBytes(TempDirCase):
    def same_as_prep(self, name, base, dtype, layout):
        tns, amp, idx, vals, source = reference(name, base)
        need(source[2] is not None, "no XXH3 of the source (no libxxhash, and amped-run "
                                    "--info printed none)")
        a = idx.astype(dtype)
        if layout == "N x nnz":
            a = np.ascontiguousarray(a.T)
        t = amped.Tensor.from_coo(a, vals, index_base=base, source=source)
        out = self.path("py.amp")
        t.save(out)
        self.assertTrue(filecmp.cmp(out, amp, shallow=False),
                        f"{name} base {base} {np.dtype(dtype).name} {layout}: the .amp "
                        f"differs from amped-prep's ({os.path.getsize(out)} against "
                        f"{os.path.getsize(amp)} bytes)")

    def test_alog_1based(self):
        """alog.tns, 1-based, int32/int64/uint64, nnz x N and N x nnz"""
        program("amped-prep")
        for dtype in (np.int32, np.int64, np.uint64):
            for layout in ("nnz x N", "N x nnz"):
                with self.subTest(dtype=np.dtype(dtype).name, layout=layout):
                    self.same_as_prep("alog.tns", 1, dtype, layout)

    def test_alog_0based(self):
        """alog.tns less one, 0-based, int32/int64/uint64, both layouts"""
        program("amped-prep")
        for dtype in (np.int32, np.int64, np.uint64):
            for layout in ("nnz x N", "N x nnz"):
                with self.subTest(dtype=np.dtype(dtype).name, layout=layout):
                    self.same_as_prep("alog.tns", 0, dtype, layout)

    def test_jf17k_5mode(self):
        """jf17k-5mode.tns (5 modes, values f32), 1- and 0-based"""
        program("amped-prep")
        for base, dtype, layout in ((1, np.int64, "N x nnz"), (0, np.uint64, "nnz x N"),
                                    (0, np.int32, "N x nnz")):
            with self.subTest(base=base, dtype=np.dtype(dtype).name, layout=layout):
                self.same_as_prep("jf17k-5mode.tns", base, dtype, layout)

    def test_repeats_summed(self):
        """coordinates repeated (alog's nonzeros in 6 shifted copies, 79 k distinct
        entries, each given twice or three times in parts, shuffled: repeats on both
        sides of the norm's 65,536-entry blocks): from_coo, reading the arrays in
        place, writes amped-prep's bytes for the same entries in the same order, f64
        and f32-exact values"""
        program("amped-prep")
        idx, vals = read_tns(data_file("alog.tns"))
        dim0 = int(idx[:, 0].max())
        idx = np.vstack([idx + [j * dim0, 0, 0] for j in range(6)])
        vals = np.concatenate([vals * (j + 1) for j in range(6)])
        rng = np.random.default_rng(41)
        for label, v in (("f64", vals), ("f32-exact", np.round(vals * 4) / 4)):
            with self.subTest(values=label):
                reps = np.repeat(np.arange(len(v)), rng.integers(2, 4, len(v)))
                order = rng.permutation(len(reps))
                ridx = idx[reps[order]]
                # Each part a value of its own: the sums depend on the order.
                rval = v[reps[order]] * rng.choice([0.5, 0.25, 1.0, 2.0], len(reps))
                tns = self.path(f"rep-{label}.tns")
                with open(tns, "w") as f:
                    for row, x in zip(ridx, rval):
                        f.write(" ".join(str(int(i)) for i in row) + f" {float(x)!r}\n")
                amp = self.path(f"rep-{label}.amp")
                prep(tns, amp)
                h = xxh3_64(tns)
                need(h is not None, "no libxxhash for the source's XXH3")
                t = amped.Tensor.from_coo(np.ascontiguousarray(ridx.T).astype(np.uint32),
                                          rval, index_base=1,
                                          source=(os.path.basename(tns), os.stat(tns).st_size,
                                                  h))
                self.assertEqual(t.nnz, len(v))
                out = self.path(f"rep-{label}-py.amp")
                t.save(out)
                self.assertTrue(filecmp.cmp(out, amp, shallow=False),
                                f"{label}: the .amp of repeated coordinates differs from "
                                f"amped-prep's")

    def test_hypersparse_keys(self):
        """modes of 2^40 and 2^35 indices (hypersparse: their labels searched, not
        tabled; 120-bit coordinates: block keys, the copies built, not gathered), with
        repeats: from_coo writes amped-prep's bytes"""
        program("amped-prep")
        rng = np.random.default_rng(7)
        n = 20000
        idx = np.stack([rng.integers(1, 2 ** 40, n), rng.integers(1, 50, n),
                        rng.integers(1, 2 ** 35, n)], axis=1)
        idx = np.vstack([idx, idx[rng.permutation(n)[:3000]]])
        vals = rng.random(len(idx))
        tns = self.path("hs.tns")
        with open(tns, "w") as f:
            for row, x in zip(idx, vals):
                f.write(f"{row[0]} {row[1]} {row[2]} {float(x)!r}\n")
        amp = self.path("hs.amp")
        prep(tns, amp)
        h = xxh3_64(tns)
        need(h is not None, "no libxxhash for the source's XXH3")
        t = amped.Tensor.from_coo(idx.astype(np.uint64), vals, index_base=1,
                                  source=("hs.tns", os.stat(tns).st_size, h))
        self.assertEqual(t.nnz, n)
        out = self.path("hs-py.amp")
        t.save(out)
        self.assertTrue(filecmp.cmp(out, amp, shallow=False), "the .amp differs from "
                        "amped-prep's")

    def test_load_save(self):
        """amped.load(x.tns).save(y.amp) is amped-prep's x.tns -o y.amp"""
        program("amped-prep")
        for name in TENSORS:
            with self.subTest(name=name):
                tns, amp, _, _, _ = reference(name, 1)
                out = self.path("loaded.amp")
                amped.load(tns).save(out)
                self.assertTrue(filecmp.cmp(out, amp, shallow=False),
                                f"{name}: amped.load + save differs from amped-prep")
                # And an .amp loads back as itself.
                out2 = self.path("again.amp")
                amped.load(out).save(out2)
                self.assertTrue(filecmp.cmp(out2, amp, shallow=False),
                                f"{name}: an .amp loaded and saved again differs")
                os.unlink(out)
                os.unlink(out2)

    def test_description(self):
        """shape, nnz and norm of a loaded .tns are numpy's"""
        tns, amp, idx, vals, _ = reference("alog.tns", 1)
        t = amped.load(tns)
        self.assertEqual(t.shape, tuple(int(x) for x in idx.max(axis=0)))
        self.assertEqual(t.nnz, len(np.unique(idx, axis=0)))
        self.assertAlmostEqual(t.norm, float(np.linalg.norm(vals)), places=9)


if __name__ == "__main__":
    unittest.main()
