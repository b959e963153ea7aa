"""amped.cp gives amped-run's fits and factors, to 1e-12, from the same
file, seed and options: CP-ALS and a constrained method, on the CPU and
(where this build sees one) on one GPU (issue 41)."""
import functools
import os
import shutil
import tempfile
import unittest

import numpy as np

from support import (TempDirCase, amped, amped_run, data_file, max_rel_diff, prep,
                     program, read_tns, run_factors)

TOL = 1e-12
NAME = "alog.tns"


@functools.lru_cache(maxsize=None)
def prepared():
    """alog.tns prepared by amped-prep: (tns, amp)."""
    tns = data_file(NAME)
    d = tempfile.mkdtemp(prefix="amped-pyrun-")
    import atexit
    atexit.register(shutil.rmtree, d, True)
    amp = os.path.join(d, "alog.amp")
    prep(tns, amp)
    return tns, amp


# (label, amped-run arguments, amped.cp keywords)
CASES = [
    ("als", ["-r", "6", "--seed", "3", "--iters", "8", "--tol", "0"],
     dict(rank=6, seed=3, iters=8, tol=0)),
    ("hals nonneg", ["-r", "5", "--seed", "11", "--iters", "6", "--method", "hals",
                     "--constraint", "nonneg", "--l2", "0.01"],
     dict(rank=5, seed=11, iters=6, method="hals", constraint="nonneg", l2=0.01)),
    ("ao-admm per-mode", ["-r", "4", "--seed", "2", "--iters", "4", "--method", "ao-admm",
                          "--constraint", "nonneg,none,nonneg", "--l1", "0.001"],
     dict(rank=4, seed=2, iters=4, method="ao-admm",
          constraint=["nonneg", "none", "nonneg"], l1=0.001)),
]


class TestSameAsAmpedRun(TempDirCase):
    def compare(self, res, js, prefix, label):
        fits = np.array([it["fit"] for it in js["iterations"]], dtype=np.float64)
        self.assertEqual(res.iters, len(fits), label)
        self.assertLessEqual(max_rel_diff(res.fits, fits), TOL, f"{label}: fits")
        self.assertLessEqual(abs(res.fit - js["final_fit"]), TOL, f"{label}: final fit")
        self.assertEqual(res.converged, bool(js["converged"]), label)
        lam, A = run_factors(prefix, len(res.factors))
        self.assertLessEqual(max_rel_diff(res.weights, lam), TOL, f"{label}: weights")
        for m, (a, b) in enumerate(zip(res.factors, A)):
            self.assertEqual(a.shape, b.shape, f"{label}: mode {m + 1} shape")
            self.assertLessEqual(max_rel_diff(a, b), TOL, f"{label}: mode {m + 1}")
        self.assertFalse(res.stopped)

    def same(self, gpus, tensor_from):
        tns, amp = prepared()
        if tensor_from == "amp":
            t = amped.load(amp)
        else:
            idx, vals = read_tns(tns)
            t = amped.Tensor.from_coo(idx, vals, index_base=1)
        for label, args, kw in CASES:
            with self.subTest(case=label):
                prefix = self.path(label.replace(" ", "_"))
                js = amped_run(amp, prefix, "--gpus", str(gpus), "-t", "2", *args)
                res = amped.cp(t, gpus=gpus, threads=2, progress=False, **kw)
                self.compare(res, js, prefix, f"{label}, gpus {gpus}")
                self.assertEqual(res.backend, "gpu" if gpus else "cpu")
                for f in res.factors + [res.weights]:
                    self.assertTrue(f.flags.owndata and f.flags.c_contiguous)
                    self.assertEqual(f.dtype, np.float64)

    def test_cpu_amp(self):
        """CPU: amped.load(x.amp) and amped-run x.amp agree to 1e-12"""
        program("amped-run")
        self.same(0, "amp")

    def test_cpu_from_coo(self):
        """CPU: from_coo of the .tns read by numpy and amped-run x.amp agree to 1e-12"""
        program("amped-run")
        self.same(0, "coo")

    def test_gpu(self):
        """one GPU: amped.cp(gpus=1) and amped-run --gpus 1 agree to 1e-12"""
        program("amped-run")
        if not amped.devices():
            self.skipTest("no GPU that this build can use (amped.devices() is empty)")
        self.same(1, "amp")

    def test_times_and_result(self):
        """the result's times, backend and repr"""
        tns, amp = prepared()
        res = amped.cp(amped.load(amp), rank=3, gpus=0, iters=3, tol=0, progress=False)
        self.assertEqual(res.iters, 3)
        self.assertIn("total", res.times)
        self.assertIn("mttkrp", res.times)
        self.assertGreater(res.times["total"], 0)
        self.assertEqual(res.rank, 3)
        self.assertIn("fit=", repr(res))

    def test_init(self):
        """init from a CPResult continues the run as amped-run --init does"""
        tns, amp = prepared()
        t = amped.load(amp)
        first = amped.cp(t, rank=4, gpus=0, iters=3, tol=0, seed=5, progress=False,
                         threads=2)
        prefix = self.path("first")
        amped_run(amp, prefix, "--gpus", "0", "-t", "2", "-r", "4", "--iters", "3",
                  "--tol", "0", "--seed", "5")
        js = amped_run(amp, self.path("second"), "--gpus", "0", "-t", "2", "-r", "4",
                       "--iters", "3", "--tol", "0", "--init", prefix)
        second = amped.cp(t, rank=4, gpus=0, iters=3, tol=0, init=first, progress=False,
                          threads=2)
        self.compare(second, js, self.path("second"), "init")
        also = amped.cp(t, rank=4, gpus=0, iters=3, tol=0, init=prefix, progress=False,
                        threads=2)
        self.assertLessEqual(max_rel_diff(also.fits, second.fits), TOL)


if __name__ == "__main__":
    unittest.main()
