"""Two decompositions one after another in one process, a tensor built,
loaded, saved and refused, leak nothing of libamped's: in a sanitizer build
(tests/python.sh preloads libasan), a child python runs them under
LeakSanitizer, and no leak report may have a frame in libamped (python's
own allocations at exit have none) but the canary's, one handle left
unfreed on purpose to show that such a leak is seen (issue 41)."""
import os
import re
import subprocess
import sys
import unittest

from support import TempDirCase, child_env

CHILD = r"""
import os, signal, threading, numpy as np, amped
rng = np.random.default_rng(1)
idx = rng.integers(0, 50, size=(3000, 3))
t = amped.Tensor.from_coo(idx, rng.random(3000))
for _ in range(2):
    r = amped.cp(t, rank=4, gpus=0, iters=4, tol=0, progress=False)
stop = lambda info: info.iteration >= 2
r = amped.cp(t, rank=4, gpus=0, iters=50, tol=0, progress=False, callback=stop)
assert r.stopped
t.save("x.amp")
u = amped.load("x.amp")
r = amped.cp(u, rank=3, gpus=0, iters=3, progress=False, method="hals", constraint="nonneg")
for bad in (dict(shape=(2, 2, 2)), dict(index_base=1)):
    try:
        amped.Tensor.from_coo(idx, rng.random(3000), **bad)
    except amped.Error:
        pass
try:
    amped.cp(t, rank=2, gpus=0, progress=False, no_such_option=1)
except amped.Error:
    pass
try:
    t.save("no/such/dir/x.amp")
except amped.Error:
    pass
del t, u, r
# The canary: one options handle never freed, which the report must show
# (proof that a leak of libamped's is seen at all).
import ctypes
canary = ctypes.c_void_p()
amped._lib.lib.amped_options_new(ctypes.byref(canary))
print("done")
"""

# A frame of amped's own code, symbolized (amp_*, amped_*, AMP_*) or not.
OURS = re.compile(r"#\d+ 0x[0-9a-f]+ in (amped?_|AMP_)\w*|libamped")


class TestLeaks(TempDirCase):
    def test_no_leak(self):
        """LeakSanitizer finds no leak with a frame in libamped"""
        if "AMPED_TEST_ASAN_OPTIONS" not in os.environ:
            self.skipTest("not a sanitizer build (libamped is not linked with libasan)")
        env = child_env()
        base = env["AMPED_TEST_ASAN_OPTIONS"]
        env["ASAN_OPTIONS"] = (base + ":" if base else "") + "detect_leaks=1:exitcode=0"
        p = subprocess.run([sys.executable, "-c", CHILD], capture_output=True, text=True,
                           cwd=self.tmp, env=env, timeout=300)
        self.assertIn("done", p.stdout, p.stderr[-3000:])
        reports = re.split(r"\n(?=(?:Direct|Indirect) leak)", p.stderr)
        ours = [r for r in reports if re.match(r"(Direct|Indirect) leak", r)
                and OURS.search(r)]
        canary = [r for r in ours if "amped_options_new" in r]
        self.assertTrue(canary, "LeakSanitizer did not report the canary (an amped_options "
                                "left unfreed on purpose):\n" + p.stderr[-2000:])
        others = [r for r in ours if r not in canary]
        self.assertEqual(others, [], "leaks with a frame in libamped:\n"
                         + "\n".join(others)[:4000])


if __name__ == "__main__":
    unittest.main()
