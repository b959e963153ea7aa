"""The model handed to TensorLy (to_tensorly) and pyttb (to_pyttb): its fit,
recomputed with NumPy from the sparse tensor, is amped's to 1e-10; and
tensors from pydata sparse and pyttb (from_sparse) (issue 41)."""
import sys
import unittest

import numpy as np

from support import TempDirCase, amped, child_env, data_file, fit_of, need_module, read_tns, summed

TOL = 1e-10


def alog():
    idx, vals = read_tns(data_file("alog.tns"))
    return idx, vals


class TestModels(TempDirCase):
    def result(self, **kw):
        idx, vals = alog()
        t = amped.Tensor.from_coo(idx, vals, index_base=1)
        args = dict(rank=5, gpus=0, iters=10, tol=0, seed=4, progress=False)
        args.update(kw)
        res = amped.cp(t, **args)
        coords, v = summed(idx - 1, vals)
        return res, coords, v

    def test_not_imported(self):
        """import amped imports neither tensorly nor pyttb nor sparse"""
        import subprocess
        code = ("import sys, amped; bad = [m for m in ('tensorly', 'pyttb', 'sparse', "
                "'tqdm') if m in sys.modules]; print(bad); sys.exit(1 if bad else 0)")
        p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                           env=child_env(), cwd=self.tmp)
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)

    def test_numpy_fit(self):
        """the factors and weights themselves: fit recomputed = amped's"""
        for kw in (dict(), dict(method="hals", constraint="nonneg")):
            with self.subTest(**kw):
                res, coords, v = self.result(**kw)
                fit = fit_of(coords, v, res.weights, res.factors)
                self.assertLessEqual(abs(fit - res.fit), TOL, f"{fit!r} vs {res.fit!r}")
                self.assertEqual(res.fits[-1], res.fit)

    def test_tensorly(self):
        """to_tensorly(): a CPTensor whose fit is amped's to 1e-10"""
        tl = need_module("tensorly")
        res, coords, v = self.result()
        cpt = res.to_tensorly()
        from tensorly.cp_tensor import CPTensor
        self.assertIsInstance(cpt, CPTensor)
        weights, factors = cpt
        fit = fit_of(coords, v, tl.to_numpy(weights), [tl.to_numpy(f) for f in factors])
        self.assertLessEqual(abs(fit - res.fit), TOL, f"{fit!r} vs {res.fit!r}")
        # TensorLy's own view of the model, on a small corner of it.
        sub = [f[:7] for f in factors]
        dense = tl.cp_to_tensor((weights, sub))
        i = (3, 2, 5)
        want = float(np.sum(weights * sub[0][i[0]] * sub[1][i[1]] * sub[2][i[2]]))
        self.assertAlmostEqual(float(dense[i]), want, places=12)

    def test_pyttb(self):
        """to_pyttb(): a ktensor whose fit is amped's to 1e-10"""
        ttb = need_module("pyttb")
        res, coords, v = self.result(method="hals", constraint="nonneg")
        k = res.to_pyttb()
        self.assertIsInstance(k, ttb.ktensor)
        fit = fit_of(coords, v, np.asarray(k.weights, dtype=np.float64),
                     [np.asarray(f) for f in k.factor_matrices])
        self.assertLessEqual(abs(fit - res.fit), TOL, f"{fit!r} vs {res.fit!r}")
        self.assertEqual(tuple(k.shape), res.shape)


class TestFromSparse(unittest.TestCase):
    def test_pydata_sparse(self):
        """from_sparse(sparse.COO): the same tensor as from_coo of its coords"""
        sparse = need_module("sparse")
        x = sparse.random((30, 40, 50), density=0.01, random_state=3)
        t = amped.Tensor.from_sparse(x)
        self.assertEqual(t.shape, (30, 40, 50))
        self.assertEqual(t.nnz, x.nnz)
        self.assertAlmostEqual(t.norm, float(np.linalg.norm(x.data)), places=12)
        with self.assertRaises(ValueError):
            amped.Tensor.from_sparse(sparse.COO(x.coords, x.data, shape=x.shape,
                                                fill_value=1.0))

    def test_pyttb_sptensor(self):
        """from_sparse(pyttb.sptensor): its subs, vals and shape"""
        ttb = need_module("pyttb")
        idx, vals = alog()
        x = ttb.sptensor(idx - 1, vals[:, None], shape=tuple(int(d) for d in idx.max(0)))
        t = amped.Tensor.from_sparse(x)
        self.assertEqual(t.shape, tuple(int(d) for d in idx.max(0)))
        self.assertEqual(t.nnz, x.nnz)
        self.assertAlmostEqual(t.norm, float(np.linalg.norm(vals)), places=9)

    def test_scipy(self):
        """from_sparse of a SciPy sparse matrix: 2 modes"""
        try:
            import scipy.sparse
        except ImportError:
            self.skipTest("no scipy (optional: from_sparse of a SciPy matrix)")
        m = scipy.sparse.random(20, 30, density=0.1, random_state=1, format="csr")
        t = amped.Tensor.from_sparse(m)
        self.assertEqual(t.shape, (20, 30))
        self.assertEqual(t.nnz, m.nnz)

    def test_other(self):
        """anything else: TypeError"""
        with self.assertRaises(TypeError):
            amped.Tensor.from_sparse(np.zeros((3, 3)))


if __name__ == "__main__":
    unittest.main()
