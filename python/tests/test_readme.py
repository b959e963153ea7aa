"""The README's Python example, taken from README.md and run as it is: on
the CPU, and on a GPU where this build sees one (issue 41)."""
import os
import re
import subprocess
import sys
import unittest

from support import SRCDIR, TempDirCase, amped, child_env, need_module


def example(which: int = 0) -> str:
    with open(os.path.join(SRCDIR, "README.md")) as f:
        text = f.read()
    sec = re.search(r"^## Python\n(.*?)^## ", text, re.M | re.S)
    assert sec, "README.md has no '## Python' section"
    blocks = re.findall(r"^```python\n(.*?)^```", sec.group(1), re.M | re.S)
    assert blocks, "README.md's Python section has no ```python block"
    return blocks[which]


class TestReadme(TempDirCase):
    def run_example(self, prelude=""):
        code = prelude + example()
        env = child_env()
        p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                           cwd=self.tmp, env=env, timeout=120)
        self.assertEqual(p.returncode, 0, f"the README's example failed:\n{p.stdout}\n"
                                          f"{p.stderr}")
        return p.stdout

    def test_cpu(self):
        """the example on the CPU (amped.devices() made empty)"""
        need_module("sparse")
        need_module("tensorly")
        out = self.run_example("import amped\namped.devices = lambda: []\n")
        self.assertRegex(out, r"fit 0\.\d{4} after \d+ iterations on cpu")
        self.assertIn("[(300, 10), (400, 10), (500, 10)]", out)

    def test_methods(self):
        """the second example (the other methods and the sweep), after the first, on
        the CPU"""
        need_module("sparse")
        need_module("tensorly")
        code = "import amped\namped.devices = lambda: []\n" + example(0) + example(1)
        p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                           cwd=self.tmp, env=child_env(), timeout=300)
        self.assertEqual(p.returncode, 0, f"the README's second example failed:\n"
                                          f"{p.stdout}\n{p.stderr}")
        self.assertRegex(p.stdout, r"\[\(2, 0\.\d+, [-+.e\d]+, (0\.\d+|1\.0|nan)\), \(4, ")
        self.assertIn("[(300, ", p.stdout)

    def test_gpu(self):
        """the example as it is, on a GPU"""
        if not amped.devices():
            self.skipTest("no GPU that this build can use (amped.devices() is empty)")
        need_module("sparse")
        need_module("tensorly")
        out = self.run_example()
        self.assertRegex(out, r"fit 0\.\d{4} after \d+ iterations on gpu")


if __name__ == "__main__":
    unittest.main()
