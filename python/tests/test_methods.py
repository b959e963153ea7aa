"""CP-APR, completion, GCP and the starts/ranks sweep from Python equal
amped-run's from the same file, seed and options: every per-iteration
quantity amped-run's --json reports (log-likelihood, KKT violation, inner
iterations; training and test RMSE, the rows kept; the loss estimate, its
standard error, the exact loss, the rate, the failed epochs; every model's
fits, FMS and the per-rank table) to 1e-12 relative, and the factors that
-o writes. Option errors come back naming the option; a callback that
returns True stops each method (issue 41)."""
import functools
import math
import os
import shutil
import tempfile
import unittest

import numpy as np

from support import (TempDirCase, amped, amped_run, data_file, max_rel_diff, prep,
                     program, read_tns, run_factors)

TOL = 1e-12


def _tmpdir() -> str:
    d = tempfile.mkdtemp(prefix="amped-pymethods-")
    import atexit
    atexit.register(shutil.rmtree, d, True)
    return d


@functools.lru_cache(maxsize=None)
def alog():
    """alog.tns prepared by amped-prep: (tns, amp)."""
    tns = data_file("alog.tns")
    amp = os.path.join(_tmpdir(), "alog.amp")
    prep(tns, amp)
    return tns, amp


@functools.lru_cache(maxsize=None)
def counts():
    """alog's values rounded up to counts (CP-APR's data), as a .tns and
    its .amp: (tns, amp, indices, values)."""
    idx, vals = read_tns(data_file("alog.tns"))
    vals = np.ceil(vals)
    d = _tmpdir()
    tns = os.path.join(d, "counts.tns")
    with open(tns, "w") as f:
        for row, v in zip(idx, vals):
            f.write(" ".join(str(int(i)) for i in row) + f" {int(v)}\n")
    amp = os.path.join(d, "counts.amp")
    prep(tns, amp)
    return tns, amp, idx, vals


def series(js, key):
    return np.array([np.nan if it[key] is None else it[key] for it in js["iterations"]],
                    dtype=np.float64)


def same_nan(a, b):
    """Equal to TOL where finite, NaN where the other is NaN."""
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    if a.shape != b.shape or not np.array_equal(np.isnan(a), np.isnan(b)):
        return math.inf
    ok = ~np.isnan(b)
    return max_rel_diff(a[ok], b[ok])


class MethodCase(TempDirCase):
    def factors_equal(self, res, prefix, label):
        lam, A = run_factors(prefix, len(res.factors))
        self.assertLessEqual(max_rel_diff(res.weights, lam), TOL, f"{label}: weights")
        for m, (a, b) in enumerate(zip(res.factors, A)):
            self.assertEqual(a.shape, b.shape, f"{label}: mode {m + 1} shape")
            self.assertLessEqual(max_rel_diff(a, b), TOL, f"{label}: mode {m + 1}")

    def run_both(self, amp, t, label, args, kw):
        prefix = self.path(label.replace(" ", "_"))
        js = amped_run(amp, prefix, "--gpus", "0", "-t", "2", *args)
        res = amped.cp(t, gpus=0, threads=2, progress=False, **kw)
        self.assertEqual(res.iters, len(js["iterations"]), label)
        self.assertLessEqual(max_rel_diff(res.fits, [it.get("fit", it.get("loglik",
                                                                        it.get("loss")))
                                                     for it in js["iterations"]]), TOL,
                             f"{label}: the objective per iteration")
        self.assertEqual(res.converged, bool(js["converged"]), label)
        self.assertFalse(res.stopped)
        self.factors_equal(res, prefix, label)
        return res, js


class TestAPR(MethodCase):
    CASES = [
        ("cp-apr counts", ["-r", "4", "--seed", "3", "--iters", "6", "--method", "cp-apr"],
         dict(rank=4, seed=3, iters=6, method="cp-apr")),
        ("cp-apr options", ["-r", "3", "--seed", "5", "--iters", "4", "--method", "cp-apr",
                            "--inner", "4", "--kappa", "0.02", "--kappa-tol", "1e-8",
                            "--eps-div-zero", "1e-9", "--kappa-rule", "pyttb", "--tol", "0"],
         dict(rank=3, seed=5, iters=4, method="cp_apr", inner=4, kappa=0.02, kappa_tol=1e-8,
              eps_div_zero=1e-9, kappa_rule="pyttb", tol=0)),
    ]

    def test_same_as_amped_run(self):
        """cp-apr: loglik, KKT violation and inner iterations per outer iteration, and
        the factors, equal amped-run's (from the .amp and from from_coo)"""
        program("amped-run")
        tns, amp, idx, vals = counts()
        for source in ("amp", "coo"):
            t = (amped.load(amp) if source == "amp"
                 else amped.Tensor.from_coo(idx, vals, index_base=1))
            for label, args, kw in self.CASES:
                with self.subTest(case=label, source=source):
                    res, js = self.run_both(amp, t, label, args, kw)
                    self.assertEqual(res.method, "cp-apr")
                    self.assertLessEqual(max_rel_diff(res.loglik, series(js, "loglik")), TOL)
                    self.assertLessEqual(max_rel_diff(res.kkt, series(js, "kkt")), TOL)
                    self.assertTrue(np.array_equal(res.inner_iters, series(js, "inner")))
                    self.assertEqual(res.inner_iters.dtype, np.int64)
                    self.assertLessEqual(max_rel_diff([res.fit], [js["final_loglik"]]), TOL)
                    self.assertIsNone(res.rmse_train)
                    self.assertIsNone(res.loss)

    def test_noninteger(self):
        """cp-apr refuses values that are not counts, naming the nonzero; takes them
        with allow_noninteger=True, as amped-run does"""
        program("amped-run")
        tns, amp = alog()
        t = amped.load(amp)
        with self.assertRaises(amped.RangeError) as cm:
            amped.cp(t, 3, method="cp-apr", gpus=0, iters=2, progress=False)
        self.assertIn("not a count", str(cm.exception))
        self.run_both(amp, t, "apr noninteger",
                      ["-r", "3", "--method", "cp-apr", "--allow-noninteger", "--iters", "3"],
                      dict(rank=3, method="cp-apr", allow_noninteger=True, iters=3))


class TestCompletion(MethodCase):
    def check_completion(self, res, js, label):
        self.assertLessEqual(same_nan(res.rmse_train, series(js, "rmse_train")), TOL, label)
        self.assertLessEqual(same_nan(res.rmse_test, series(js, "rmse_test")), TOL, label)
        c = js["completion"]
        self.assertEqual(res.n_train, c["n_train"], label)
        self.assertEqual(res.n_test, c["n_test"], label)
        self.assertEqual(list(res.unobserved_rows), c["unobserved_rows"], label)
        self.assertEqual(list(res.singular_rows), c["singular_rows"], label)
        self.assertEqual(res.method, "als")
        self.assertIsNone(res.loglik)

    def test_holdout(self):
        """observed nonzeros with a holdout and a ridge: training and test RMSE per
        iteration, the entries and the rows kept, equal amped-run's"""
        program("amped-run")
        tns, amp = alog()
        t = amped.load(amp)
        res, js = self.run_both(
            amp, t, "holdout",
            ["-r", "5", "--seed", "7", "--iters", "6", "--tol", "0", "--observed", "nonzeros",
             "--holdout", "0.3", "--l2", "0.01"],
            dict(rank=5, seed=7, iters=6, tol=0, observed="nonzeros", holdout=0.3, l2=0.01))
        self.check_completion(res, js, "holdout")
        self.assertGreater(res.n_test, 0)
        self.assertTrue(np.all(np.isfinite(res.rmse_test)))

    def test_holdout_file_and_rows_without_entries(self):
        """observed nonzeros with --holdout-file, no ridge: the same RMSEs, and the
        rows with no training entry (a rank above what some rows hold) as amped-run
        counts them"""
        program("amped-run")
        tns, amp = alog()
        idx, vals = read_tns(tns)
        test = self.path("test.tns")
        with open(test, "w") as f:
            for row, v in list(zip(idx, vals))[::97]:
                f.write(" ".join(str(int(i)) for i in row) + f" {float(v)!r}\n")
        t = amped.load(amp)
        res, js = self.run_both(
            amp, t, "holdout file",
            ["-r", "6", "--seed", "2", "--iters", "4", "--tol", "0", "--observed",
             "nonzeros", "--holdout-file", test],
            dict(rank=6, seed=2, iters=4, tol=0, observed="nonzeros", holdout_file=test))
        self.check_completion(res, js, "holdout file")
        self.assertEqual(res.n_test, len(range(0, len(vals), 97)))
        self.assertGreater(sum(res.singular_rows) + sum(res.unobserved_rows), 0,
                           "rank 6 leaves some rows with too few entries")


class TestGCP(MethodCase):
    CASES = [
        ("gcp gaussian", ["-r", "3", "--seed", "4", "--iters", "4", "--method", "gcp",
                          "--loss", "gaussian", "--epoch-iters", "25", "--samples-grad",
                          "300", "--samples-loss", "700,900", "--rate", "0.01",
                          "--decay", "0.5", "--max-fails", "3"],
         dict(rank=3, seed=4, iters=4, method="gcp", loss="gaussian", epoch_iters=25,
              samples_grad=300, samples_loss=[700, 900], rate=0.01, decay=0.5, max_fails=3)),
        ("gcp huber", ["-r", "2", "--seed", "9", "--iters", "3", "--method", "gcp",
                       "--loss", "huber", "--huber-delta", "0.5", "--epoch-iters", "20"],
         dict(rank=2, seed=9, iters=3, method="gcp", loss="huber", huber_delta=0.5,
              epoch_iters=20)),
        # few samples a step, so that many rows are untouched and lazy differs from dense
        ("gcp lazy adam", ["-r", "3", "--seed", "2", "--iters", "3", "--method", "gcp",
                           "--loss", "gaussian", "--adam", "lazy", "--samples-grad", "40",
                           "--epoch-iters", "15"],
         dict(rank=3, seed=2, iters=3, method="gcp", loss="gaussian", adam="lazy",
              samples_grad=40, epoch_iters=15)),
    ]

    def test_same_as_amped_run(self):
        """gcp: the loss estimate, its standard error, the exact loss, the rate and the
        failed epochs per epoch, and the factors, equal amped-run's"""
        program("amped-run")
        tns, amp = alog()
        t = amped.load(amp)
        for label, args, kw in self.CASES:
            with self.subTest(case=label):
                res, js = self.run_both(amp, t, label, args, kw)
                self.assertEqual(res.method, "gcp")
                self.assertLessEqual(max_rel_diff(res.loss, series(js, "loss")), TOL)
                self.assertLessEqual(max_rel_diff(res.loss_stderr,
                                                  series(js, "loss_stderr")), TOL)
                self.assertLessEqual(same_nan(res.loss_exact, series(js, "loss_exact")), TOL)
                self.assertLessEqual(max_rel_diff(res.rates, series(js, "rate")), TOL)
                self.assertTrue(np.array_equal(res.failed,
                                               [it["failed"] for it in js["iterations"]]))
                self.assertLessEqual(max_rel_diff([res.fit], [js["final_loss"]]), TOL)
        # alog's 3 modes have few enough cells that the exact loss is computed
        self.assertTrue(np.all(np.isfinite(res.loss_exact)), res.loss_exact)


class TestSweep(TempDirCase):
    def test_same_as_amped_run(self):
        """sweep: every model's fits, final fit, seed and FMS, the per-rank table, the
        chosen rank and every model's factors equal amped-run --starts --ranks
        --choose --keep-all"""
        program("amped-run")
        tns, amp = alog()
        prefix = self.path("sw")
        js = amped_run(amp, prefix, "--gpus", "0", "-t", "2", "--starts", "3", "--ranks",
                       "4,2", "--choose", "fms", "0.3", "--keep-all", "--seed", "5",
                       "--iters", "8", "--method", "hals", "--constraint", "nonneg")
        sw = amped.sweep(amped.load(amp), ranks=[4, 2], starts=3, choose=("fms", 0.3),
                         seed=5, iters=8, method="hals", constraint="nonneg", threads=2,
                         progress=False)
        self.assertEqual(len(sw.models), len(js["models"]))
        for k, (m, jm) in enumerate(zip(sw.models, js["models"])):
            label = f"model {k}"
            self.assertEqual((m.rank, m.seed, m.iters), (jm["rank"], jm["seed"], jm["iters"]),
                             label)
            self.assertEqual(m.converged, jm["converged"], label)
            self.assertLessEqual(max_rel_diff(m.fits, jm["fits"]), TOL, label)
            self.assertLessEqual(max_rel_diff([m.fit], [jm["final_fit"]]), TOL, label)
            self.assertLessEqual(max_rel_diff([m.fms], [jm["fms"]]), TOL, label)
            lam, A = run_factors(f"{prefix}.r{m.rank}.s{m.seed}", 3)
            self.assertLessEqual(max_rel_diff(m.weights, lam), TOL, label)
            for a, b in zip(m.factors, A):
                self.assertLessEqual(max_rel_diff(a, b), TOL, label)
        self.assertEqual([r.rank for r in sw.ranks], [2, 4], "ascending")
        for r, jr in zip(sw.ranks, js["ranks"]):
            self.assertEqual(r.rank, jr["rank"])
            self.assertEqual(sw.models[r.best_model].seed, jr["best_seed"])
            for key in ("best_fit", "worst_fit", "fms_min", "fms_median"):
                self.assertLessEqual(max_rel_diff([getattr(r, key)], [jr[key]]), TOL, key)
            self.assertLessEqual(max_rel_diff([r.spread], [jr["fit_spread"]]), TOL)
            # the best start is the best of its rank's, and its FMS against itself 1
            fits = [m.fit for m in sw.models if m.rank == r.rank]
            self.assertEqual(r.best_fit, max(fits))
            self.assertAlmostEqual(sw.models[r.best_model].fms, 1.0, places=12)
            lam, A = run_factors(f"{prefix}.r{r.rank}", 3)
            self.assertLessEqual(max_rel_diff(sw.best(r.rank).weights, lam), TOL)
        self.assertEqual(sw.chosen_rank, js["choose"]["rank"])
        self.assertEqual(sw.reason, js["choose"]["reason"])
        self.assertFalse(sw.stopped)

    def test_gpu(self):
        """sweep(gpus=1): every model's fits and factors equal amped-run --starts
        --ranks --gpus 1 --keep-all's (one GPU, the batch on it)"""
        if not amped.devices():
            self.skipTest("no GPU that this build can use (amped.devices() is empty)")
        program("amped-run")
        tns, amp = alog()
        prefix = self.path("swg")
        js = amped_run(amp, prefix, "--gpus", "1", "--starts", "2", "--ranks", "3,2",
                       "--keep-all", "--seed", "4", "--iters", "6")
        sw = amped.sweep(amped.load(amp), ranks=[3, 2], starts=2, seed=4, iters=6, gpus=1,
                         progress=False)
        self.assertEqual(len(sw.models), len(js["models"]))
        for k, (m, jm) in enumerate(zip(sw.models, js["models"])):
            label = f"model {k}"
            self.assertEqual(m.backend, "gpu", label)
            self.assertEqual((m.rank, m.seed, m.iters), (jm["rank"], jm["seed"], jm["iters"]),
                             label)
            self.assertLessEqual(max_rel_diff(m.fits, jm["fits"]), TOL, label)
            lam, A = run_factors(f"{prefix}.r{m.rank}.s{m.seed}", 3)
            self.assertLessEqual(max_rel_diff(m.weights, lam), TOL, label)
            for a, b in zip(m.factors, A):
                self.assertLessEqual(max_rel_diff(a, b), TOL, label)

    def test_one_rank(self):
        """sweep of one rank, no rule: the table's row, no chosen rank"""
        tns, amp = alog()
        sw = amped.sweep(amped.load(amp), ranks=3, starts=2, iters=3, progress=False)
        self.assertEqual(len(sw.models), 2)
        self.assertEqual([m.seed for m in sw.models], [1, 2])
        self.assertIsNone(sw.chosen_rank)
        self.assertEqual(sw.reason, "")
        self.assertIs(sw.best(), sw.models[sw.ranks[0].best_model])


class TestErrorsAndStops(TempDirCase):
    def tensor(self):
        return amped.load(alog()[1])

    def test_option_errors(self):
        """option errors raise amped.UsageError (a ValueError) naming the option"""
        t = self.tensor()
        cases = [
            (dict(method="gcp", loss="nope"), "--loss"),
            (dict(method="cp-apr", kappa=-1), "--kappa"),
            (dict(method="cp-apr", inner=0), "--inner"),
            (dict(method="cp-apr", eps_div_zero=0), "--eps-div-zero"),
            (dict(method="gcp", rate=0), "--rate"),
            (dict(method="gcp", samples_grad="1,2,3"), "--samples-grad"),
            (dict(loss="gaussian"), "--loss"),                 # gcp's, method als
            (dict(method="gcp", loss="gaussian", huber_delta=1), "--huber-delta"),
            (dict(observed="some"), "--observed"),
            (dict(observed="nonzeros", holdout_file=self.path("none.tns")), "none.tns"),
            (dict(holdout_file="x.tns"), "--holdout-file"),
        ]
        for kw, name in cases:
            with self.subTest(kw=kw):
                with self.assertRaises(amped.Error) as cm:
                    amped.cp(t, 2, gpus=0, iters=1, progress=False, **kw)
                self.assertIn(name, str(cm.exception))
        with self.assertRaises(amped.UsageError) as cm:
            amped.cp(t, 2, gpus=0, holdout=0.2, progress=False)
        self.assertIn("--holdout", str(cm.exception))
        with self.assertRaises(ValueError):
            amped.cp(t, 2, holdout=1.5)
        with self.assertRaises(TypeError):
            amped.cp(t, 2, starts=3)
        sweeps = [
            (dict(ranks=[3], choose="fit-elbow"), "--choose fit-elbow"),
            (dict(ranks=[2, 3], choose=("fms", 0.9)), "--choose fms"),
            (dict(ranks=[2], method="cp-apr"), "--method cp-apr"),
            (dict(ranks=[2], choose="nope"), "--choose"),
            (dict(ranks=[2], memory="stream"), "--memory"),
            (dict(ranks=[2], gpus=2), "--gpus"),
        ]
        for kw, name in sweeps:
            with self.subTest(kw=kw):
                with self.assertRaises(amped.UsageError) as cm:
                    amped.sweep(t, iters=1, progress=False, **kw)
                self.assertIn(name, str(cm.exception))

    def test_stop_each_method(self):
        """a callback returning True at iteration 2 stops cp-apr, gcp and completion
        there (every history 2 long), and every model of a sweep; a run after each
        goes to its end"""
        tns, amp, idx, vals = counts()
        t = amped.load(amp)
        stop2 = lambda info: info.iteration >= 2   # noqa: E731
        runs = [
            (dict(method="cp-apr", iters=6), ("loglik", "kkt", "inner_iters")),
            (dict(method="gcp", loss="poisson", iters=6, epoch_iters=10),
             ("loss", "loss_exact", "rates", "failed")),
            (dict(observed="nonzeros", holdout=0.2, iters=6, tol=0),
             ("rmse_train", "rmse_test")),
        ]
        for kw, attrs in runs:
            with self.subTest(kw=kw):
                res = amped.cp(t, 3, gpus=0, callback=stop2, progress=False, **kw)
                self.assertTrue(res.stopped)
                self.assertEqual(res.iters, 2)
                for a in attrs + ("fits",):
                    self.assertEqual(len(getattr(res, a)), 2, a)
                again = amped.cp(t, 3, gpus=0, progress=False, **kw)
                self.assertFalse(again.stopped)
                self.assertEqual(again.iters, 6)
        seen = []

        def stop_sweep(info):
            seen.append((info.model, info.rank, info.iteration))
            return info.iteration >= 2
        sw = amped.sweep(t, ranks=[2, 3], starts=2, iters=6, tol=0, callback=stop_sweep,
                         progress=False)
        self.assertTrue(sw.stopped)
        self.assertTrue(all(m.stopped and m.iters <= 2 for m in sw.models))
        self.assertEqual(sorted({(m, r) for m, r, _ in seen}),
                         [(0, 2), (1, 2), (2, 3), (3, 3)], "model and rank in the callback")
        sw = amped.sweep(t, ranks=[2, 3], starts=2, iters=6, tol=0, progress=False)
        self.assertFalse(sw.stopped)
        self.assertTrue(all(m.iters == 6 for m in sw.models))


if __name__ == "__main__":
    unittest.main()
