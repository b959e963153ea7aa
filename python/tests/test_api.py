"""The package itself: the library found, its description, tensors from
arrays, and every bad argument refused before any work (issue 41)."""
import gc
import os
import tempfile
import unittest

import numpy as np

from support import TempDirCase, amped

# A small tensor, 0-based, nnz x N: 3 modes of 3 x 4 x 5.
IDX = np.array([[0, 0, 0], [1, 2, 3], [2, 1, 0], [1, 1, 1], [2, 3, 4], [0, 3, 2]])
VALS = np.array([1.0, 2.0, 3.0, 4.0, 0.5, -1.5])


class TestLibrary(unittest.TestCase):
    def test_version(self):
        """version() is the header's 0.1.x, and __version__ the same"""
        v = amped.version()
        self.assertRegex(v, r"^\d+\.\d+\.\d+")
        self.assertEqual(amped.__version__, v)

    def test_build_info(self):
        """build_info() parses the library's key: value lines, cuda among them"""
        info = amped.build_info()
        self.assertIsInstance(info, dict)
        self.assertIn("cuda", info)

    def test_devices(self):
        """devices(): a list of DeviceInfo, each with a name and memory"""
        ds = amped.devices()
        self.assertIsInstance(ds, list)
        for i, d in enumerate(ds):
            self.assertEqual(d.ordinal, i)
            self.assertTrue(d.name)
            self.assertGreater(d.total_memory, 0)
        if amped.build_info().get("cuda", "no").startswith("no"):
            self.assertEqual(ds, [])


class TestFromCoo(TempDirCase):
    def check_small(self, t, shape=(3, 4, 5)):
        self.assertEqual(t.shape, shape)
        self.assertEqual(t.ndim, 3)
        self.assertEqual(t.nnz, len(VALS))
        self.assertAlmostEqual(t.norm, float(np.sqrt(np.sum(VALS ** 2))), places=12)

    def test_layouts(self):
        """nnz x N, N x nnz, strided views and every index type give one tensor"""
        ref = amped.Tensor.from_coo(IDX, VALS)
        self.check_small(ref)
        ref.save(self.path("ref.amp"))
        want = open(self.path("ref.amp"), "rb").read()
        big = np.zeros((IDX.shape[0], 7), dtype=np.int64)
        big[:, 2:5] = IDX
        cases = {
            "N x nnz": (IDX.T, VALS),
            "N x nnz contiguous": (np.ascontiguousarray(IDX.T), VALS),
            "int32": (IDX.astype(np.int32), VALS),
            "uint32": (IDX.astype(np.uint32), VALS),
            "uint64 N x nnz": (IDX.T.astype(np.uint64), VALS),
            "int16 (converted)": (IDX.astype(np.int16), VALS),
            "uint8 (converted)": (IDX.astype(np.uint8), VALS),
            "big-endian (converted)": (IDX.astype(">i8"), VALS),
            "a strided view": (big[:, 2:5], VALS),
            "every other row": (np.repeat(IDX, 2, axis=0)[::2], VALS),
            "float32 values": (IDX, VALS.astype(np.float32)),
            "strided values": (IDX, np.repeat(VALS, 3)[::3]),
            "lists": (IDX.tolist(), VALS.tolist()),
            "(nnz, 1) values": (IDX, VALS[:, None]),
        }
        for name, (idx, vals) in cases.items():
            with self.subTest(name):
                t = amped.Tensor.from_coo(idx, vals)
                self.check_small(t)
                t.save(self.path("x.amp"))
                self.assertEqual(open(self.path("x.amp"), "rb").read(), want, name)
                os.unlink(self.path("x.amp"))
        # Negative strides (copied): the same nonzeros; in another order,
        # which the .amp layout keeps as amped-prep does, so not its bytes.
        self.check_small(amped.Tensor.from_coo(IDX[::-1], VALS[::-1]))

    def test_one_based_and_shape(self):
        """index_base=1 and an explicit shape"""
        t = amped.Tensor.from_coo(IDX + 1, VALS, index_base=1)
        self.check_small(t)
        t = amped.Tensor.from_coo(IDX, VALS, shape=(10, 4, 6))
        self.check_small(t, (10, 4, 6))

    def test_duplicates(self):
        """repeated coordinates are summed; duplicates='error' refuses them"""
        idx = np.vstack([IDX, IDX[:2]])
        vals = np.concatenate([VALS, [10.0, 20.0]])
        t = amped.Tensor.from_coo(idx, vals)
        self.assertEqual(t.nnz, len(VALS))
        want = VALS.copy()
        want[:2] += [10.0, 20.0]
        self.assertAlmostEqual(t.norm ** 2, float(np.sum(want ** 2)), places=9)
        with self.assertRaises(amped.DuplicateError):
            amped.Tensor.from_coo(idx, vals, duplicates="error")

    def test_close(self):
        """close() frees the handle; a closed tensor refuses to be used"""
        t = amped.Tensor.from_coo(IDX, VALS)
        with t:
            self.assertEqual(t.nnz, 6)
        self.assertIn("closed", repr(t))
        with self.assertRaises(ValueError):
            t.nnz
        t.close()       # twice is fine

    def test_repr(self):
        t = amped.Tensor.from_coo(IDX, VALS)
        self.assertIn("shape=(3, 4, 5)", repr(t))


class TestBadInput(TempDirCase):
    """Bad input raises a clear error, of the class it names, and leaves
    nothing behind (no file, nothing in the temporary folder)."""

    def setUp(self):
        super().setUp()
        # Anything the library or the package might leave in TMPDIR lands here.
        self.scratch = tempfile.mkdtemp(prefix="amped-scratch-")
        self.old_tmp = os.environ.get("TMPDIR")
        os.environ["TMPDIR"] = self.scratch
        tempfile.tempdir = None

    def tearDown(self):
        if self.old_tmp is None:
            os.environ.pop("TMPDIR", None)
        else:
            os.environ["TMPDIR"] = self.old_tmp
        tempfile.tempdir = None
        left = os.listdir(self.scratch)
        os.rmdir(self.scratch) if not left else None
        self.assertEqual(left, [], "files left behind in TMPDIR")
        self.assertEqual(os.listdir(self.tmp), [], "files left behind")
        super().tearDown()

    def refused(self, exc, pattern, *args, **kw):
        with self.assertRaises(exc) as cm:
            amped.Tensor.from_coo(*args, **kw)
        self.assertRegex(str(cm.exception), pattern)
        return cm.exception

    def test_negative_index(self):
        """a negative index: RangeError (a ValueError) naming it"""
        idx = IDX.copy()
        idx[3, 1] = -1
        e = self.refused(ValueError, r"(?i)index|range|-1", idx, VALS)
        self.assertIsInstance(e, amped.Error)

    def test_index_below_base(self):
        """index 0 with index_base=1"""
        e = self.refused(ValueError, r"(?i)index|base|range", IDX, VALS, index_base=1)
        self.assertIsInstance(e, amped.Error)

    def test_index_beyond_shape(self):
        """an index beyond the shape given"""
        e = self.refused(ValueError, r"(?i)index|dim|range|beyond|shape", IDX, VALS,
                         shape=(3, 4, 4))
        self.assertIsInstance(e, amped.Error)

    def test_nan_value(self):
        """NaN and infinite values"""
        for bad in (np.nan, np.inf, -np.inf):
            vals = VALS.copy()
            vals[2] = bad
            with self.subTest(value=bad):
                e = self.refused(ValueError, r"(?i)finite|nan|inf|value", IDX, vals)
                self.assertIsInstance(e, amped.Error)

    def test_wrong_shapes(self):
        """indices and values that do not match, or are not 2-D / 1-D"""
        self.refused(amped.UsageError, r"do not match", IDX, VALS[:5])
        self.refused(amped.UsageError, r"2-D", IDX.ravel(), VALS)
        self.refused(amped.UsageError, r"1-D", IDX, np.ones((6, 2)))
        self.refused(amped.UsageError, r"do not match", IDX, VALS, shape=(3, 4))
        self.refused(amped.UsageError, r"1 or more", IDX, VALS, shape=(3, 0, 5))
        self.refused(amped.UsageError, r"modes", np.zeros((2, 33), dtype=np.int64),
                     np.ones(2))
        self.refused(amped.UsageError, r"index_base", IDX, VALS, index_base=2)
        self.refused(amped.UsageError, r"duplicates", IDX, VALS, duplicates="max")

    def test_empty(self):
        """no nonzeros: EmptyTensorError"""
        self.refused(amped.EmptyTensorError, r"no nonzeros",
                     np.zeros((0, 3), dtype=np.int64), np.zeros(0))

    def test_wrong_dtypes(self):
        """float or bool indices, complex or string values: TypeError"""
        self.refused(TypeError, r"integers", IDX.astype(np.float64), VALS)
        self.refused(TypeError, r"integers", IDX.astype(bool), VALS)
        self.refused(TypeError, r"real", IDX, VALS.astype(np.complex128))
        self.refused(TypeError, r"real", IDX, np.array(["a"] * 6))
        self.refused(TypeError, r"shape", IDX, VALS, shape="345")
        self.refused(TypeError, r"integer", IDX, VALS, shape=(3.0, 4, 5))

    def test_save_missing_directory(self):
        """save() into a missing directory: FileError (an OSError), no file"""
        t = amped.Tensor.from_coo(IDX, VALS)
        target = self.path("no/such/dir/x.amp")
        with self.assertRaises(amped.FileError) as cm:
            t.save(target)
        self.assertIsInstance(cm.exception, OSError)
        self.assertTrue(str(cm.exception))
        self.assertFalse(os.path.exists(self.path("no")))

    def test_load_missing(self):
        """load() of a missing file: FileError naming it"""
        with self.assertRaises(amped.FileError) as cm:
            amped.load(self.path("missing.tns"))
        self.assertIn("missing.tns", str(cm.exception))

    def test_load_bad_text(self):
        """load() of malformed text: ParseError naming the line"""
        bad = self.path("bad.tns")
        with open(bad, "w") as f:
            f.write("1 1 1 1.0\n2 2 x 2.0\n")
        try:
            with self.assertRaises(amped.ParseError) as cm:
                amped.load(bad)
            self.assertRegex(str(cm.exception), r":2\b")
        finally:
            os.unlink(bad)

    def test_no_leak_of_handles(self):
        """tensors freed by the garbage collector, many times over"""
        for _ in range(10):
            amped.Tensor.from_coo(IDX, VALS)
        gc.collect()


class TestCpArguments(unittest.TestCase):
    """cp() refuses bad arguments before any work."""

    def setUp(self):
        self.t = amped.Tensor.from_coo(IDX, VALS)

    def bad(self, exc, pattern, **kw):
        args = dict(rank=2, gpus=0, progress=False)
        args.update(kw)
        with self.assertRaises(exc) as cm:
            amped.cp(self.t, **args)
        self.assertRegex(str(cm.exception), pattern)

    def test_rank(self):
        self.bad(amped.UsageError, "rank", rank=0)
        self.bad(amped.UsageError, "rank", rank=5000)
        self.bad(TypeError, "rank", rank=2.0)
        self.bad(TypeError, "rank", rank=True)
        self.bad(TypeError, "rank", rank="2")

    def test_choices(self):
        self.bad(amped.UsageError, "method", method="sgd")
        self.bad(amped.UsageError, "constraint", constraint="positive")
        self.bad(amped.UsageError, "constraint", constraint=["nonneg", "none"])
        self.bad(amped.UsageError, "memory", memory="swap")
        self.bad(amped.UsageError, "precision", precision="f16")

    def test_numbers(self):
        self.bad(amped.UsageError, "l1", l1=-1)
        self.bad(amped.UsageError, "l2", l2=[0.1, 0.2])
        self.bad(amped.UsageError, "finite", l2=float("nan"))
        self.bad(amped.UsageError, "tol", tol=2)
        self.bad(amped.UsageError, "iters", iters=0)
        self.bad(amped.UsageError, "seed", seed=-1)
        self.bad(amped.UsageError, "gpus", gpus=-1)
        self.bad(amped.UsageError, "threads", threads=0)
        self.bad(TypeError, "tol", tol="small")

    def test_others(self):
        self.bad(TypeError, "callback", callback=3)
        self.bad(TypeError, "progress", progress="yes")
        self.bad(TypeError, "tensor", tensor=np.zeros((2, 2)))
        self.bad(TypeError, "output", output="x")
        self.bad(amped.UsageError, "init", init=[np.zeros((3, 2))])

    def test_library_refuses_unknown_option(self):
        """an option the library does not know: UsageError with its message"""
        self.bad(amped.UsageError, "no_such_option|no-such-option", no_such_option=1)
        self.bad(amped.UsageError, "partition", partition="random")


if __name__ == "__main__":
    unittest.main()
