"""Stopping a run: a callback told to stop by another thread, Ctrl-C
(SIGINT) during cp(), an exception in the callback; each time the next
cp() in the same process works (issue 41)."""
import os
import signal
import subprocess
import threading
import time
import unittest

import numpy as np

from support import amped, data_file, read_tns

MAX_ITERS = 100000


def tensor():
    # splatt-med: 100,000 nonzeros, so an iteration takes a few ms; else
    # random, for a machine without the data.
    try:
        idx, vals = read_tns(data_file("alog.tns"))
        return amped.Tensor.from_coo(idx, vals, index_base=1)
    except unittest.SkipTest:
        rng = np.random.default_rng(0)
        idx = rng.integers(0, 200, size=(20000, 3))
        return amped.Tensor.from_coo(idx, rng.random(20000))


def long_run(t, **kw):
    args = dict(rank=8, gpus=0, iters=MAX_ITERS, tol=0, progress=False, threads=1)
    args.update(kw)
    return amped.cp(t, **args)


def short_run(t):
    return amped.cp(t, rank=3, gpus=0, iters=3, tol=0, progress=False, seed=9)


class TestInterrupt(unittest.TestCase):
    def setUp(self):
        # A process started in the background by a non-interactive shell
        # (make check under `nohup ... &`) inherits SIGINT ignored, and
        # cp() rightly leaves an ignored SIGINT alone: these tests are of
        # the usual case, Python's own handler.
        self.inherited = signal.getsignal(signal.SIGINT)
        if self.inherited is signal.SIG_IGN:
            signal.signal(signal.SIGINT, signal.default_int_handler)
            self.addCleanup(signal.signal, signal.SIGINT, signal.SIG_IGN)
        self.t = tensor()
        self.reference = short_run(self.t)

    def again(self):
        """the next run works and gives the same model as before"""
        res = short_run(self.t)
        self.assertEqual(res.iters, 3)
        self.assertFalse(res.stopped)
        np.testing.assert_array_equal(res.fits, self.reference.fits)
        for a, b in zip(res.factors, self.reference.factors):
            np.testing.assert_array_equal(a, b)

    def test_callback_flag_from_thread(self):
        """a flag set by a threading.Timer, returned by the callback, stops the run"""
        stop = threading.Event()
        timers = []
        seen = []

        def callback(info):
            seen.append(info)
            if info.iteration == 1:
                timer = threading.Timer(0.2, stop.set)
                timer.start()
                timers.append(timer)
            return stop.is_set()

        t0 = time.monotonic()
        res = long_run(self.t, callback=callback)
        self.assertLess(time.monotonic() - t0, 30)
        self.assertTrue(res.stopped)
        self.assertFalse(res.converged)
        self.assertLess(res.iters, MAX_ITERS)
        self.assertGreaterEqual(res.iters, 1)
        self.assertEqual(len(res.fits), res.iters)
        self.assertEqual(len(res.factors), 3)
        self.assertTrue(all(i.phase == "iteration" for i in seen))
        self.assertEqual([i.iteration for i in seen], list(range(1, len(seen) + 1)))
        self.assertEqual(seen[-1].iteration, res.iters)
        np.testing.assert_array_equal([i.fit for i in seen], res.fits)
        self.again()

    def test_sigint(self):
        """SIGINT during cp(): KeyboardInterrupt once the library has stopped"""
        before = signal.getsignal(signal.SIGINT)
        fired = []

        # Sent from the callback itself: a thread's os.kill needs the GIL,
        # which a loaded 2-core machine can keep from it for the whole run
        # (the main thread takes it back at every iteration's callback).
        def callback(info):
            if info.iteration == 1:
                fired.append(info.iteration)
                os.kill(os.getpid(), signal.SIGINT)
            return False

        t0 = time.monotonic()
        with self.assertRaises(KeyboardInterrupt):
            long_run(self.t, callback=callback)
        self.assertLess(time.monotonic() - t0, 30)
        self.assertEqual(len(fired), 1)
        self.assertIs(signal.getsignal(signal.SIGINT), before)
        self.again()

    def test_sigint_without_callback(self):
        """SIGINT with no callback of the user's stops the run as well"""
        # Another process sends it: no thread of this one has to win the GIL.
        killer = subprocess.Popen(["sh", "-c", f"sleep 0.3; kill -INT {os.getpid()}"])
        try:
            with self.assertRaises(KeyboardInterrupt):
                long_run(self.t, iters=MAX_ITERS)
        finally:
            killer.kill()
            killer.wait()
        self.again()

    def test_sigint_ignored(self):
        """an ignored SIGINT stays ignored: cp() installs no handler of its own
        and runs to its end"""
        self.addCleanup(signal.signal, signal.SIGINT, signal.getsignal(signal.SIGINT))
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        seen = []

        def callback(info):
            if info.iteration == 1:
                os.kill(os.getpid(), signal.SIGINT)
            seen.append(signal.getsignal(signal.SIGINT))
            return False

        res = amped.cp(self.t, rank=3, gpus=0, iters=5, tol=0, progress=False,
                       callback=callback)
        self.assertEqual(res.iters, 5)
        self.assertFalse(res.stopped)
        self.assertEqual(len(seen), 5)
        self.assertTrue(all(h is signal.SIG_IGN for h in seen))

    def test_callback_exception(self):
        """an exception in the callback stops the run and comes out of cp()"""
        class Boom(Exception):
            pass

        def callback(info):
            if info.iteration == 2:
                raise Boom("at iteration 2")
            return False

        with self.assertRaises(Boom):
            long_run(self.t, callback=callback)
        self.again()

    def test_run_in_thread(self):
        """cp() on another thread, beside Python code on this one"""
        out = {}

        def work():
            out["res"] = short_run(self.t)

        th = threading.Thread(target=work)
        th.start()
        ticks = 0
        while th.is_alive():
            ticks += 1
            time.sleep(0.001)
        th.join()
        self.assertEqual(out["res"].iters, 3)
        np.testing.assert_array_equal(out["res"].fits, self.reference.fits)

    def test_many_runs(self):
        """runs one after another in one process"""
        for _ in range(5):
            self.again()


if __name__ == "__main__":
    unittest.main()
